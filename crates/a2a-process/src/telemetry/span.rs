//! [`TraceSpan`]: one span of ours, built with the OpenTelemetry SDK directly and carried in an
//! explicit [`opentelemetry::Context`].
//!
//! Not `tracing` spans bridged by `tracing-opentelemetry`: that bridge cost a fully traced echo
//! send about 10% of the gateway's CPU (a registry entry per span, each attribute through a field
//! visitor, enter and exit on every poll, the close), more than the spans themselves. Here a span
//! is the SDK's, its attributes are given when it starts (or set once, by key), and being "in" a
//! span is the OpenTelemetry context attached to the thread while its future is polled, which is
//! also what children, outgoing `traceparent`s and JSON log lines read.

use std::borrow::Cow;
use std::future::Future;
use std::pin::Pin;
use std::task::Poll;

use opentelemetry::trace::{
    SpanBuilder, SpanContext, SpanKind, Status, TraceContextExt, Tracer as _,
};
use opentelemetry::{Context, ContextGuard, Key, KeyValue, Value};

thread_local! {
    /// Set while a [`TraceSpan`] is built: the SDK's sampler keeps it (the request was sampled
    /// before it was built), where a bridged `tracing` span only follows its parent.
    static BUILDING_OURS: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether the span the SDK is sampling now is a [`TraceSpan`].
#[cfg_attr(not(feature = "export"), allow(dead_code))]
pub(super) fn building_ours() -> bool {
    BUILDING_OURS.get()
}

/// The name of the span a context carries, for JSON log lines (`span`); stored only while
/// they are on, since nothing else reads it.
#[derive(Debug, Clone)]
#[cfg_attr(not(feature = "export"), allow(dead_code))] // read by the JSON log lines
pub(super) struct SpanName(pub(super) Cow<'static, str>);

/// One span of ours, or nothing (traces off, the request not sampled, or no traced parent):
/// every method is then a no-op that costs a branch. Clones name the same span.
#[derive(Debug, Clone, Default)]
pub struct TraceSpan(Option<Context>);

impl TraceSpan {
    /// No span.
    pub const NONE: TraceSpan = TraceSpan(None);

    /// Starts a span, child of `parent`'s span (a remote one from a `traceparent`, or ours), or
    /// the root of a new trace when `parent` has none. Nothing while traces are off.
    pub fn start(
        name: impl Into<Cow<'static, str>>,
        kind: SpanKind,
        attributes: Vec<KeyValue>,
        parent: &Context,
    ) -> Self {
        match super::tracer() {
            Some(tracer) => Self::start_with(tracer, name, kind, attributes, parent),
            None => Self::NONE,
        }
    }

    pub(super) fn start_with(
        tracer: &opentelemetry_sdk::trace::SdkTracer,
        name: impl Into<Cow<'static, str>>,
        kind: SpanKind,
        attributes: Vec<KeyValue>,
        parent: &Context,
    ) -> Self {
        let name = name.into();
        let label = super::json_logs().then(|| SpanName(name.clone()));
        let builder = SpanBuilder::from_name(name)
            .with_kind(kind)
            .with_attributes(attributes);
        BUILDING_OURS.set(true);
        let span = tracer.build_with_context(builder, parent);
        BUILDING_OURS.set(false);
        let cx = parent.with_span(span);
        Self(Some(match label {
            Some(label) => cx.with_value(label),
            None => cx,
        }))
    }

    /// Starts a span as a child of this one (which need not be current, nor still open);
    /// nothing when there is no span.
    pub fn start_child(
        &self,
        name: impl Into<Cow<'static, str>>,
        kind: SpanKind,
        attributes: Vec<KeyValue>,
    ) -> Self {
        match &self.0 {
            Some(cx) => Self::start(name, kind, attributes, cx),
            None => Self::NONE,
        }
    }

    /// Starts a span as a child of the current one (see [`TraceSpan::in_span`]); nothing when
    /// no span of ours is current (what happens outside a traced request is not traced).
    pub fn start_in_current(
        name: impl Into<Cow<'static, str>>,
        kind: SpanKind,
        attributes: impl FnOnce() -> Vec<KeyValue>,
    ) -> Self {
        Context::map_current(|cx| {
            if is_ours(cx) {
                Self::start(name, kind, attributes(), cx)
            } else {
                Self::NONE
            }
        })
    }

    /// Starts a span continuing the W3C `traceparent` (a root when there is none). Sampling is
    /// the caller's decision ([`super::sample_continuation`]).
    pub fn start_from(
        traceparent: Option<&str>,
        name: impl Into<Cow<'static, str>>,
        kind: SpanKind,
        attributes: Vec<KeyValue>,
    ) -> Self {
        let parent = traceparent.map_or_else(Context::new, super::context_from_traceparent);
        Self::start(name, kind, attributes, &parent)
    }

    /// Whether there is a span.
    pub fn is_traced(&self) -> bool {
        self.0.is_some()
    }

    /// Whether a span of ours is current on this thread: inside [`TraceSpan::in_span`].
    pub fn is_any_current() -> bool {
        Context::map_current(is_ours)
    }

    /// Sets an attribute (the value is built by the caller: use [`TraceSpan::set_str`] for a
    /// borrowed string, which copies it only when there is a span).
    pub fn set(&self, key: &'static str, value: impl Into<Value>) {
        if let Some(cx) = &self.0 {
            cx.span()
                .set_attribute(KeyValue::new(Key::from_static_str(key), value));
        }
    }

    /// Sets a string attribute.
    pub fn set_str(&self, key: &'static str, value: &str) {
        if let Some(cx) = &self.0 {
            cx.span().set_attribute(KeyValue::new(
                Key::from_static_str(key),
                Value::from(value.to_owned()),
            ));
        }
    }

    /// Sets several attributes under one lock of the span (the values are built only when
    /// there is a span).
    pub fn set_all<const N: usize>(&self, attributes: impl FnOnce() -> [KeyValue; N]) {
        if let Some(cx) = &self.0 {
            cx.span().set_attributes(attributes());
        }
    }

    /// Marks the span failed (status ERROR).
    pub fn set_error(&self) {
        if let Some(cx) = &self.0 {
            cx.span().set_status(Status::error(""));
        }
    }

    /// Ends the span now (it also ends when its last clone is dropped). Attributes set
    /// afterwards are ignored.
    pub fn end(&self) {
        if let Some(cx) = &self.0 {
            cx.span().end();
        }
    }

    /// Its context: trace id, span id, flags.
    pub fn span_context(&self) -> Option<SpanContext> {
        self.0.as_ref().map(|cx| cx.span().span_context().clone())
    }

    /// The W3C `traceparent` naming this span, for what continues the trace elsewhere (the
    /// events a turn publishes, a webhook POST).
    pub fn traceparent(&self) -> Option<String> {
        self.0
            .as_ref()
            .map(|cx| traceparent_of(cx.span().span_context()))
    }

    /// Adds `traceparent` (and `tracestate`) naming this span to outgoing headers.
    pub fn inject(&self, headers: &mut http::HeaderMap) {
        if let Some(cx) = &self.0 {
            super::inject_context(cx, headers);
        }
    }

    /// Makes this span current on this thread until the guard drops, for synchronous code
    /// (a log line that must carry the trace id).
    #[must_use = "the span is current only while the guard lives"]
    pub fn enter(&self) -> Option<ContextGuard> {
        self.0.clone().map(Context::attach)
    }

    /// Runs `fut` with this span current while it is polled (its log lines carry the trace id,
    /// its spans are children, its outgoing calls carry the `traceparent`). Without a span,
    /// `fut` runs as it is.
    pub fn in_span<F: Future>(&self, fut: F) -> Traced<F> {
        Traced {
            fut,
            cx: self.0.clone(),
        }
    }
}

/// Whether `cx` holds a span of ours (remote parents are never attached as current; only our
/// sampled spans are).
fn is_ours(cx: &Context) -> bool {
    cx.span().span_context().is_sampled()
}

pin_project_lite::pin_project! {
    /// A future run inside a [`TraceSpan`] ([`TraceSpan::in_span`]).
    pub struct Traced<F> {
        #[pin]
        fut: F,
        cx: Option<Context>,
    }
}

impl<F: Future> Future for Traced<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, task: &mut std::task::Context<'_>) -> Poll<F::Output> {
        let this = self.project();
        let _current = this.cx.clone().map(Context::attach);
        this.fut.poll(task)
    }
}

