//! An OTLP trace receiver for trace tests: a real tonic server of the OTLP `TraceService`
//! (the `opentelemetry-proto` types) on a loopback port, keeping every span it receives.
//! Point a process at it with `OTEL_EXPORTER_OTLP_ENDPOINT=http://ADDR` (gRPC, the default).
//! [`OtlpReceiver::start_with`] adds TLS (a certificate of the test's own), refuses the first
//! exports (`UNAVAILABLE`, which exporters retry), and every export call is recorded with its
//! metadata (`grpc-encoding` says whether it came gzip-compressed; it is accepted). It also
//! listens for OTLP/HTTP (`http/protobuf`, uncompressed) on a port of its own.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::{AnyValue, any_value::Value as Any};
use tokio_util::sync::CancellationToken;

/// One received span, flattened.
#[derive(Debug, Clone)]
pub struct ReceivedSpan {
    /// The resource's `service.name`.
    pub service: String,
    pub name: String,
    /// Hex, as in a `traceparent`.
    pub trace_id: String,
    pub span_id: String,
    /// Empty for a root span.
    pub parent_span_id: String,
    /// OTLP `SpanKind`: 1 internal, 2 server, 3 client, 4 producer, 5 consumer.
    pub kind: i32,
    /// Attribute values as strings (ints and bools printed).
    pub attributes: HashMap<String, String>,
    /// Status code: 0 unset, 1 ok, 2 error.
    pub status: i32,
}

impl ReceivedSpan {
    pub fn attr(&self, key: &str) -> Option<&str> {
        self.attributes.get(key).map(String::as_str)
    }
}

/// One export call, as received.
#[derive(Debug, Clone)]
pub struct ExportCall {
    /// The call's metadata (ASCII values), e.g. `grpc-encoding` and the exporter's headers.
    pub metadata: HashMap<String, String>,
    /// Spans in the request.
    pub spans: usize,
    /// Whether it was refused (`UNAVAILABLE`, by [`ReceiverOptions::fail_first`]).
    pub refused: bool,
}

/// How a receiver behaves (the default: plaintext, every export accepted).
#[derive(Debug, Clone, Default)]
pub struct ReceiverOptions {
    /// Refuse this many export calls first, with `UNAVAILABLE` (retryable).
    pub fail_first: usize,
    /// Serve TLS with this (certificate chain PEM, private key PEM).
    pub tls: Option<(String, String)>,
    /// With `tls`: require a client certificate issued by this CA (PEM).
    pub client_ca: Option<String>,
}

#[derive(Clone, Default)]
struct Sink(
    Arc<Mutex<Vec<ReceivedSpan>>>,
    Arc<Mutex<Vec<ExportCall>>>,
    Arc<AtomicUsize>,
);

#[tonic::async_trait]
impl TraceService for Sink {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        let metadata = request
            .metadata()
            .iter()
            .filter_map(|kv| match kv {
                tonic::metadata::KeyAndValueRef::Ascii(k, v) => {
                    Some((k.as_str().to_owned(), v.to_str().ok()?.to_owned()))
                }
                tonic::metadata::KeyAndValueRef::Binary(..) => None,
            })
            .collect();
        if self.ingest(metadata, request.into_inner()) {
            Ok(tonic::Response::new(ExportTraceServiceResponse::default()))
        } else {
            Err(tonic::Status::unavailable(
                "refused by the test (fail_first)",
            ))
        }
    }
}

