//! Logs and traces for both binaries: the `tracing` subscriber for logs (text, or one JSON
//! object per line with `A2A_LOG_FORMAT=json`), and, when `OTEL_EXPORTER_OTLP_ENDPOINT` (or
//! `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) is set, an OpenTelemetry tracer exporting spans over
//! OTLP (`OTEL_EXPORTER_OTLP_PROTOCOL`: `grpc`, default, or `http/protobuf`; `opentelemetry-otlp`
//! behind the SDK's batch span processor, configured by the standard `OTEL_EXPORTER_OTLP_*` and
//! `OTEL_BSP_*` variables: see `export.rs`), with W3C Trace Context propagation. Spans
//! are [`TraceSpan`]s, built with the SDK directly (see `span.rs` for why not `tracing` spans).
//! Sampler (`OTEL_TRACES_SAMPLER[_ARG]`) and
//! resource (`OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`) come from the standard variables,
//! read by the SDK.
//!
//! Off by default and free then: call sites create spans only when [`enabled`] says so, so an
//! unconfigured process builds no span at all.

mod export;
mod span;

pub use span::{TraceSpan, Traced};
// What call sites build spans with, so that they need no OpenTelemetry dependency of their own.
pub use opentelemetry::trace::SpanKind;
pub use opentelemetry::{Context, KeyValue};

use std::fmt;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};

use opentelemetry::propagation::{Extractor, Injector, TextMapPropagator};
use opentelemetry::trace::{SpanContext, Status, TraceContextExt, TracerProvider as _};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{SdkTracer, SdkTracerProvider};
use tracing::Subscriber;
use tracing_subscriber::Layer as _;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields, format::Writer};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt;

/// Whether spans are exported (set once by [`init`]).
static ENABLED: AtomicBool = AtomicBool::new(false);
/// The tracer every span is built with, while traces are exported (set once by [`init`]).
static TRACER: OnceLock<SdkTracer> = OnceLock::new();
/// Whether log lines are JSON (they then name the current span: [`span::SpanName`]).
static JSON_LOGS: AtomicBool = AtomicBool::new(false);
/// The sampler the standard variables name (set once by [`init`]).
static SAMPLER: OnceLock<Sampler> = OnceLock::new();
static PROPAGATOR: OnceLock<TraceContextPropagator> = OnceLock::new();

/// The variable choosing the log format (`json`, or text by default).
pub const LOG_FORMAT_VAR: &str = "A2A_LOG_FORMAT";

/// The variables of logs and traces, which both binaries read (the README's tables list them
/// beside each binary's own `ENV_VARS`).
pub const ENV_VARS: &[(&str, &str)] = &[
    (
        "A2A_LOG_FORMAT",
        "`json` = one JSON object per log line (with trace_id/span_id in a span); default text",
    ),
    (
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "OTLP collector (e.g. http://127.0.0.1:4317); unset = no traces (README, Traces)",
    ),
    (
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        "OTLP endpoint for traces only; wins over OTEL_EXPORTER_OTLP_ENDPOINT",
    ),
    (
        "OTEL_EXPORTER_OTLP_PROTOCOL",
        "`grpc` (default) or `http/protobuf`",
    ),
    (
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
        "the same for traces only (wins)",
    ),
    (
        "OTEL_EXPORTER_OTLP_HEADERS",
        "headers of every export (key=value,..., values URL-encoded); may hold credentials",
    ),
    (
        "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
        "the same for traces only (wins)",
    ),
    (
        "OTEL_EXPORTER_OTLP_TIMEOUT",
        "one export's bound in milliseconds, connecting included; default 10000",
    ),
    (
        "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
        "the same for traces only (wins)",
    ),
    (
        "OTEL_EXPORTER_OTLP_COMPRESSION",
        "`gzip` = compressed exports; default none",
    ),
    (
        "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION",
        "the same for traces only (wins)",
    ),
    (
        "OTEL_EXPORTER_OTLP_CERTIFICATE",
        "PEM CA bundle the collector's TLS certificate is checked against (https:// endpoint)",
    ),
    (
        "OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE",
        "the same for traces only (wins)",
    ),
    (
        "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE",
        "PEM client certificate for mTLS to the collector (with the key)",
    ),
    (
        "OTEL_EXPORTER_OTLP_TRACES_CLIENT_CERTIFICATE",
        "the same for traces only (wins)",
    ),
    (
        "OTEL_EXPORTER_OTLP_CLIENT_KEY",
        "PEM private key of the client certificate",
    ),
    (
        "OTEL_EXPORTER_OTLP_TRACES_CLIENT_KEY",
        "the same for traces only (wins)",
    ),
    (
        "OTEL_EXPORTER_OTLP_INSECURE",
        "gRPC only: `true` = plaintext for an endpoint given without a scheme",
    ),
    (
        "OTEL_BSP_MAX_QUEUE_SIZE",
        "spans waiting for export at most (default 2048); more are dropped (a warning)",
    ),
    (
        "OTEL_BSP_MAX_EXPORT_BATCH_SIZE",
        "spans per export at most (default 512)",
    ),
    (
        "OTEL_BSP_SCHEDULE_DELAY",
        "the longest a span waits for its export, ms (default 5000)",
    ),
    (
        "OTEL_BSP_EXPORT_TIMEOUT",
        "the batch processor's bound on one export, ms (default 30000)",
    ),
    (
        "OTEL_SDK_DISABLED",
        "`true` = no traces even with an endpoint set",
    ),
    (
        "OTEL_TRACES_EXPORTER",
        "`none` = no traces; `otlp` (default)",
    ),
    (
        "OTEL_SERVICE_NAME",
        "service.name of the spans; default the binary's name",
    ),
    (
        "OTEL_RESOURCE_ATTRIBUTES",
        "more resource attributes (key=value,...)",
    ),
    (
        "OTEL_TRACES_SAMPLER",
        "sampler (always_on, parentbased_traceidratio, ...); default parentbased_always_on",
    ),
    ("OTEL_TRACES_SAMPLER_ARG", "the sampler's ratio"),
];