/// `00-<trace id>-<span id>-<flags>`, hex-encoded into one buffer (no formatting machinery).
pub(super) fn traceparent_of(sc: &SpanContext) -> String {
    write_traceparent(
        &sc.trace_id().to_bytes(),
        &sc.span_id().to_bytes(),
        sc.trace_flags().to_u8(),
    )
}

pub(super) fn write_traceparent(trace: &[u8; 16], span: &[u8; 8], flags: u8) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut out = [b'-'; 55];
    out[..2].copy_from_slice(b"00");
    let mut put = |bytes: &[u8], mut at: usize| {
        for b in bytes {
            out[at] = HEX[usize::from(b >> 4)];
            out[at + 1] = HEX[usize::from(b & 0xf)];
            at += 2;
        }
    };
    put(trace, 3);
    put(span, 36);
    put(&[flags], 53);
    // Only ASCII hex digits and dashes were written.
    String::from_utf8(out.to_vec()).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry::trace::TracerProvider as _;
    use opentelemetry_sdk::trace::{SdkTracerProvider, SpanData, SpanExporter};
    use std::sync::{Arc, Mutex};

    /// Keeps what it is given.
    #[derive(Debug, Clone, Default)]
    struct Kept(Arc<Mutex<Vec<SpanData>>>);

    impl SpanExporter for Kept {
        async fn export(&self, batch: Vec<SpanData>) -> opentelemetry_sdk::error::OTelSdkResult {
            self.0.lock().unwrap().extend(batch);
            Ok(())
        }
    }

    #[test]
    #[cfg(feature = "export")]
    fn warnings_and_errors_in_a_span_become_its_events() {
        use tracing_subscriber::Layer as _;
        use tracing_subscriber::layer::SubscriberExt;
        let kept = Kept::default();
        let provider = SdkTracerProvider::builder()
            .with_simple_exporter(kept.clone())
            .build();
        let span = TraceSpan::start_with(
            &provider.tracer("test"),
            "turn echo",
            SpanKind::Internal,
            Vec::new(),
            &Context::new(),
        );
        // As `init` installs it.
        let events = super::super::setup::SpanEvents
            .with_filter(tracing_subscriber::filter::LevelFilter::WARN);
        tracing::subscriber::with_default(tracing_subscriber::registry().with(events), || {
            tracing::warn!("outside any span");
            let _in = span.enter();
            tracing::info!("not an event");
            tracing::warn!(agent = "up", attempt = 2_u64, "upstream unreachable");
            tracing::error!("turn failed");
        });
        span.end();
        let spans = kept.0.lock().unwrap().clone();
        let [turn] = spans.as_slice() else {
            panic!("{spans:#?}")
        };
        let names: Vec<&str> = turn.events.iter().map(|e| e.name.as_ref()).collect();
        assert_eq!(names, ["upstream unreachable", "turn failed"]);
        let warning = &turn.events.events[0];
        let attr = |k: &str| {
            warning
                .attributes
                .iter()
                .find(|kv| kv.key.as_str() == k)
                .map(|kv| kv.value.to_string())
        };
        assert_eq!(attr("level").as_deref(), Some("WARN"));
        assert_eq!(attr("agent").as_deref(), Some("up"));
        assert_eq!(attr("attempt").as_deref(), Some("2"));
        assert_eq!(
            turn.status,
            Status::error(""),
            "an error marks the span failed"
        );
    }

    #[tokio::test]
    async fn spans_nest_by_the_context_their_futures_run_in() {
        let kept = Kept::default();
        let provider = SdkTracerProvider::builder()
            .with_simple_exporter(kept.clone())
            .build();
        let tracer = provider.tracer("test");
        let remote = super::super::context_from_traceparent(
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        );
        let server = TraceSpan::start_with(
            &tracer,
            "SendMessage",
            SpanKind::Server,
            vec![KeyValue::new("rpc.method", "SendMessage")],
            &remote,
        );
        server.set_str("a2a.task.id", "t1");
        assert!(!TraceSpan::is_any_current());
        let child = server
            .in_span(async {
                tokio::task::yield_now().await;
                assert!(TraceSpan::is_any_current());
                Context::map_current(|cx| {
                    TraceSpan::start_with(&tracer, "store get", SpanKind::Client, Vec::new(), cx)
                })
            })
            .await;
        assert!(!TraceSpan::is_any_current(), "current only while polled");
        child.set("error.type", "conflict");
        child.set_error();
        child.end();
        let tp = server.traceparent().unwrap();
        server.end();
        server.set("late", 1_i64);

        let spans = kept.0.lock().unwrap().clone();
        let [store, send] = spans.as_slice() else {
            panic!("{spans:#?}")
        };
        assert_eq!(send.name, "SendMessage");
        assert_eq!(send.span_kind, SpanKind::Server);
        assert_eq!(send.parent_span_id.to_string(), "00f067aa0ba902b7");
        assert!(send.parent_span_is_remote);
        let attr = |s: &SpanData, k: &str| {
            s.attributes
                .iter()
                .find(|kv| kv.key.as_str() == k)
                .map(|kv| kv.value.to_string())
        };
        assert_eq!(attr(send, "a2a.task.id").as_deref(), Some("t1"));
        assert_eq!(attr(send, "late"), None, "set after the end");
        assert_eq!(
            tp,
            format!(
                "00-4bf92f3577b34da6a3ce929d0e0e4736-{}-01",
                send.span_context.span_id()
            )
        );
        assert_eq!(store.name, "store get");
        assert_eq!(store.parent_span_id, send.span_context.span_id());
        assert!(!store.parent_span_is_remote);
        assert_eq!(store.span_context.trace_id(), send.span_context.trace_id());
        assert_eq!(attr(store, "error.type").as_deref(), Some("conflict"));
        assert_eq!(store.status, Status::error(""));
    }
}
