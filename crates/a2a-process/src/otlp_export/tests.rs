//! The encoding against opentelemetry-proto's own conversion, and real exports to real
//! receivers (a tonic OTLP trace service, and an HTTP server decoding OTLP/HTTP posts).

use std::borrow::Cow;
use std::sync::{Arc, Mutex};
use std::time::{Duration, UNIX_EPOCH};

use opentelemetry::trace::{
    Event, Link, Span as _, SpanContext, SpanId, SpanKind, Status, TraceFlags, TraceId, TraceState,
    Tracer as _, TracerProvider as _,
};
use opentelemetry::{Array, InstrumentationScope, KeyValue, StringValue, Value};
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::transform::common::tonic::ResourceAttributesWithSchema;
use opentelemetry_proto::transform::trace::tonic::group_spans_by_resource_and_scope;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::{OTelSdkError, OTelSdkResult};
use opentelemetry_sdk::trace::{
    SdkTracerProvider, SpanData, SpanEvents, SpanLinks, SpanProcessor as _,
};
use prost::Message as _;

use super::*;

fn every_kind_of_value() -> Vec<KeyValue> {
    vec![
        KeyValue::new("str", "value"),
        KeyValue::new("empty", ""),
        KeyValue::new(
            "owned",
            String::from("an owned string, long enough to need two length bytes when repeated: ")
                .repeat(3),
        ),
        KeyValue::new("true", true),
        KeyValue::new("false", false),
        KeyValue::new("int", 42_i64),
        KeyValue::new("zero", 0_i64),
        KeyValue::new("negative", -7_i64),
        KeyValue::new("float", 3.5_f64),
        KeyValue::new("bools", Value::Array(Array::Bool(vec![true, false]))),
        KeyValue::new("ints", Value::Array(Array::I64(vec![1, -1, i64::MAX]))),
        KeyValue::new("floats", Value::Array(Array::F64(vec![0.0, -2.25]))),
        KeyValue::new(
            "strings",
            Value::Array(Array::String(vec![
                StringValue::from("a"),
                StringValue::from(""),
            ])),
        ),
        KeyValue::new("no values", Value::Array(Array::I64(vec![]))),
    ]
}

fn context(trace: u128, span: u64, flags: TraceFlags, remote: bool, state: &str) -> SpanContext {
    let state = if state.is_empty() {
        TraceState::NONE
    } else {
        state.parse().expect("a trace state")
    };
    SpanContext::new(
        TraceId::from(trace),
        SpanId::from(span),
        flags,
        remote,
        state,
    )
}

fn span(id: u64, scope: &InstrumentationScope) -> SpanData {
    SpanData {
        span_context: context(
            0x1122_3344_5566_7788_99aa_bbcc_ddee_ff00,
            id,
            TraceFlags::SAMPLED,
            false,
            "",
        ),
        parent_span_id: SpanId::INVALID,
        parent_span_is_remote: false,
        span_kind: SpanKind::Internal,
        name: Cow::Borrowed("turn echo"),
        start_time: UNIX_EPOCH + Duration::from_nanos(1_700_000_000_000_000_123),
        end_time: UNIX_EPOCH + Duration::from_nanos(1_700_000_000_000_456_789),
        attributes: vec![KeyValue::new("a2a.agent", "echo")],
        dropped_attributes_count: 0,
        events: SpanEvents::default(),
        links: SpanLinks::default(),
        status: Status::Unset,
        instrumentation_scope: scope.clone(),
    }
}

