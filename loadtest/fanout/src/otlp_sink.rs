//! `otlp-sink ADDR COUNTFILE`: an OTLP trace receiver for `loadtest/bench.sh` that keeps
//! nothing but a count. The tracing row of the benchmark exports every span of a gateway under
//! load to it (sampler 1.0), so that the cost measured is building and exporting spans, not a
//! collector's storage. The count is written to COUNTFILE twice a second, for the script to check
//! that spans did arrive. Runs until killed.
//!
//! It shares the gateway's two cores, so it does as little as a receiver can: it walks the
//! request's protobuf wire format to count the spans (no message is decoded, nothing allocated
//! per span) and answers an empty `ExportTraceServiceResponse` with `grpc-status` in trailers
//! (a unary call must answer a message: tonic's client reports a trailers-only success as
//! `Internal` "missing response message"). Decoding every request into the
//! `opentelemetry-proto` structs, as a tonic service would, took CPU from the gateway it measures.

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use anyhow::{Context, Result};
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, HeaderName, HeaderValue, header};
use axum::response::Response;
use http_body::Frame;
use http_body_util::StreamBody;

const EXPORT: &str = "/opentelemetry.proto.collector.trace.v1.TraceService/Export";

pub async fn run(addr: &str, count_file: &str) -> Result<()> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("binding {addr}"))?;
    println!("otlp-sink listening on http://{}", listener.local_addr()?);
    let count = Arc::new(AtomicU64::new(0));
    let (written, path) = (count.clone(), count_file.to_owned());
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(Duration::from_millis(500)).await;
            // Renamed into place, so that the script never reads a half-written file.
            let tmp = format!("{path}.tmp");
            if tokio::fs::write(&tmp, written.load(Relaxed).to_string())
                .await
                .is_ok()
            {
                let _ = tokio::fs::rename(&tmp, &path).await;
            }
        }
    });
    let app = axum::Router::new()
        .route(EXPORT, axum::routing::post(export))
        // A batch of 8,192 spans is about 3 MB (axum's default limit is 2 MB).
        .layer(axum::extract::DefaultBodyLimit::disable())
        .with_state(count);
    axum::serve(listener, app).await?;
    Ok(())
}

async fn export(State(count): State<Arc<AtomicU64>>, body: Bytes) -> Response {
    let (status, message) = match grpc_message(&body).and_then(count_spans) {
        Some(spans) => {
            count.fetch_add(spans, Relaxed);
            ("0", "")
        }
        None => ("3", "not%20an%20ExportTraceServiceRequest"),
    };
    // The empty response message (uncompressed flag, length 0), then the status as trailers.
    let mut trailers = HeaderMap::new();
    trailers.insert(
        HeaderName::from_static("grpc-status"),
        HeaderValue::from_static(status),
    );
    if !message.is_empty() {
        trailers.insert(
            HeaderName::from_static("grpc-message"),
            HeaderValue::from_static(message),
        );
    }
    let frames = [
        Ok::<_, Infallible>(Frame::data(Bytes::from_static(&[0, 0, 0, 0, 0]))),
        Ok(Frame::trailers(trailers)),
    ];
    let mut answer = Response::new(Body::new(StreamBody::new(futures::stream::iter(frames))));
    answer.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/grpc"),
    );
    answer
}

/// The one uncompressed message of a unary gRPC request body (flag byte, 4-byte length).
fn grpc_message(body: &[u8]) -> Option<&[u8]> {
    let (&[0, a, b, c, d], rest) = body.split_first_chunk::<5>()? else {
        return None;
    };
    let len = u32::from_be_bytes([a, b, c, d]) as usize;
    (rest.len() == len).then_some(rest)
}

/// The spans of an `ExportTraceServiceRequest`: the `spans` (2) of every `scope_spans` (2) of
/// every `resource_spans` (1).
fn count_spans(request: &[u8]) -> Option<u64> {
    let mut spans = 0;
    for (field, resource) in Fields(request) {
        if field? == 1 {
            for (field, scope) in Fields(resource) {
                if field? == 2 {
                    for (field, _) in Fields(scope) {
                        spans += u64::from(field? == 2);
                    }
                }
            }
        }
    }
    Some(spans)
}

/// A message's fields: `(Some(number), bytes)` for a length-delimited field (the bytes of its
/// value), `(Some(number), [])` for the other wire types, `(None, [])` once, on malformed input.
struct Fields<'a>(&'a [u8]);

impl<'a> Iterator for Fields<'a> {
    type Item = (Option<u64>, &'a [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        if self.0.is_empty() {
            return None;
        }
        let field = self.field();
        if field.is_none() {
            self.0 = &[];
            return Some((None, &[]));
        }
        field.map(|(number, value)| (Some(number), value))
    }
}