/// Whether traces are exported. Call sites build spans only then.
#[inline]
pub fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

fn tracer() -> Option<&'static SdkTracer> {
    if enabled() { TRACER.get() } else { None }
}

fn json_logs() -> bool {
    JSON_LOGS.load(Ordering::Relaxed)
}

/// `OTEL_TRACES_SAMPLER[_ARG]`, applied here rather than by the SDK: the decision is made before
/// a request builds any span, so an unsampled request builds none (the SDK then keeps every
/// span it is given). Spans inside a request follow its decision.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sampler {
    /// `parentbased_*`: a remote parent's sampled flag decides.
    parent_based: bool,
    /// The share of traces sampled without a deciding parent (1 = always_on, 0 = always_off).
    ratio: f64,
}

impl Sampler {
    /// From the standard variables; the SDK's default (`parentbased_always_on`) when unset, and
    /// a warning for a value it does not know.
    pub fn from_env(env: &dyn Fn(&str) -> Option<String>) -> Result<Self, String> {
        let name = env("OTEL_TRACES_SAMPLER").unwrap_or_default();
        let arg = || -> Result<f64, String> {
            match env("OTEL_TRACES_SAMPLER_ARG") {
                None => Ok(1.0),
                Some(v) => v
                    .trim()
                    .parse::<f64>()
                    .ok()
                    .filter(|r| (0.0..=1.0).contains(r))
                    .ok_or_else(|| {
                        format!("OTEL_TRACES_SAMPLER_ARG={v:?} is not a ratio in [0, 1]")
                    }),
            }
        };
        let (parent_based, ratio) = match name.trim() {
            "" | "parentbased_always_on" => (true, 1.0),
            "parentbased_always_off" => (true, 0.0),
            "parentbased_traceidratio" => (true, arg()?),
            "always_on" => (false, 1.0),
            "always_off" => (false, 0.0),
            "traceidratio" => (false, arg()?),
            other => return Err(format!("OTEL_TRACES_SAMPLER={other:?} is not supported")),
        };
        Ok(Self {
            parent_based,
            ratio,
        })
    }

    /// Whether a request is traced, given its remote parent (`traceparent`) if it came with
    /// one: the parent's flag under a parent-based sampler, else the ratio, decided by the trace
    /// id when there is one (so every process sampling at that ratio agrees on a trace).
    pub fn sample(&self, parent: Option<&SpanContext>) -> bool {
        match parent {
            Some(p) if self.parent_based => p.is_sampled(),
            _ if self.ratio >= 1.0 => true,
            _ if self.ratio <= 0.0 => false,
            Some(p) => {
                // The SDK's TraceIdRatioBased rule: the trace id's low 63 bits against the ratio.
                let low =
                    u64::from_be_bytes(p.trace_id().to_bytes()[8..].try_into().unwrap_or_default());
                (low >> 1) < (self.ratio * (1u64 << 63) as f64) as u64
            }
            None => random_unit() < self.ratio,
        }
    }
}