impl Sink {
    /// Records one export call and keeps its spans; false when it is refused.
    fn ingest(
        &self,
        metadata: HashMap<String, String>,
        request: ExportTraceServiceRequest,
    ) -> bool {
        let refused = self
            .2
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
            .is_ok();
        let spans = request
            .resource_spans
            .iter()
            .flat_map(|rs| &rs.scope_spans)
            .map(|ss| ss.spans.len())
            .sum();
        self.1.lock().unwrap().push(ExportCall {
            metadata,
            spans,
            refused,
        });
        if refused {
            return false;
        }
        let mut out = Vec::new();
        for rs in request.resource_spans {
            let service = rs
                .resource
                .iter()
                .flat_map(|r| &r.attributes)
                .find(|kv| kv.key == "service.name")
                .and_then(|kv| kv.value.as_ref())
                .map(text)
                .unwrap_or_default();
            for span in rs.scope_spans.into_iter().flat_map(|s| s.spans) {
                out.push(ReceivedSpan {
                    service: service.clone(),
                    name: span.name,
                    trace_id: hex(&span.trace_id),
                    span_id: hex(&span.span_id),
                    parent_span_id: hex(&span.parent_span_id),
                    kind: span.kind,
                    attributes: span
                        .attributes
                        .iter()
                        .map(|kv| {
                            (
                                kv.key.clone(),
                                kv.value.as_ref().map(text).unwrap_or_default(),
                            )
                        })
                        .collect(),
                    status: span.status.map_or(0, |s| s.code),
                });
            }
        }
        self.0.lock().unwrap().extend(out);
        true
    }
}

/// The OTLP/HTTP listener's TLS: the receiver's certificate, and a client certificate from
/// `client_ca` required when given.
fn https_config(cert: &str, key: &str, client_ca: Option<&str>) -> rustls::ServerConfig {
    use rustls_pki_types::pem::PemObject as _;
    use rustls_pki_types::{CertificateDer, PrivateKeyDer};
    let provider = std::sync::Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert.as_bytes())
        .collect::<Result<_, _>>()
        .expect("the receiver's certificate");
    let key = PrivateKeyDer::from_pem_slice(key.as_bytes()).expect("the receiver's key");
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .expect("TLS versions");
    let builder = match client_ca {
        None => builder.with_no_client_auth(),
        Some(ca) => {
            let mut roots = rustls::RootCertStore::empty();
            for c in CertificateDer::pem_slice_iter(ca.as_bytes()) {
                roots.add(c.expect("the client CA")).expect("the client CA");
            }
            let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
                std::sync::Arc::new(roots),
                provider,
            )
            .build()
            .expect("the client verifier");
            builder.with_client_cert_verifier(verifier)
        }
    };
    let mut config = builder
        .with_single_cert(chain, key)
        .expect("the receiver's certificate and key");
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    config
}

/// Serves `app` over TLS until `stop`; a failed handshake only drops its connection.
async fn serve_https(
    listener: tokio::net::TcpListener,
    app: axum::Router,
    tls: rustls::ServerConfig,
    stop: CancellationToken,
) {
    let acceptor = tokio_rustls::TlsAcceptor::from(std::sync::Arc::new(tls));
    loop {
        let tcp = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((tcp, _)) => tcp,
                Err(_) => continue,
            },
            () = stop.cancelled() => return,
        };
        let (acceptor, app) = (acceptor.clone(), app.clone());
        tokio::spawn(async move {
            let Ok(stream) = acceptor.accept(tcp).await else {
                return;
            };
            let service = hyper_util::service::TowerToHyperService::new(app);
            let _ =
                hyper_util::server::conn::auto::Builder::new(hyper_util::rt::TokioExecutor::new())
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                    .await;
        });
    }
}

/// OTLP/HTTP (`http/protobuf`): `POST /v1/traces` with an uncompressed protobuf body; the
/// request headers are the call's metadata.
async fn http_export(
    axum::extract::State(sink): axum::extract::State<Sink>,
    headers: axum::http::HeaderMap,
    body: axum::body::Bytes,
) -> axum::http::StatusCode {
    use prost::Message as _;
    let Ok(request) = ExportTraceServiceRequest::decode(body) else {
        return axum::http::StatusCode::BAD_REQUEST;
    };
    let metadata = headers
        .iter()
        .filter_map(|(k, v)| Some((k.as_str().to_owned(), v.to_str().ok()?.to_owned())))
        .collect();
    if sink.ingest(metadata, request) {
        axum::http::StatusCode::OK
    } else {
        axum::http::StatusCode::SERVICE_UNAVAILABLE
    }
}

