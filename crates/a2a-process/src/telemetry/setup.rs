//! The process's set-up (feature `export`, for the binaries only): the `tracing` subscriber
//! (text or JSON log lines, span events) and the OTLP exporter behind the SDK's batch span
//! processor. The storage and delivery crates build spans without it.

use std::fmt;
use std::sync::atomic::Ordering;

use opentelemetry::trace::{Status, TraceContextExt, TracerProvider as _};
use opentelemetry::{Context, KeyValue};
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing::Subscriber;
use tracing_subscriber::Layer as _;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields, format::Writer};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt;

use super::{ENABLED, JSON_LOGS, LOG_FORMAT_VAR, SAMPLER, Sampler, TRACER, export, span};

/// Where log lines go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogTo {
    Stdout,
    Stderr,
}

/// Flushes and stops the exporter when dropped (or with [`Telemetry::shutdown`]), so spans of
/// the last requests are not lost at exit.
#[must_use = "dropping it stops trace export"]
pub struct Telemetry {
    provider: Option<SdkTracerProvider>,
}

impl Telemetry {
    /// Flushes pending spans and stops the exporter. Call it outside async code, while the
    /// runtime still runs: it waits for the export thread, whose requests run on the runtime.
    pub fn shutdown(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        if let Some(p) = self.provider.take()
            && let Err(e) = p.shutdown()
        {
            eprintln!("trace export shutdown: {e}");
        }
    }
}

impl Drop for Telemetry {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Whether the standard variables configure an OTLP trace exporter.
fn otlp_configured(env: &dyn Fn(&str) -> Option<String>) -> bool {
    let set = |k: &str| env(k).is_some_and(|v| !v.trim().is_empty());
    let disabled = env("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true"));
    let exporter_none = env("OTEL_TRACES_EXPORTER").is_some_and(|v| v.trim() == "none");
    !disabled
        && !exporter_none
        && (set("OTEL_EXPORTER_OTLP_ENDPOINT") || set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))
}

/// Installs the global subscriber: `RUST_LOG` filter (default `info`), text or JSON lines
/// (`A2A_LOG_FORMAT`), and the OTLP layer when configured. Call it inside a tokio runtime (the
/// exporter sends on it). `service` names the process when neither
/// `OTEL_SERVICE_NAME` nor `service.name` in `OTEL_RESOURCE_ATTRIBUTES` does.
pub fn init(service: &'static str, log_to: LogTo) -> Telemetry {
    let env = |k: &str| std::env::var(k).ok();
    let json = env(LOG_FORMAT_VAR).is_some_and(|v| v.eq_ignore_ascii_case("json"));
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let (provider, otel_error) = if otlp_configured(&env) {
        match Sampler::from_env(&env).and_then(|s| Ok((s, provider(service, &env)?))) {
            Ok((sampler, p)) => {
                let _ = SAMPLER.set(sampler);
                (Some(p), None)
            }
            Err(e) => (None, Some(e)),
        }
    } else {
        (None, None)
    };
    // Warnings and errors logged inside a span become its events (whatever RUST_LOG says: it
    // filters log lines only); an error also marks the span failed.
    let events = provider
        .as_ref()
        .map(|_| SpanEvents.with_filter(tracing_subscriber::filter::LevelFilter::WARN));
    let writer = move || -> Box<dyn std::io::Write> {
        match log_to {
            LogTo::Stdout => Box::new(std::io::stdout()),
            LogTo::Stderr => Box::new(std::io::stderr()),
        }
    };
    let fmt = tracing_subscriber::fmt::layer()
        .with_target(false)
        .with_writer(writer);
    let fmt: Box<dyn tracing_subscriber::Layer<_> + Send + Sync> = if json {
        Box::new(fmt.event_format(JsonLines).with_filter(filter))
    } else {
        Box::new(fmt.with_filter(filter))
    };
    JSON_LOGS.store(json, Ordering::Relaxed);
    // Library and `tracing` spans join the trace of the span of ours current where they start.
    let bridge = provider.as_ref().map(|p| {
        tracing_opentelemetry::layer()
            .with_tracer(p.tracer("a2a-tracing"))
            .with_filter(tracing_subscriber::filter::filter_fn(bridged))
    });
    tracing_subscriber::registry()
        .with(events)
        .with(bridge)
        .with(fmt)
        .init();
    if let Some(e) = otel_error {
        tracing::error!(error = %e, "traces are off: the OTLP exporter could not be built");
    }
    if let Some(p) = &provider {
        let _ = TRACER.set(p.tracer("a2a"));
        ENABLED.store(true, Ordering::Relaxed);
    }
    Telemetry { provider }
}