/// A uniform value in [0, 1) (splitmix64 over a counter seeded from the clock: no generator
/// crate for a coin toss per request).
fn random_unit() -> f64 {
    static STATE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let seed = STATE.fetch_add(0x9E37_79B9_7F4A_7C15, Ordering::Relaxed)
        ^ std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
    let mut z = seed;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 53) as f64
}

/// Whether a request with this remote parent (if any) is traced: [`enabled`] and sampled. A
/// request that is not builds no span; [`unsampled_traceparent`] still gives it a context to
/// pass on.
pub fn sample_request(parent: Option<&SpanContext>) -> bool {
    enabled() && SAMPLER.get().is_some_and(|s| s.sample(parent))
}

/// Whether work continuing the context `traceparent` (a turn, a delivery) is traced: its flag
/// decides, as it did for the request that started it; without one, a new trace is sampled.
pub fn sample_continuation(traceparent: Option<&str>) -> bool {
    if !enabled() {
        return false;
    }
    match traceparent {
        Some(tp) => tp.ends_with("-01"),
        None => sample_request(None),
    }
}

/// A W3C `traceparent` for a request that is not sampled: the remote parent's trace with a new
/// span id, or a new trace, flagged not sampled, so everything downstream (upstream agents,
/// webhooks, other replicas) agrees not to trace it, as W3C Trace Context intends.
pub fn unsampled_traceparent(parent: Option<&SpanContext>) -> String {
    use opentelemetry_sdk::trace::{IdGenerator, RandomIdGenerator};
    let ids = RandomIdGenerator::default();
    let trace = parent.map_or_else(|| ids.new_trace_id(), |p| p.trace_id());
    span::write_traceparent(&trace.to_bytes(), &ids.new_span_id().to_bytes(), 0)
}

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
    tracing_subscriber::registry().with(events).with(fmt).init();
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
        // Sampling is decided before a span is built ([`Sampler`]): keep what is built.
        .with_sampler(opentelemetry_sdk::trace::Sampler::AlwaysOn)
        .with_span_processor(processor)
        .with_resource(resource.build())
        .build())
}

fn propagator() -> &'static TraceContextPropagator {
    PROPAGATOR.get_or_init(TraceContextPropagator::new)
}

struct HeaderExtractor<'a>(&'a http::HeaderMap);

impl Extractor for HeaderExtractor<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }
    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(http::HeaderName::as_str).collect()
    }
}

struct PairExtractor<'a>(&'a str, Option<&'a str>);

impl Extractor for PairExtractor<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        match key {
            "traceparent" => Some(self.0),
            "tracestate" => self.1,
            _ => None,
        }
    }
    fn keys(&self) -> Vec<&str> {
        vec!["traceparent", "tracestate"]
    }
}

/// The remote parent named by W3C `traceparent`/`tracestate` headers (gRPC metadata arrives as
/// headers too); an empty context (a new trace) when absent or invalid.
pub fn extract(headers: &http::HeaderMap) -> opentelemetry::Context {
    // Most requests carry none: skip the propagator (which starts from a clone of the current
    // context).
    if !headers.contains_key(http::header::HeaderName::from_static("traceparent")) {
        return opentelemetry::Context::new();
    }
    propagator().extract_with_context(&opentelemetry::Context::new(), &HeaderExtractor(headers))
}

/// The span a context names, when it names a valid one (a remote parent that was sent).
pub fn parent_of(cx: &opentelemetry::Context) -> Option<SpanContext> {
    let sc = cx.span().span_context().clone();
    sc.is_valid().then_some(sc)
}

/// The remote parent named by a stored `traceparent` value (e.g. a Redis entry's `tp`).
pub fn context_from_traceparent(traceparent: &str) -> opentelemetry::Context {
    propagator().extract_with_context(
        &opentelemetry::Context::new(),
        &PairExtractor(traceparent, None),
    )
}

struct HeaderInjector<'a>(&'a mut http::HeaderMap);

impl Injector for HeaderInjector<'_> {
    fn set(&mut self, key: &str, value: String) {
        if let (Ok(k), Ok(v)) = (
            http::HeaderName::from_bytes(key.as_bytes()),
            http::HeaderValue::from_str(&value),
        ) {
            self.0.insert(k, v);
        }
    }
}

/// Adds `traceparent` (and `tracestate`) naming the span of `cx` to outgoing headers.
fn inject_context(cx: &Context, headers: &mut http::HeaderMap) {
    if cx.span().span_context().is_valid() {
        propagator().inject_context(cx, &mut HeaderInjector(headers));
    }
}

