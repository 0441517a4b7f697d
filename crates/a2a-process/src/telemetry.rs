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

#[cfg(feature = "export")]
mod export;
#[cfg(feature = "export")]
mod setup;
mod span;

#[cfg(feature = "export")]
pub use setup::{LogTo, Telemetry, init};

pub use span::{TraceSpan, Traced};
// What call sites build spans with, so that they need no OpenTelemetry dependency of their own.
pub use opentelemetry::trace::SpanKind;
pub use opentelemetry::{Context, KeyValue};

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};

use opentelemetry::propagation::{Extractor, Injector, TextMapPropagator};
use opentelemetry::trace::{SpanContext, TraceContextExt};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::SdkTracer;

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

#[cfg(test)]
mod tests {
    use super::*;

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
