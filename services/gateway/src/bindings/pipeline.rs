//! The one request pipeline every binding runs. A binding starts a [`Call`] when a request
//! arrives, names its method once it knows it, and runs [`Call::admit`] (service parameters,
//! authentication, extensions) before it decodes the payload; the call ends with the
//! operation's outcome ([`Call::ok`], [`Call::failed`], or [`Call::stream`] for a stream that
//! opened).
//! Request metrics hang here, so a new cross-cutting concern (rate limits, the server span) is
//! added in this file rather than in each binding.
//!
//! Traces (README, Traces): when export is on, each call is one SERVER span named after its
//! method, child of the client's W3C `traceparent`; the operation runs inside it
//! ([`Call::traced`]) and the request context's `traceparent` becomes this span's, so the turn
//! and the events it publishes continue the trace. Off, no span is built.
//!
//! Metrics (README, Metrics): `a2a_requests_total{binding,method,outcome}` (outcome = the A2A
//! ErrorInfo reason, or `ok`), `a2a_request_duration_seconds{binding,method}`,
//! `a2a_open_streams{binding}` and `a2a_auth_failures_total{reason}`.

use std::future::Future;
use std::time::Instant;

use a2a_process::metrics::Cached;
use a2a_process::telemetry;
use metrics::{Counter, Histogram};
use tracing::Instrument;
use tracing::field::Empty;

use a2a_types::A2aError;
use axum::http::{HeaderMap, HeaderValue};
use futures::StreamExt;

use super::{extensions_header, request_context};
use crate::auth::{Credentials, Rejection};
use crate::service::{A2aService, EventStream, RequestContext};

/// The binding a request came in by (the `binding` label).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Binding {
    JsonRpc,
    Rest,
    Grpc,
}