/// Adds `traceparent` (and `tracestate`) naming the current span (the CLIENT span of an
/// upstream call) to outgoing headers; nothing outside a span of ours.
pub fn inject_current(headers: &mut http::HeaderMap) {
    if enabled() {
        Context::map_current(|cx| inject_context(cx, headers));
    }
}

/// Turns a warning or error logged inside a span into an event of that span (name: the
/// message; attributes: `level`, `target` and the event's fields), and an error into the span's
/// status ERROR, as the `tracing` bridge did.
struct SpanEvents;

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

/// RFC 3339 UTC with microseconds, without a date crate.
fn humantime_now() -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let secs = now.as_secs();
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil_from_days(days as i64);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:06}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        now.subsec_micros()
    )
}

/// Days since 1970-01-01 → (year, month, day), proleptic Gregorian (H. Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
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
    fn civil_dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(20_416), (2025, 11, 24));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
    }

    #[test]
    fn traceparent_pairs_extract() {
        let tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let cx = context_from_traceparent(tp);
        let sc = cx.span().span_context().clone();
        assert!(sc.is_valid() && sc.is_remote());
        assert_eq!(
            sc.trace_id().to_string(),
            "4bf92f3577b34da6a3ce929d0e0e4736"
        );
        assert!(
            !context_from_traceparent("garbage")
                .span()
                .span_context()
                .is_valid()
        );
    }

    #[test]
    fn samplers_follow_the_standard_variables() {
        let sampler = |name: &'static str, arg: Option<&'static str>| {
            Sampler::from_env(&move |k: &str| match k {
                "OTEL_TRACES_SAMPLER" => Some(name.to_owned()),
                "OTEL_TRACES_SAMPLER_ARG" => arg.map(str::to_owned),
                _ => None,
            })
        };
        let sampled =
            context_from_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
        let dropped =
            context_from_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00");
        let (yes, no) = (
            sampled.span().span_context().clone(),
            dropped.span().span_context().clone(),
        );

        // The default follows the parent, and samples a new trace.
        let default = sampler("", None).unwrap();
        assert!(default.sample(None) && default.sample(Some(&yes)) && !default.sample(Some(&no)));
        let off = sampler("parentbased_always_off", None).unwrap();
        assert!(!off.sample(None) && off.sample(Some(&yes)));
        // Not parent-based: the parent's flag does not count.
        let on = sampler("always_on", None).unwrap();
        assert!(on.sample(Some(&no)));
        assert!(!sampler("always_off", None).unwrap().sample(Some(&yes)));
        // A ratio: about that share of new traces, and one answer per trace id.
        let tenth = sampler("parentbased_traceidratio", Some("0.1")).unwrap();
        let n = (0..20_000).filter(|_| tenth.sample(None)).count();
        assert!((1_500..2_500).contains(&n), "{n} of 20,000 sampled at 0.1");
        let ratio = sampler("traceidratio", Some("0.5")).unwrap();
        assert_eq!(ratio.sample(Some(&no)), ratio.sample(Some(&yes)));
        assert!(sampler("traceidratio", Some("2")).is_err());
        assert!(sampler("jaeger_remote", None).is_err());
    }

    #[test]
    fn traceparents_are_written_as_w3c_spells_them() {
        let tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let sc = context_from_traceparent(tp).span().span_context().clone();
        assert_eq!(span::traceparent_of(&sc), tp);
        let sc = SpanContext::new(
            opentelemetry::trace::TraceId::from_bytes([0xff; 16]),
            opentelemetry::trace::SpanId::from_bytes([0x0a; 8]),
            opentelemetry::trace::TraceFlags::NOT_SAMPLED,
            false,
            Default::default(),
        );
        assert_eq!(
            span::traceparent_of(&sc),
            format!("00-{}-{}-00", sc.trace_id(), sc.span_id())
        );
    }

    #[test]
    fn no_span_is_built_while_traces_are_off() {
        let span = TraceSpan::start("x", SpanKind::Internal, Vec::new(), &Context::new());
        assert!(!span.is_traced() && span.traceparent().is_none());
        assert!(!TraceSpan::is_any_current());
    }

    #[test]
    fn an_unsampled_request_still_passes_a_context_on() {
        let tp = unsampled_traceparent(None);
        let sc = context_from_traceparent(&tp).span().span_context().clone();
        assert!(sc.is_valid() && !sc.is_sampled(), "{tp}");
        let parent =
            context_from_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00");
        let child = unsampled_traceparent(Some(&parent.span().span_context().clone()));
        assert!(
            child.starts_with("00-4bf92f3577b34da6a3ce929d0e0e4736-") && child.ends_with("-00")
        );
        assert!(!child.contains("00f067aa0ba902b7"));
    }
}