fn provider(
    service: &'static str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<SdkTracerProvider, String> {
    // `opentelemetry-otlp` behind the SDK's batch processor (its own thread; `OTEL_BSP_*`).
    let processor =
        opentelemetry_sdk::trace::BatchSpanProcessor::builder(export::exporter(env)?).build();
    let named = env("OTEL_SERVICE_NAME").is_some_and(|v| !v.is_empty())
        || env("OTEL_RESOURCE_ATTRIBUTES").is_some_and(|v| v.contains("service.name="));
    let mut resource = opentelemetry_sdk::Resource::builder();
    if !named {
        resource = resource.with_service_name(service);
    }
    Ok(SdkTracerProvider::builder()
        // Sampling is decided before a TraceSpan is built ([`Sampler`]): keep what is built; a
        // bridged `tracing` span follows its parent and is dropped without one.
        .with_sampler(OursOrParent)
        .with_span_processor(processor)
        .with_resource(resource.build())
        .build())
}

/// The SDK's sampler: a [`super::TraceSpan`] is kept (its request was sampled before it was
/// built); a `tracing` span bridged by `tracing-opentelemetry` is kept when its parent (the
/// span of ours, or bridged span, current where it starts) is sampled, and dropped as a root —
/// so a library's span outside a traced request (the exporter's own calls included) is never
/// exported.
#[derive(Debug, Clone)]
struct OursOrParent;

impl opentelemetry_sdk::trace::ShouldSample for OursOrParent {
    fn should_sample(
        &self,
        parent: Option<&Context>,
        _trace_id: opentelemetry::trace::TraceId,
        _name: &str,
        _kind: &opentelemetry::trace::SpanKind,
        _attributes: &[KeyValue],
        _links: &[opentelemetry::trace::Link],
    ) -> opentelemetry_sdk::trace::SamplingResult {
        use opentelemetry_sdk::trace::{SamplingDecision, SamplingResult};
        let parent = parent
            .map(|cx| cx.span().span_context().clone())
            .filter(|sc| sc.is_valid());
        let keep = span::building_ours() || parent.as_ref().is_some_and(|p| p.is_sampled());
        SamplingResult {
            decision: if keep {
                SamplingDecision::RecordAndSample
            } else {
                SamplingDecision::Drop
            },
            attributes: Vec::new(),
            trace_state: parent.map(|p| p.trace_state().clone()).unwrap_or_default(),
        }
    }
}

/// The `tracing` spans bridged into traces: INFO and above (DEBUG/TRACE spans are libraries'
/// internals, one per poll or frame), never the exporter's own stack (its calls run on the
/// export thread, outside any trace, and must not feed it).
fn bridged(meta: &tracing::Metadata<'_>) -> bool {
    const OWN: [&str; 6] = ["opentelemetry", "tonic", "h2", "hyper", "reqwest", "tower"];
    meta.is_span()
        && *meta.level() <= tracing::Level::INFO
        && !OWN.iter().any(|t| meta.target().starts_with(t))
}

/// Turns a warning or error logged inside a span into an event of that span (name: the
/// message; attributes: `level`, `target` and the event's fields), and an error into the span's
/// status ERROR, as the `tracing` bridge did.
pub(super) struct SpanEvents;