/// Spans using every field this exporter writes, in two scopes (interleaved).
fn batch() -> Vec<SpanData> {
    let a2a = InstrumentationScope::builder("a2a").build();
    let other = InstrumentationScope::builder("other")
        .with_version("1.2.3")
        .with_schema_url("https://opentelemetry.io/schemas/1.30.0")
        .with_attributes([KeyValue::new("scope.attr", 1_i64)])
        .build();
    let mut full = span(1, &a2a);
    full.span_context = context(7, 1, TraceFlags::SAMPLED, false, "vendor=x,other=y");
    full.parent_span_id = SpanId::from(0x0102_0304_0506_0708);
    full.parent_span_is_remote = true;
    full.span_kind = SpanKind::Server;
    full.name = Cow::Owned("SendMessage".to_owned());
    full.attributes = every_kind_of_value();
    full.dropped_attributes_count = 3;
    full.events.events = vec![
        Event::new(
            "exception",
            UNIX_EPOCH + Duration::from_nanos(1_700_000_000_000_000_200),
            vec![
                KeyValue::new("exception.message", "boom"),
                KeyValue::new("n", 2_i64),
            ],
            1,
        ),
        Event::new("plain", UNIX_EPOCH, vec![], 0),
    ];
    full.events.dropped_count = 4;
    full.links.links = vec![
        Link::new(
            context(9, 10, TraceFlags::SAMPLED, true, "k=v"),
            vec![
                KeyValue::new("link.attr", "linked"),
                KeyValue::new("f", 0.5_f64),
            ],
            2,
        ),
        Link::new(context(11, 12, TraceFlags::default(), false, ""), vec![], 0),
    ];
    full.links.dropped_count = 5;
    full.status = Status::error("upstream unavailable");

    let mut ok = span(2, &other);
    ok.span_kind = SpanKind::Client;
    ok.status = Status::Ok;
    let mut producer = span(3, &a2a);
    producer.span_kind = SpanKind::Producer;
    producer.span_context = context(7, 3, TraceFlags::default(), false, "");
    let mut consumer = span(4, &other);
    consumer.span_kind = SpanKind::Consumer;
    consumer.status = Status::error("");
    consumer.attributes = vec![];
    // Before the epoch: 0, as the official conversion writes it.
    consumer.start_time = UNIX_EPOCH - Duration::from_secs(1);
    vec![full, ok, producer, consumer]
}

fn resource() -> Resource {
    Resource::builder_empty()
        .with_schema_url(
            [
                KeyValue::new("service.name", "a2a-gateway"),
                KeyValue::new("service.instance.id", "replica-1"),
                KeyValue::new("pid", 4242_i64),
            ],
            "https://opentelemetry.io/schemas/1.30.0",
        )
        .build()
}

/// What opentelemetry-proto's conversion (the one opentelemetry-otlp exports with) makes.
fn official(batch: Vec<SpanData>, resource: &Resource) -> ExportTraceServiceRequest {
    let resource: ResourceAttributesWithSchema = resource.into();
    ExportTraceServiceRequest {
        resource_spans: group_spans_by_resource_and_scope(batch, &resource),
    }
}

fn ours(batch: &[SpanData], resource: Option<&Resource>) -> ExportTraceServiceRequest {
    let resource = resource.map_or_else(encode::empty_resource_fields, encode::resource_fields);
    let mut buf = Vec::new();
    encode::request(&mut buf, &resource, batch);
    ExportTraceServiceRequest::decode(buf.as_slice()).expect("our bytes decode")
}

#[test]
fn encoding_decodes_to_what_the_official_conversion_gives() {
    let batch = batch();
    let resource = resource();
    let decoded = ours(&batch, Some(&resource));
    assert_eq!(decoded, official(batch.clone(), &resource));
    let scopes = &decoded.resource_spans[0].scope_spans;
    assert_eq!(scopes.len(), 2, "one ScopeSpans per scope");
    assert_eq!(scopes[0].spans.len(), 2);

    // Without a resource from the SDK, and a single span.
    let one = vec![batch[1].clone()];
    assert_eq!(
        ours(&one, None),
        official(one, &Resource::builder_empty().build())
    );
}

#[test]
fn a_big_batch_round_trips() {
    // Enough spans that the enclosing lengths need three bytes or more, and long values that
    // need more than the guessed placeholder.
    let scope = InstrumentationScope::builder("a2a").build();
    let batch: Vec<SpanData> = (1..=2_000)
        .map(|i| {
            let mut s = span(i, &scope);
            s.attributes
                .push(KeyValue::new("long", "x".repeat((i % 300) as usize)));
            s.attributes.push(KeyValue::new(
                "many",
                Value::Array(Array::I64((0..i as i64 % 50).collect())),
            ));
            s
        })
        .collect();
    let resource = resource();
    assert_eq!(
        ours(&batch, Some(&resource)),
        official(batch.clone(), &resource)
    );
}

/// A real OTLP/gRPC receiver (tonic, opentelemetry-proto's service) keeping what it receives.
#[derive(Clone, Default)]
struct Sink {
    requests: Arc<Mutex<Vec<ExportTraceServiceRequest>>>,
    headers: Arc<Mutex<Vec<http::HeaderMap>>>,
    refuse: bool,
    /// How long it takes to answer (a slow collector).
    delay: Duration,
}

#[tonic::async_trait]
impl TraceService for Sink {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        tokio::time::sleep(self.delay).await;
        if self.refuse {
            return Err(tonic::Status::resource_exhausted("full"));
        }
        self.headers
            .lock()
            .unwrap()
            .push(request.metadata().clone().into_headers());
        self.requests.lock().unwrap().push(request.into_inner());
        Ok(tonic::Response::new(ExportTraceServiceResponse::default()))
    }
}