fn text(v: &AnyValue) -> String {
    match &v.value {
        Some(Any::StringValue(s)) => s.clone(),
        Some(Any::IntValue(i)) => i.to_string(),
        Some(Any::BoolValue(b)) => b.to_string(),
        Some(Any::DoubleValue(d)) => d.to_string(),
        other => format!("{other:?}"),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The running receiver; stops when dropped.
pub struct OtlpReceiver {
    pub addr: SocketAddr,
    /// The OTLP/HTTP listener (TLS too when the options say so).
    pub http_addr: SocketAddr,
    tls: bool,
    sink: Sink,
    stop: CancellationToken,
}

impl OtlpReceiver {
    pub async fn start() -> Self {
        Self::start_with(ReceiverOptions::default()).await
    }

    pub async fn start_with(options: ReceiverOptions) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a loopback port for the OTLP receiver");
        let addr = listener.local_addr().expect("its address");
        let sink = Sink::default();
        sink.2.store(options.fail_first, Ordering::Relaxed);
        let stop = CancellationToken::new();
        let mut builder = tonic::transport::Server::builder();
        if let Some((cert, key)) = &options.tls {
            let mut tls = tonic::transport::ServerTlsConfig::new().identity(
                tonic::transport::Identity::from_pem(cert.as_bytes(), key.as_bytes()),
            );
            if let Some(ca) = &options.client_ca {
                tls = tls.client_ca_root(tonic::transport::Certificate::from_pem(ca.as_bytes()));
            }
            builder = builder
                .tls_config(tls)
                .expect("the receiver's TLS configuration");
        }
        let server = builder
            .add_service(
                TraceServiceServer::new(sink.clone())
                    .accept_compressed(tonic::codec::CompressionEncoding::Gzip),
            )
            .serve_with_incoming_shutdown(
                tonic::transport::server::TcpIncoming::from(listener),
                stop.clone().cancelled_owned(),
            );
        tokio::spawn(server);
        let http = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a loopback port for the OTLP/HTTP receiver");
        let http_addr = http.local_addr().expect("its address");
        let app = axum::Router::new()
            .route("/v1/traces", axum::routing::post(http_export))
            .with_state(sink.clone());
        let stopped = stop.clone();
        match &options.tls {
            None => {
                tokio::spawn(async move {
                    let _ = axum::serve(http, app)
                        .with_graceful_shutdown(stopped.cancelled_owned())
                        .await;
                });
            }
            Some((cert, key)) => {
                let tls = https_config(cert, key, options.client_ca.as_deref());
                tokio::spawn(serve_https(http, app, tls, stopped));
            }
        }
        Self {
            addr,
            http_addr,
            tls: options.tls.is_some(),
            sink,
            stop,
        }
    }

    /// `OTEL_EXPORTER_OTLP_ENDPOINT` for this receiver (`https://` when it serves TLS).
    pub fn endpoint(&self) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        format!("{scheme}://{}", self.addr)
    }

    /// `OTEL_EXPORTER_OTLP_ENDPOINT` for this receiver's OTLP/HTTP listener (`http/protobuf`).
    pub fn http_endpoint(&self) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        format!("{scheme}://{}", self.http_addr)
    }

    /// Every export call so far, refused ones included.
    pub fn calls(&self) -> Vec<ExportCall> {
        self.sink.1.lock().unwrap().clone()
    }

    pub fn spans(&self) -> Vec<ReceivedSpan> {
        self.sink.0.lock().unwrap().clone()
    }

    /// Waits until `done` holds for the spans received (panics after `patience`, listing them).
    pub async fn wait_for(
        &self,
        patience: Duration,
        done: impl Fn(&[ReceivedSpan]) -> bool,
    ) -> Vec<ReceivedSpan> {
        let deadline = tokio::time::Instant::now() + patience;
        loop {
            let spans = self.spans();
            if done(&spans) {
                return spans;
            }
            if tokio::time::Instant::now() > deadline {
                let names: Vec<String> = spans
                    .iter()
                    .map(|s| {
                        format!(
                            "{}:{} {}<-{}",
                            s.service, s.name, s.span_id, s.parent_span_id
                        )
                    })
                    .collect();
                panic!("the expected spans did not arrive within {patience:?}; got {names:#?}");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

impl Drop for OtlpReceiver {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}