impl<S: Subscriber> tracing_subscriber::Layer<S> for SpanEvents {
    fn on_event(&self, event: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        Context::map_current(|cx| {
            let span = cx.span();
            if !span.span_context().is_sampled() {
                return;
            }
            let meta = event.metadata();
            let mut fields = EventFields {
                name: None,
                attributes: vec![
                    KeyValue::new("level", meta.level().as_str()),
                    KeyValue::new("target", meta.target()),
                ],
            };
            event.record(&mut fields);
            if *meta.level() == tracing::Level::ERROR {
                span.set_status(Status::error(""));
            }
            let name = fields.name.unwrap_or_else(|| meta.name().to_owned());
            span.add_event(name, fields.attributes);
        });
    }
}

/// The fields of a log event, as span event attributes (the message is the event's name).
struct EventFields {
    name: Option<String>,
    attributes: Vec<KeyValue>,
}

impl EventFields {
    fn push(&mut self, field: &tracing::field::Field, value: opentelemetry::Value) {
        self.attributes.push(KeyValue::new(field.name(), value));
    }
}

impl tracing::field::Visit for EventFields {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn fmt::Debug) {
        let text = format!("{value:?}");
        if field.name() == "message" {
            self.name = Some(text);
        } else {
            self.push(field, text.into());
        }
    }
    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        if field.name() == "message" {
            self.name = Some(value.to_owned());
        } else {
            self.push(field, value.to_owned().into());
        }
    }
    fn record_i64(&mut self, field: &tracing::field::Field, value: i64) {
        self.push(field, value.into());
    }
    fn record_u64(&mut self, field: &tracing::field::Field, value: u64) {
        match i64::try_from(value) {
            Ok(v) => self.push(field, v.into()),
            Err(_) => self.push(field, value.to_string().into()),
        }
    }
    fn record_bool(&mut self, field: &tracing::field::Field, value: bool) {
        self.push(field, value.into());
    }
    fn record_f64(&mut self, field: &tracing::field::Field, value: f64) {
        self.push(field, value.into());
    }
}

/// One JSON object per line: `timestamp`, `level`, `message`, the event's fields, and inside
/// a span of ours (the current OpenTelemetry context) its name (`span`) with `trace_id` and
/// `span_id`.
struct JsonLines;

impl<S, N> FormatEvent<S, N> for JsonLines
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        _ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &tracing::Event<'_>,
    ) -> fmt::Result {
        let mut obj = serde_json::Map::new();
        obj.insert("timestamp".into(), humantime_now().into());
        obj.insert("level".into(), event.metadata().level().as_str().into());
        let mut fields = JsonFields(serde_json::Map::new());
        event.record(&mut fields);
        if let Some(m) = fields.0.remove("message") {
            obj.insert("message".into(), m);
        }
        obj.append(&mut fields.0);
        // The current span of ours, if any (spans are not `tracing` spans: see `span.rs`).
        Context::map_current(|cx| {
            let span = cx.span();
            let sc = span.span_context();
            if sc.is_valid() {
                if let Some(span::SpanName(name)) = cx.get::<span::SpanName>() {
                    obj.insert("span".into(), name.as_ref().into());
                }
                obj.insert("trace_id".into(), sc.trace_id().to_string().into());
                obj.insert("span_id".into(), sc.span_id().to_string().into());
            }
        });
        let line = serde_json::Value::Object(obj).to_string();
        writeln!(writer, "{line}")
    }
}

/// RFC 3339 UTC with microseconds (`2025-11-24T08:49:37.123456Z`).
fn humantime_now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
}

struct JsonFields(serde_json::Map<String, serde_json::Value>);