async fn grpc_receiver(sink: Sink) -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(TraceServiceServer::new(sink))
            .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener)),
    );
    addr
}

/// A real OTLP/HTTP receiver: `POST /v1/traces`, protobuf body.
async fn http_receiver(sink: Sink) -> std::net::SocketAddr {
    use axum::routing::post;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = axum::Router::new().route(
        "/v1/traces",
        post(
            move |headers: http::HeaderMap, body: bytes::Bytes| async move {
                let Ok(request) = ExportTraceServiceRequest::decode(body) else {
                    return http::StatusCode::BAD_REQUEST;
                };
                sink.headers.lock().unwrap().push(headers);
                sink.requests.lock().unwrap().push(request);
                http::StatusCode::OK
            },
        ),
    );
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}

fn env(pairs: Vec<(&'static str, String)>) -> impl Fn(&str) -> Option<String> {
    move |k: &str| pairs.iter().find(|(n, _)| *n == k).map(|(_, v)| v.clone())
}

fn endpoint(addr: std::net::SocketAddr) -> (&'static str, String) {
    ("OTEL_EXPORTER_OTLP_ENDPOINT", format!("http://{addr}"))
}

/// Spans made through the SDK with our processor, as in the binaries, and flushed by shutdown
/// (which waits for the export thread: off the runtime's threads).
async fn export_through_the_sdk(processor: OtlpProcessor, spans: usize) {
    let provider = SdkTracerProvider::builder()
        .with_span_processor(processor)
        .with_resource(resource())
        .build();
    let tracer = provider.tracer("a2a");
    for i in 0..spans {
        tracer
            .span_builder(format!("span {i}"))
            .with_kind(SpanKind::Server)
            .with_attributes([KeyValue::new("i", i as i64)])
            .start(&tracer)
            .end();
    }
    tokio::task::spawn_blocking(move || provider.shutdown())
        .await
        .unwrap()
        .expect("shutdown flushes");
}

fn received_spans(sink: &Sink) -> Vec<String> {
    let requests = sink.requests.lock().unwrap();
    let mut names = Vec::new();
    for request in requests.iter() {
        for rs in &request.resource_spans {
            let service = rs.resource.as_ref().unwrap().attributes.iter();
            assert!(service.clone().any(|kv| kv.key == "service.name"));
            for ss in &rs.scope_spans {
                assert_eq!(ss.scope.as_ref().unwrap().name, "a2a");
                names.extend(ss.spans.iter().map(|s| s.name.clone()));
            }
        }
    }
    names
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exports_over_grpc_with_the_configured_headers() {
    let sink = Sink::default();
    let addr = grpc_receiver(sink.clone()).await;
    let processor = OtlpProcessor::from_env(&env(vec![
        endpoint(addr),
        ("OTEL_EXPORTER_OTLP_HEADERS", "x-api-key=secret%21".into()),
        // No scheduled export in the middle: only the full batch and shutdown's.
        ("OTEL_BSP_SCHEDULE_DELAY", "600000".into()),
    ]))
    .unwrap();
    assert!(!format!("{processor:?}").contains("secret"));
    export_through_the_sdk(processor, 600).await;
    let names = received_spans(&sink);
    assert_eq!(names.len(), 600, "every span arrives once");
    assert!(names.contains(&"span 599".to_owned()));
    let headers = sink.headers.lock().unwrap();
    assert!(headers.iter().all(|h| h["x-api-key"] == "secret!"));
    let requests = sink.requests.lock().unwrap();
    let sizes: Vec<usize> = requests
        .iter()
        .map(|r| r.resource_spans[0].scope_spans[0].spans.len())
        .collect();
    assert_eq!(
        sizes,
        [512, 88],
        "a full batch at once, the rest at shutdown"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exports_over_http_protobuf() {
    let sink = Sink::default();
    let addr = http_receiver(sink.clone()).await;
    let processor = OtlpProcessor::from_env(&env(vec![
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf".into()),
        endpoint(addr),
        (
            "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
            "authorization=Bearer t".into(),
        ),
    ]))
    .unwrap();
    export_through_the_sdk(processor, 600).await;
    assert_eq!(received_spans(&sink).len(), 600);
    let headers = sink.headers.lock().unwrap();
    assert!(headers.iter().all(|h| h["authorization"] == "Bearer t"
        && h[http::header::CONTENT_TYPE] == "application/x-protobuf"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partial_batch_is_exported_after_the_schedule_delay() {
    let sink = Sink::default();
    let addr = grpc_receiver(sink.clone()).await;
    let processor = OtlpProcessor::from_env(&env(vec![
        endpoint(addr),
        ("OTEL_BSP_SCHEDULE_DELAY", "100".into()),
    ]))
    .unwrap();
    for span in batch() {
        processor.on_end(span);
    }
    // No flush: the delay alone exports them (in one request, or more if this test was
    // preempted across a delay).
    let exported = |sink: &Sink| -> usize {
        let requests = sink.requests.lock().unwrap();
        let scopes = requests
            .iter()
            .flat_map(|r| &r.resource_spans[0].scope_spans);
        scopes.map(|s| s.spans.len()).sum()
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while exported(&sink) < batch().len() {
        assert!(std::time::Instant::now() < deadline, "not all exported");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(exported(&sink), batch().len(), "each span once");
    let first = sink.requests.lock().unwrap()[0].clone();
    assert!(
        first.resource_spans[0]
            .scope_spans
            .iter()
            .all(|s| !s.spans.is_empty()),
        "no empty ScopeSpans"
    );
    tokio::task::spawn_blocking(move || processor.shutdown())
        .await
        .unwrap()
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_the_queue_bound_spans_are_dropped_and_counted() {
    // A collector slow enough that the queue fills while the first batch is being sent.
    let sink = Sink {
        delay: Duration::from_secs(1),
        ..Sink::default()
    };
    let addr = grpc_receiver(sink.clone()).await;
    let processor = Arc::new(
        OtlpProcessor::from_env(&env(vec![
            endpoint(addr),
            ("OTEL_BSP_MAX_QUEUE_SIZE", "10".into()),
            ("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "10".into()),
        ]))
        .unwrap(),
    );
    let scope = InstrumentationScope::builder("a2a").build();
    for i in 0..50 {
        processor.on_end(span(i + 1, &scope));
    }
    let p = processor.clone();
    tokio::task::spawn_blocking(move || p.shutdown())
        .await
        .unwrap()
        .unwrap();
    let exported: usize = sink
        .requests
        .lock()
        .unwrap()
        .iter()
        .map(|r| r.resource_spans[0].scope_spans[0].spans.len())
        .sum();
    // One batch in flight and one queued at most while the collector answers: 10 to 20 get
    // through unless this test stalls for the collector's whole second.
    assert!((10..50).contains(&exported), "{exported} exported");
    assert!(processor.dropped() > 0);
    assert_eq!(
        exported as u64 + processor.dropped(),
        50,
        "every span counted"
    );
}

/// Spans ended and flushed from outside tokio, as the SDK and shutdown do.
async fn flush_from_a_plain_thread(processor: Arc<OtlpProcessor>) -> OTelSdkResult {
    tokio::task::spawn_blocking(move || {
        for span in batch() {
            processor.on_end(span);
        }
        processor.force_flush()
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_are_errors_and_the_next_export_reconnects() {
    // Nothing listening: an error, not a panic.
    let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = free.local_addr().unwrap().port();
    drop(free);
    let down = Arc::new(
        OtlpProcessor::from_env(&env(vec![
            (
                "OTEL_EXPORTER_OTLP_ENDPOINT",
                format!("http://127.0.0.1:{port}"),
            ),
            // Exports only when flushed, so that each flush is one request.
            ("OTEL_BSP_SCHEDULE_DELAY", "600000".into()),
        ]))
        .unwrap(),
    );
    let e = flush_from_a_plain_thread(down.clone()).await;
    assert!(matches!(e, Err(OTelSdkError::InternalFailure(_))), "{e:?}");

    // A collector that refuses: its grpc-status is the error.
    let refusing = grpc_receiver(Sink {
        refuse: true,
        ..Sink::default()
    })
    .await;
    let processor = Arc::new(OtlpProcessor::from_env(&env(vec![endpoint(refusing)])).unwrap());
    let e = flush_from_a_plain_thread(processor).await;
    let Err(OTelSdkError::InternalFailure(message)) = e else {
        panic!("{e:?}")
    };
    assert!(message.contains("grpc-status 8"), "{message}");

    // A collector that comes up on the port: the next export connects to it.
    let sink = Sink::default();
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
        .await
        .unwrap();
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(TraceServiceServer::new(sink.clone()))
            .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener)),
    );
    for _ in 0..2 {
        let r = flush_from_a_plain_thread(down.clone()).await;
        assert!(r.is_ok(), "{r:?}");
    }
    assert_eq!(sink.requests.lock().unwrap().len(), 2);
    let first = down.clone();
    let stopped = tokio::task::spawn_blocking(move || first.shutdown())
        .await
        .unwrap();
    assert!(stopped.is_ok(), "{stopped:?}");
    let after = flush_from_a_plain_thread(down).await;
    assert!(matches!(after, Err(OTelSdkError::AlreadyShutdown)));
}
