//! The OTLP trace export: spans encoded straight into the protobuf bytes of an
//! `ExportTraceServiceRequest` ([`encode`]) by our own span processor ([`OtlpProcessor`]), and
//! sent to the collector over unary gRPC (HTTP/2 cleartext, gRPC's 5-byte framing) or as an
//! OTLP/HTTP protobuf POST, on one kept-alive connection.
//!
//! It replaces `opentelemetry-otlp`'s exporter and the SDK's batch processor: the conversion into
//! proto structs and prost encoding were 13% of a gateway's CPU when every request is traced, and
//! the batch processor's hand-over (every span moved into a fresh batch vector on another thread,
//! and freed there) about 5% more (README, *The cost of metrics and of traces*).

mod config;
mod encode;
mod processor;

use std::sync::mpsc::RecvTimeoutError;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderValue, Request, header};
use http_body_util::{BodyExt, Full, Limited};
use hyper::client::conn::{http1, http2};
use hyper_util::rt::{TokioExecutor, TokioIo};
use opentelemetry::InstrumentationScope;

pub use config::{Config, Limits, Protocol};
pub use processor::OtlpProcessor;

/// gRPC's message prefix: a compression flag and the message's length (big-endian u32).
const GRPC_PREFIX: usize = 5;
/// The most of a collector's answer read (an `ExportTraceServiceResponse` is a few bytes).
const MAX_RESPONSE: usize = 64 * 1024;

/// Sends encoded batches to the collector; used by one thread at a time (the processor's).
struct Exporter {
    spare: Spare,
    runtime: tokio::runtime::Handle,
    client: Arc<Client>,
}

impl Exporter {
    /// Call it inside a tokio runtime: the requests run on it.
    fn new(config: Config) -> Result<Self, String> {
        let runtime = tokio::runtime::Handle::try_current()
            .map_err(|_| "the OTLP exporter must be built inside a tokio runtime".to_owned())?;
        Ok(Self {
            spare: Spare::default(),
            runtime,
            client: Arc::new(Client {
                config,
                connection: Mutex::new(None),
            }),
        })
    }

    fn config(&self) -> &Config {
        &self.client.config
    }

    /// The request body: gRPC-framed, or the bare protobuf message for HTTP.
    fn body(&self, resource: &[u8], scopes: &[(InstrumentationScope, Vec<u8>)]) -> Bytes {
        let spans: usize = scopes.iter().map(|(_, s)| s.len()).sum();
        let mut buf = self.spare.take().unwrap_or_default();
        buf.clear();
        buf.reserve(GRPC_PREFIX + resource.len() + spans + 64 * scopes.len() + 32);
        buf.resize(GRPC_PREFIX, 0);
        encode::request_of(&mut buf, resource, scopes);
        let len = (buf.len() - GRPC_PREFIX) as u32;
        buf[1..GRPC_PREFIX].copy_from_slice(&len.to_be_bytes());
        let body = Bytes::from_owner(Recycled {
            buf,
            spare: self.spare.clone(),
        });
        match self.client.config.protocol {
            Protocol::Grpc => body,
            Protocol::HttpProtobuf => body.slice(GRPC_PREFIX..),
        }
    }

    /// Exports one batch and waits for the collector's answer (bounded by the export timeout).
    /// Called outside tokio: the request runs as a task on the runtime, which keeps running
    /// while the process shuts down (the processor is stopped before the runtime).
    fn export(
        &self,
        resource: &[u8],
        scopes: &[(InstrumentationScope, Vec<u8>)],
    ) -> Result<(), String> {
        let body = self.body(resource, scopes);
        let client = self.client.clone();
        let timeout = client.config.timeout;
        let (done, result) = std::sync::mpsc::sync_channel(1);
        self.runtime.spawn(async move {
            let sent = match tokio::time::timeout(timeout, client.send(body)).await {
                Ok(result) => result,
                Err(_) => Err(format!("no answer within {timeout:?}")),
            };
            let _ = done.send(sent);
        });
        // The task bounds itself by the timeout, but only while the runtime runs it: the margin
        // covers a runtime that is busy, and nothing waits forever on one that is stuck.
        match result.recv_timeout(timeout + Duration::from_secs(5)) {
            Ok(sent) => sent,
            Err(RecvTimeoutError::Timeout) => Err(format!(
                "the export did not finish within {timeout:?} (the runtime is not running it)"
            )),
            Err(RecvTimeoutError::Disconnected) => {
                Err("the runtime stopped before the export finished".to_owned())
            }
        }
    }

    /// Closes the connection.
    fn close(&self) {
        if let Ok(mut connection) = self.client.connection.lock() {
            connection.take();
        }
    }
}

/// The buffer of the last request, handed back when hyper has sent it (its `Bytes` dropped),
/// so the next request is encoded into memory already mapped: a new buffer of megabytes per
/// batch cost more in page faults than the encoding itself.
#[derive(Clone, Default)]
struct Spare(Arc<Mutex<Option<Vec<u8>>>>);

impl Spare {
    fn take(&self) -> Option<Vec<u8>> {
        self.0.lock().ok().and_then(|mut s| s.take())
    }
}