impl tracing::field::Visit for JsonFields {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn fmt::Debug) {
        self.0
            .insert(field.name().into(), format!("{value:?}").into());
    }
    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        self.0.insert(field.name().into(), value.into());
    }
    fn record_i64(&mut self, field: &tracing::field::Field, value: i64) {
        self.0.insert(field.name().into(), value.into());
    }
    fn record_u64(&mut self, field: &tracing::field::Field, value: u64) {
        self.0.insert(field.name().into(), value.into());
    }
    fn record_bool(&mut self, field: &tracing::field::Field, value: bool) {
        self.0.insert(field.name().into(), value.into());
    }
    fn record_f64(&mut self, field: &tracing::field::Field, value: f64) {
        self.0.insert(field.name().into(), value.into());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn otlp_is_off_unless_an_endpoint_is_set() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| (*v).to_owned())
            }
        };
        assert!(!otlp_configured(&env(&[])));
        assert!(otlp_configured(&env(&[(
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            "http://127.0.0.1:4317"
        )])));
        assert!(otlp_configured(&env(&[(
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
            "http://127.0.0.1:4317"
        )])));
        assert!(!otlp_configured(&env(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4317"),
            ("OTEL_SDK_DISABLED", "true")
        ])));
        assert!(!otlp_configured(&env(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4317"),
            ("OTEL_TRACES_EXPORTER", "none")
        ])));
    }

    #[test]
    fn log_timestamps_are_rfc3339_utc_with_microseconds() {
        let t = humantime_now();
        assert_eq!(t.len(), "2025-11-24T08:49:37.123456Z".len(), "{t}");
        assert!(t.ends_with('Z'), "{t}");
        assert!(chrono::DateTime::parse_from_rfc3339(&t).is_ok(), "{t}");
    }

    #[derive(Debug, Clone, Default)]
    struct Kept(std::sync::Arc<std::sync::Mutex<Vec<opentelemetry_sdk::trace::SpanData>>>);

    impl opentelemetry_sdk::trace::SpanExporter for Kept {
        async fn export(
            &self,
            batch: Vec<opentelemetry_sdk::trace::SpanData>,
        ) -> opentelemetry_sdk::error::OTelSdkResult {
            self.0.lock().unwrap().extend(batch);
            Ok(())
        }
    }

    /// The bridge as `init` installs it: a `tracing` span started inside a span of ours is its
    /// child in the same trace; one outside any (a root), a DEBUG one and one of the exporter's
    /// own stack are not exported.
    #[test]
    fn tracing_spans_join_the_trace_of_the_span_of_ours_they_start_in() {
        let kept = Kept::default();
        let provider = SdkTracerProvider::builder()
            .with_sampler(OursOrParent)
            .with_simple_exporter(kept.clone())
            .build();
        let bridge = tracing_opentelemetry::layer()
            .with_tracer(provider.tracer("a2a-tracing"))
            .with_filter(tracing_subscriber::filter::filter_fn(bridged));
        let ours = super::super::TraceSpan::start_with(
            &provider.tracer("a2a"),
            "SendMessage",
            opentelemetry::trace::SpanKind::Server,
            Vec::new(),
            &Context::new(),
        );
        tracing::subscriber::with_default(tracing_subscriber::registry().with(bridge), || {
            tracing::info_span!("outside").in_scope(|| {});
            let _in = ours.enter();
            tracing::info_span!("sqlx.query", db.statement = "SELECT 1").in_scope(|| {
                tracing::debug_span!("poll").in_scope(|| {});
            });
            tracing::info_span!(target: "h2::client", "frame").in_scope(|| {});
        });
        ours.end();
        let spans = kept.0.lock().unwrap().clone();
        let names: Vec<&str> = spans.iter().map(|s| s.name.as_ref()).collect();
        assert_eq!(names.len(), 2, "{names:?}");
        let server = spans.iter().find(|s| s.name == "SendMessage").unwrap();
        let query = spans.iter().find(|s| s.name == "sqlx.query").unwrap();
        assert_eq!(
            query.span_context.trace_id(),
            server.span_context.trace_id()
        );
        assert_eq!(query.parent_span_id, server.span_context.span_id());
    }
}