impl Binding {
    pub fn as_str(self) -> &'static str {
        match self {
            Binding::JsonRpc => "jsonrpc",
            Binding::Rest => "rest",
            Binding::Grpc => "grpc",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// The A2A methods, spelled as in JSON-RPC and gRPC: the only values of the `method` label
/// besides [`UNKNOWN_METHOD`] (so a client cannot grow the label set).
pub const METHODS: [&str; 11] = [
    "SendMessage",
    "SendStreamingMessage",
    "GetTask",
    "ListTasks",
    "CancelTask",
    "SubscribeToTask",
    "CreateTaskPushNotificationConfig",
    "GetTaskPushNotificationConfig",
    "ListTaskPushNotificationConfigs",
    "DeleteTaskPushNotificationConfig",
    "GetExtendedAgentCard",
];

/// The method of a request refused before its method was known, or naming none of [`METHODS`].
pub const UNKNOWN_METHOD: &str = "unknown";

/// What an admitted request carries into the operation and its response.
pub struct Admitted {
    pub ctx: RequestContext,
    /// `A2A-Extensions` for the response: the activated extensions this gateway supports.
    pub extensions: Option<HeaderValue>,
}

/// A request refused by the pipeline.
pub enum Refusal {
    /// Bad service parameters, or an extension the agent requires is not activated.
    Invalid(A2aError),
    /// Authentication failed: the HTTP bindings answer 401/403 with `WWW-Authenticate`
    /// ([`super::refused`]); gRPC has only the status.
    Unauthorized(Rejection),
}

impl Refusal {
    pub fn error(&self) -> &A2aError {
        match self {
            Refusal::Invalid(e) => e,
            Refusal::Unauthorized(r) => &r.error,
        }
    }

    pub fn into_error(self) -> A2aError {
        match self {
            Refusal::Invalid(e) => e,
            Refusal::Unauthorized(r) => r.error,
        }
    }
}

/// One request, from arrival to its outcome; recorded exactly once (a call dropped before its
/// outcome, because the client went away, is recorded as `canceled`).
pub struct Call {
    binding: Binding,
    /// An index into [`METHODS`], or `METHODS.len()` for [`UNKNOWN_METHOD`].
    method: usize,
    started: Instant,
    recorded: bool,
    /// The SERVER span (disabled while traces are off).
    span: tracing::Span,
    /// The HTTP status a binding answers with when it is not the error's own (REST's 415).
    status: Option<u16>,
}

impl Call {
    pub fn start(binding: Binding) -> Self {
        Self {
            binding,
            method: METHODS.len(),
            started: Instant::now(),
            recorded: false,
            span: server_span(binding),
            status: None,
        }
    }

    /// Labels the call with its method (any name outside [`METHODS`] becomes `unknown`).
    pub fn method(&mut self, name: &str) {
        self.method = METHODS
            .iter()
            .position(|m| *m == name)
            .unwrap_or(METHODS.len());
        if !self.span.is_disabled() {
            self.span.record("otel.name", self.method_name());
            self.span.record("rpc.method", self.method_name());
        }
    }

    /// The HTTP method and route template (`http.request.method`, `http.route`) of the HTTP
    /// bindings, for the span.
    pub fn http(&self, method: &str, route: impl FnOnce() -> String) {
        if !self.span.is_disabled() {
            self.span.record("http.request.method", method);
            self.span.record("http.route", route());
        }
    }

    /// The HTTP status the binding answers with, where it is not the error's own.
    pub fn status(&mut self, status: u16) {
        self.status = Some(status);
    }

    /// The call's SERVER span, for attributes only the operation knows (`a2a.task_id`, ...).
    pub fn span(&self) -> &tracing::Span {
        &self.span
    }

    /// Runs the operation inside the SERVER span (its logs carry the trace id, its store reads
    /// and upstream calls are children).
    pub fn traced<F: Future>(&self, op: F) -> tracing::instrument::Instrumented<F> {
        op.instrument(self.span.clone())
    }

    /// The shared preamble, in order: service parameters (`A2A-Version`, `A2A-Extensions`,
    /// `Last-Event-ID`, `Idempotency-Key`, `traceparent`), authentication (which sets the
    /// owner), then the extensions the agent requires. `query` is the URL query of the HTTP
    /// bindings (`A2A-Version` may be there, and API keys); gRPC has none. `client_cert` is the
    /// connection's verified client certificate (TLS with a client CA), for `mutualTLS`.
    pub async fn admit(
        &self,
        svc: &A2aService,
        headers: &HeaderMap,
        query: Option<&str>,
        client_cert: Option<&crate::tls::ClientCert>,
    ) -> Result<Admitted, Refusal> {
        if !self.span.is_disabled() {
            telemetry::set_parent(&self.span, telemetry::extract(headers));
        }
        let mut ctx = request_context(headers, query).map_err(Refusal::Invalid)?;
        if let Some(tp) = telemetry::traceparent(&self.span) {
            // The turn and the events it publishes continue from this call's span.
            ctx.traceparent = Some(tp);
        }
        ctx.span = self.span.clone();
        let creds = Credentials {
            headers,
            query,
            client_cert,
        };
        // In the span: a refusal's log line carries the trace id.
        let auth = svc
            .authenticate(&mut ctx, creds)
            .instrument(self.span.clone());
        if let Err(r) = auth.await {
            metrics::counter!("a2a_auth_failures_total", "reason" => r.reason).increment(1);
            return Err(Refusal::Unauthorized(r));
        }
        let activated = svc.check_extensions(&ctx).map_err(Refusal::Invalid)?;
        Ok(Admitted {
            ctx,
            extensions: extensions_header(&activated),
        })
    }

    /// Records a call answered with success.
    pub fn ok(mut self) {
        self.record("ok");
    }

    /// Records a call answered with `err` (the outcome is its ErrorInfo reason).
    pub fn failed(mut self, err: &A2aError) {
        let codes = err.codes();
        if !self.span.is_disabled() {
            let status = self.status.unwrap_or(match self.binding {
                Binding::Rest => codes.http,
                // JSON-RPC answers errors with 200, except the transport's own refusals.
                Binding::JsonRpc => match err {
                    A2aError::Unauthenticated(_)
                    | A2aError::PermissionDenied(_)
                    | A2aError::PayloadTooLarge { .. } => codes.http,
                    _ => 200,
                },
                Binding::Grpc => 0,
            });
            self.status = Some(status);
            if self.binding == Binding::Grpc {
                self.span.record(
                    "rpc.response.status_code",
                    format!("{:?}", codes.grpc).to_uppercase(),
                );
            }
            // Server errors are the gateway's (or its upstream's) failure; client errors are not.
            let server_error = match self.binding {
                Binding::Grpc => matches!(
                    codes.grpc,
                    tonic::Code::Unknown
                        | tonic::Code::Internal
                        | tonic::Code::Unavailable
                        | tonic::Code::DataLoss
                        | tonic::Code::DeadlineExceeded
                        | tonic::Code::Unimplemented
                ),
                _ => codes.http >= 500,
            };
            if server_error {
                self.span.record("otel.status_code", "ERROR");
            }
        }
        self.record(codes.reason);
    }

    /// Records a call's result.
    pub fn finish<T>(self, result: &Result<T, A2aError>) {
        match result {
            Ok(_) => self.ok(),
            Err(e) => self.failed(e),
        }
    }

    /// Records an error answered with an ErrorInfo reason of the binding's own (REST's 405).
    pub fn finish_reason(mut self, reason: &'static str, status: u16) {
        self.status = Some(status);
        self.record(reason);
    }

    /// Records a stream that opened (outcome `ok`, latency to the open) and counts it in
    /// `a2a_open_streams` until the response drops it.
    pub fn stream(mut self, events: EventStream) -> EventStream {
        self.record("ok");
        let open = OpenStream::new(self.binding);
        events
            .map(move |item| {
                let _held = &open;
                item
            })
            .boxed()
    }

    fn method_name(&self) -> &'static str {
        METHODS.get(self.method).copied().unwrap_or(UNKNOWN_METHOD)
    }

    fn record(&mut self, outcome: &'static str) {
        self.recorded = true;
        if !self.span.is_disabled() {
            self.end_span(outcome);
        }
        let elapsed = self.started.elapsed();
        // An access line at debug level, in the call's span (so it carries its trace id).
        tracing::debug!(parent: &self.span, binding = self.binding.as_str(),
            method = self.method_name(), outcome, elapsed_ms = elapsed.as_millis() as u64,
            "a2a call");
        let (binding, method) = (self.binding.as_str(), self.method_name());
        let handles = REQUEST_METRICS[self.binding.index()][self.method].get(|| {
            let ok = metrics::counter!(
                "a2a_requests_total",
                "binding" => binding,
                "method" => method,
                "outcome" => "ok",
            );
            let latency = metrics::histogram!(
                "a2a_request_duration_seconds",
                "binding" => binding,
                "method" => method,
            );
            (ok, latency)
        });
        let Some((ok, latency)) = handles else {
            return; // no recorder: metrics are off
        };
        if outcome == "ok" {
            ok.increment(1);
        } else {
            metrics::counter!(
                "a2a_requests_total",
                "binding" => binding,
                "method" => method,
                "outcome" => outcome,
            )
            .increment(1);
        }
        latency.record(elapsed.as_secs_f64());
    }
}

/// The request metrics of each binding × method (the `ok` counter and the latency histogram),
/// resolved once: they are recorded on every call.
static REQUEST_METRICS: [[Cached<(Counter, Histogram)>; METHODS.len() + 1]; 3] =
    [const { [const { Cached::new() }; METHODS.len() + 1] }; 3];

impl Call {
    fn end_span(&self, outcome: &'static str) {
        let span = &self.span;
        if self.binding != Binding::Grpc {
            span.record("http.response.status_code", self.status.unwrap_or(200));
        } else if outcome == "ok" {
            span.record("rpc.response.status_code", "OK");
        }
        if outcome != "ok" {
            span.record("error.type", outcome);
            span.record("a2a.error.reason", outcome);
        }
    }
}

/// The SERVER span of one call (attributes: README, Traces), or a disabled span while traces
/// are off: then nothing is built.
fn server_span(binding: Binding) -> tracing::Span {
    if !telemetry::enabled() {
        return tracing::Span::none();
    }
    // HTTP+JSON is an HTTP API, not an RPC protocol: it has no `rpc.system.name`.
    let system = match binding {
        Binding::JsonRpc => Some("jsonrpc"),
        Binding::Grpc => Some("grpc"),
        Binding::Rest => None,
    };
    // REST records its verb once routed (`Call::http`).
    let http_method = (binding == Binding::JsonRpc).then_some("POST");
    tracing::info_span!(
        "a2a.server",
        otel.name = UNKNOWN_METHOD,
        otel.kind = "server",
        otel.status_code = Empty,
        rpc.system.name = system,
        rpc.method = Empty,
        rpc.response.status_code = Empty,
        http.request.method = http_method,
        http.route = Empty,
        http.response.status_code = Empty,
        error.type = Empty,
        a2a.binding = binding.as_str(),
        a2a.task_id = Empty,
        a2a.context_id = Empty,
        a2a.agent = Empty,
        a2a.error.reason = Empty,
    )
}

impl Drop for Call {
    fn drop(&mut self) {
        if !self.recorded {
            self.record("canceled");
        }
    }
}

/// One open stream in `a2a_open_streams{binding}`, for as long as it lives.
struct OpenStream(Binding);

impl OpenStream {
    fn new(binding: Binding) -> Self {
        metrics::gauge!("a2a_open_streams", "binding" => binding.as_str()).increment(1.0);
        Self(binding)
    }
}

impl Drop for OpenStream {
    fn drop(&mut self) {
        metrics::gauge!("a2a_open_streams", "binding" => self.0.as_str()).decrement(1.0);
    }
}