/// A request body that returns its buffer to [`Spare`] when dropped.
struct Recycled {
    buf: Vec<u8>,
    spare: Spare,
}

impl AsRef<[u8]> for Recycled {
    fn as_ref(&self) -> &[u8] {
        &self.buf
    }
}

impl Drop for Recycled {
    fn drop(&mut self) {
        if let Ok(mut spare) = self.spare.0.lock() {
            *spare = Some(std::mem::take(&mut self.buf));
        }
    }
}

/// The connection to the collector, opened on first use and again after a failure.
struct Client {
    config: Config,
    /// Taken by the export using it (exports never overlap), put back after a success.
    connection: Mutex<Option<Connection>>,
}

enum Connection {
    Http1(http1::SendRequest<Full<Bytes>>),
    Http2(http2::SendRequest<Full<Bytes>>),
}

impl Connection {
    fn is_closed(&self) -> bool {
        match self {
            Self::Http1(s) => s.is_closed(),
            Self::Http2(s) => s.is_closed(),
        }
    }

    async fn send(
        &mut self,
        request: Request<Full<Bytes>>,
    ) -> hyper::Result<http::Response<hyper::body::Incoming>> {
        match self {
            Self::Http1(s) => {
                s.ready().await?;
                s.send_request(request).await
            }
            Self::Http2(s) => {
                s.ready().await?;
                s.send_request(request).await
            }
        }
    }
}

impl Client {
    async fn send(&self, body: Bytes) -> Result<(), String> {
        let reused = self.connection.lock().ok().and_then(|mut c| c.take());
        let mut connection = match reused {
            Some(c) if !c.is_closed() => c,
            _ => self.connect().await?,
        };
        let response = connection
            .send(self.request(body))
            .await
            .map_err(|e| format!("sending spans: {e}"))?;
        let (parts, body) = response.into_parts();
        let answer = Limited::new(body, MAX_RESPONSE)
            .collect()
            .await
            .map_err(|e| format!("reading the collector's answer: {e}"))?;
        if !parts.status.is_success() {
            return Err(format!("the collector answered HTTP {}", parts.status));
        }
        if self.config.protocol == Protocol::Grpc {
            // Trailers, or the headers of a trailers-only answer.
            let trailers = answer.trailers().unwrap_or(&parts.headers);
            let status = trailers
                .get("grpc-status")
                .or_else(|| parts.headers.get("grpc-status"));
            match status.map(HeaderValue::as_bytes) {
                Some(b"0") => {}
                Some(code) => {
                    let message = trailers
                        .get("grpc-message")
                        .and_then(|m| m.to_str().ok())
                        .unwrap_or_default();
                    return Err(format!(
                        "the collector answered grpc-status {}: {message}",
                        String::from_utf8_lossy(code)
                    ));
                }
                None => return Err("the collector's answer has no grpc-status".to_owned()),
            }
        }
        if let Ok(mut slot) = self.connection.lock() {
            *slot = Some(connection);
        }
        Ok(())
    }

    fn request(&self, body: Bytes) -> Request<Full<Bytes>> {
        let c = &self.config;
        let mut request = Request::new(Full::new(body));
        *request.method_mut() = http::Method::POST;
        *request.uri_mut() = c.uri.clone();
        let headers = request.headers_mut();
        headers.clone_from(&c.headers);
        headers.insert(
            header::USER_AGENT,
            HeaderValue::from_static(concat!("a2a-otlp-exporter/", env!("CARGO_PKG_VERSION"))),
        );
        match c.protocol {
            Protocol::Grpc => {
                headers.insert(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("application/grpc"),
                );
                headers.insert(header::TE, HeaderValue::from_static("trailers"));
                if let Ok(v) = HeaderValue::from_str(&format!("{}m", c.timeout.as_millis())) {
                    headers.insert("grpc-timeout", v);
                }
            }
            Protocol::HttpProtobuf => {
                if let Ok(host) = HeaderValue::from_str(c.authority.as_str()) {
                    headers.insert(header::HOST, host);
                }
                headers.insert(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("application/x-protobuf"),
                );
            }
        }
        request
    }

    async fn connect(&self) -> Result<Connection, String> {
        let authority = self.config.authority.as_str();
        let tcp = tokio::net::TcpStream::connect(authority)
            .await
            .map_err(|e| format!("connecting to the collector at {authority}: {e}"))?;
        let _ = tcp.set_nodelay(true);
        let io = TokioIo::new(tcp);
        let handshake = |e: hyper::Error| format!("handshake with {authority}: {e}");
        Ok(match self.config.protocol {
            Protocol::Grpc => {
                let (send, connection) = http2::handshake(TokioExecutor::new(), io)
                    .await
                    .map_err(handshake)?;
                tokio::spawn(connection);
                Connection::Http2(send)
            }
            Protocol::HttpProtobuf => {
                let (send, connection) = http1::handshake(io).await.map_err(handshake)?;
                tokio::spawn(connection);
                Connection::Http1(send)
            }
        })
    }
}

#[cfg(test)]
mod tests;