impl<'a> Fields<'a> {
    fn field(&mut self) -> Option<(u64, &'a [u8])> {
        let key = self.varint()?;
        let value: &[u8] = match key & 7 {
            0 => {
                self.varint()?;
                &[]
            }
            1 => self.take(8)?,
            2 => {
                let len = usize::try_from(self.varint()?).ok()?;
                self.take(len)?
            }
            5 => self.take(4)?,
            _ => return None,
        };
        Some((key >> 3, value))
    }

    fn varint(&mut self) -> Option<u64> {
        let mut value = 0_u64;
        for (i, &byte) in self.0.iter().enumerate().take(10) {
            value |= u64::from(byte & 0x7f) << (7 * i);
            if byte & 0x80 == 0 {
                self.0 = &self.0[i + 1..];
                return Some(value);
            }
        }
        None
    }

    fn take(&mut self, len: usize) -> Option<&'a [u8]> {
        let (value, rest) = self.0.split_at_checked(len)?;
        self.0 = rest;
        Some(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
    use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
    use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span};
    use prost::Message as _;

    fn span(name: &str) -> Span {
        Span {
            name: name.to_owned(),
            trace_id: vec![1; 16],
            span_id: vec![2; 8],
            start_time_unix_nano: 1,
            end_time_unix_nano: 2,
            attributes: vec![KeyValue {
                key: "a2a.task_id".to_owned(),
                value: Some(AnyValue {
                    value: Some(any_value::Value::IntValue(7)),
                }),
                ..KeyValue::default()
            }],
            ..Span::default()
        }
    }

    /// tonic's own client (as `opentelemetry-otlp` uses it) sees a success: the sink answers a
    /// response message and the status in trailers, and counts the spans.
    #[tokio::test]
    async fn a_tonic_export_succeeds_and_is_counted() {
        use opentelemetry_proto::tonic::collector::trace::v1::trace_service_client::TraceServiceClient;
        let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = probe.local_addr().unwrap();
        drop(probe);
        let dir = std::env::temp_dir().join(format!("otlp-sink-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("spans");
        let (a, f) = (addr.to_string(), file.to_string_lossy().into_owned());
        tokio::spawn(async move { run(&a, &f).await });
        let url = format!("http://{addr}");
        let mut client = loop {
            if let Ok(c) = TraceServiceClient::connect(url.clone()).await {
                break c;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        let request = ExportTraceServiceRequest {
            resource_spans: vec![ResourceSpans {
                scope_spans: vec![ScopeSpans {
                    spans: vec![span("a"), span("b")],
                    ..ScopeSpans::default()
                }],
                ..ResourceSpans::default()
            }],
        };
        client.export(request).await.expect("the export succeeds");
        let mut counted = String::new();
        for _ in 0..50 {
            counted = std::fs::read_to_string(&file).unwrap_or_default();
            if counted == "2" {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert_eq!(counted, "2");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn counts_the_spans_of_every_scope_of_every_resource() {
        let scope = |n: usize| ScopeSpans {
            spans: (0..n).map(|i| span(&format!("s{i}"))).collect(),
            schema_url: "x".to_owned(),
            ..ScopeSpans::default()
        };
        let request = ExportTraceServiceRequest {
            resource_spans: vec![
                ResourceSpans {
                    scope_spans: vec![scope(3), scope(0), scope(2)],
                    ..ResourceSpans::default()
                },
                ResourceSpans {
                    scope_spans: vec![scope(4)],
                    schema_url: "y".to_owned(),
                    ..ResourceSpans::default()
                },
            ],
        };
        let bytes = request.encode_to_vec();
        assert_eq!(count_spans(&bytes), Some(9));
        let mut framed = vec![0];
        framed.extend((bytes.len() as u32).to_be_bytes());
        framed.extend(&bytes);
        assert_eq!(grpc_message(&framed), Some(&bytes[..]));
        assert_eq!(count_spans(&[]), Some(0));
    }

    #[test]
    fn malformed_input_is_refused() {
        let bytes = ExportTraceServiceRequest {
            resource_spans: vec![ResourceSpans {
                scope_spans: vec![ScopeSpans {
                    spans: vec![span("a")],
                    ..ScopeSpans::default()
                }],
                ..ResourceSpans::default()
            }],
        }
        .encode_to_vec();
        assert_eq!(count_spans(&bytes[..bytes.len() - 1]), None, "truncated");
        assert_eq!(count_spans(&[0x0b]), None, "wire type 3");
        assert_eq!(grpc_message(&[1, 0, 0, 0, 0]), None, "compressed");
        assert_eq!(grpc_message(&[0, 0, 0, 0, 2, 8]), None, "short");
    }
}
