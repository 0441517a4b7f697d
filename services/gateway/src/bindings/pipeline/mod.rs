//! The one request pipeline every binding runs. A binding starts a [`Call`] when a request
//! arrives, names its method once it knows it, and runs [`Call::admit`] (service parameters,
//! authentication, extensions) before it decodes the payload; the call ends with the
//! operation's outcome ([`Call::ok`], [`Call::failed`], or [`Call::stream`] for a stream that
//! opened).
//! Request metrics hang here, so a new cross-cutting concern (rate limits, the server span) is
//! added in this module rather than in each binding.
//!
//! Rate limits (README, Rate limits): the client IP's limit is checked before authentication
//! (so failed-auth floods are limited too), the principal's right after it; the call costs its
//! method's cost ([`crate::limits::RateLimiter::cost`]) in both. A passed check's headers ride
//! on [`Admitted::rate_limit`]; a refusal is [`Refusal::Limited`].
//!
//! Traces (README, Traces): when export is on, each call is one SERVER span named after its
//! method, child of the client's W3C `traceparent`; the operation runs inside it
//! ([`Call::traced`]) and the request context's `traceparent` becomes this span's, so the turn
//! and the events it publishes continue the trace. Off, no span is built.
//!
//! Metrics (README, Metrics): `a2a_requests_total{binding,method,outcome}` (outcome = the A2A
//! ErrorInfo reason, or `ok`), `a2a_request_duration_seconds{binding,method}`,
//! `a2a_open_streams{binding}` and `a2a_auth_failures_total{reason}`.
//!
//! Here: [`Call`] and admission; `call_metrics.rs` holds the per-call metric handles and the
//! stream meters, `span.rs` the SERVER span.

use std::borrow::Cow;
use std::future::Future;
use std::net::IpAddr;
use std::sync::OnceLock;
use std::time::Instant;

use a2a_process::telemetry::{self, TraceSpan};

use a2a_types::{A2aError, Method};
use axum::http::{HeaderMap, HeaderValue};
use futures::StreamExt;

use super::rate_headers::RateLimitHeaders;
use super::{extensions_header, request_context};
use crate::auth::{Credentials, Rejection};
use crate::gateway::Gateway;
use crate::limits::Allowance;
use crate::service::{Dialects, EventStream, RequestContext};

mod call_metrics;
mod span;

use call_metrics::{OpenStream, REQUEST_METRICS, Semconv, StreamMeter, semconv};
use span::{grpc_code_name, server_span};

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

    /// The binding as the A2A specification names it (`a2a.protocol.binding`).
    fn protocol_binding(self) -> &'static str {
        match self {
            Binding::JsonRpc => "JSONRPC",
            Binding::Rest => "HTTP+JSON",
            Binding::Grpc => "GRPC",
        }
    }
}

/// The `method` label of a request refused before its method was known, or naming no
/// [`Method`]: with [`Method::ALL`] the only values of the label (so a client cannot grow the
/// label set).
pub const UNKNOWN_METHOD: &str = "unknown";

/// What an admitted request carries into the operation and its response.
pub struct Admitted {
    pub ctx: RequestContext,
    /// `A2A-Extensions` for the response: the activated extensions this gateway supports.
    pub extensions: Option<HeaderValue>,
    /// `RateLimit-Policy` and `RateLimit` for the response, when a limit applied.
    pub rate_limit: Option<RateLimitHeaders>,
}

/// A request refused by the pipeline.
pub enum Refusal {
    /// Bad service parameters, or an extension the agent requires is not activated.
    Invalid(A2aError),
    /// Authentication failed: the HTTP bindings answer 401/403 with `WWW-Authenticate`
    /// ([`super::refused`]); gRPC has only the status.
    Unauthorized(Rejection),
    /// A rate limit refused the call ([`A2aError::RateLimited`]): the HTTP bindings answer 429
    /// with `Retry-After` ([`super::rate_headers::on_refusal`]), gRPC RESOURCE_EXHAUSTED.
    Limited(A2aError),
}

impl Refusal {
    pub fn error(&self) -> &A2aError {
        match self {
            Refusal::Invalid(e) | Refusal::Limited(e) => e,
            Refusal::Unauthorized(r) => &r.error,
        }
    }

    pub fn into_error(self) -> A2aError {
        match self {
            Refusal::Invalid(e) | Refusal::Limited(e) => e,
            Refusal::Unauthorized(r) => r.error,
        }
    }
}

/// One request, from arrival to its outcome; recorded exactly once (a call dropped before its
/// outcome, because the client went away, is recorded as `canceled`).
pub struct Call {
    binding: Binding,
    /// A [`Method::index`], or `Method::ALL.len()` for [`UNKNOWN_METHOD`] (an index, for the
    /// per-method metric tables).
    method: usize,
    started: Instant,
    recorded: bool,
    /// The SERVER span, built by [`Call::admit`] when the request is sampled (unset while
    /// traces are off, for an unsampled request, and before admission).
    span: OnceLock<TraceSpan>,
    /// The HTTP method and route template, kept for the span while traces are on (static
    /// strings where they can be: a span copies only what is not).
    http: Option<(Cow<'static, str>, Cow<'static, str>)>,
    /// The HTTP status a binding answers with when it is not the error's own (REST's 415).
    status: Option<u16>,
    /// The dialects the request can speak (`A2A-Version` is read against them).
    dialects: Dialects,
}

impl Call {
    pub fn start(binding: Binding) -> Self {
        Self {
            binding,
            method: Method::ALL.len(),
            started: Instant::now(),
            recorded: false,
            span: OnceLock::new(),
            http: None,
            status: None,
            dialects: Dialects::V1_ONLY,
        }
    }

    /// The dialects the request can speak, once its method or path is known (1.0 only until
    /// the binding says otherwise): `A2A-Version` picks one, its absence `dialects.default`.
    pub fn dialects(&mut self, dialects: Dialects) {
        self.dialects = dialects;
    }

    /// Labels the call with its method (a call never labelled is `unknown`).
    pub fn method(&mut self, method: Method) {
        self.method = method.index();
    }

    /// The HTTP method and route template (`http.request.method`, `http.route`) of the HTTP
    /// bindings, for the span (the route is built only while traces are on).
    pub fn http(&mut self, method: &str, route: impl FnOnce() -> Cow<'static, str>) {
        if telemetry::enabled() {
            let method = match method {
                "GET" => Cow::Borrowed("GET"),
                "POST" => Cow::Borrowed("POST"),
                "DELETE" => Cow::Borrowed("DELETE"),
                other => Cow::Owned(other.to_owned()),
            };
            self.http = Some((method, route()));
        }
    }

    /// The HTTP status the binding answers with, where it is not the error's own.
    pub fn status(&mut self, status: u16) {
        self.status = Some(status);
    }

    /// The call's SERVER span, for attributes only the operation knows (`a2a.task.id`, ...).
    pub fn span(&self) -> &TraceSpan {
        static NONE: TraceSpan = TraceSpan::NONE;
        self.span.get().unwrap_or(&NONE)
    }

    /// Runs the operation inside the SERVER span (its logs carry the trace id, its store reads
    /// and upstream calls are children).
    pub fn traced<F: Future>(&self, op: F) -> telemetry::Traced<F> {
        self.span().in_span(op)
    }

    /// The shared preamble, in order: the client IP's rate limit (the cheapest refusal, so it
    /// comes before any parsing), service parameters (`A2A-Version`, `A2A-Extensions`,
    /// `Last-Event-ID`, `Idempotency-Key`, `traceparent`; each capped by `[limits.edge]`),
    /// authentication (which sets the owner), the principal's rate limit, then the extensions
    /// the agent requires. `query` is the URL query of the HTTP bindings (`A2A-Version` may be
    /// there, and API keys); gRPC has none. `peer` is the TCP peer's address, when known;
    /// `client_cert` the connection's verified client certificate (TLS with a client CA), for
    /// `mutualTLS`.
    pub async fn admit(
        &self,
        gw: &Gateway,
        headers: &HeaderMap,
        query: Option<&str>,
        peer: Option<IpAddr>,
        client_cert: Option<&crate::tls::ClientCert>,
    ) -> Result<Admitted, Refusal> {
        // Sampled now, before any span is built: an unsampled request builds none.
        let remote = telemetry::enabled().then(|| telemetry::extract(headers));
        let parent = remote.as_ref().and_then(telemetry::parent_of);
        if telemetry::sample_request(parent.as_ref())
            && let Some(remote) = remote
        {
            let span = server_span(
                self.binding,
                self.method_name(),
                self.http.as_ref(),
                &remote,
            );
            let _ = self.span.set(span);
        }
        let rate = gw.rate_limiter();
        // At most two checks pass: the IP's and the principal's (no allocation for them).
        let mut passed: [Option<Allowance>; 2] = [None, None];
        // The client IP's limit first: the cheapest refusal, before any header is parsed.
        let cost = rate.map(|rate| rate.cost(Method::ALL.get(self.method).copied()));
        if let (Some(rate), Some(cost)) = (rate, cost)
            && let Some(ip) = rate.client_ip(headers, peer)
        {
            passed[0] = rate.check_ip(ip, cost).await.map_err(Refusal::Limited)?;
        }
        let mut ctx = request_context(headers, query, self.dialects, gw.edge_limits())
            .map_err(Refusal::Invalid)?;
        // Loop protection, before authentication and anything else that costs.
        if ctx.hops > gw.max_hops() {
            tracing::warn!(hops = ctx.hops, max = gw.max_hops(), "request loop refused");
            metrics::counter!("a2a_request_loops_total").increment(1);
            return Err(Refusal::Invalid(super::request_loop(
                ctx.hops,
                gw.max_hops(),
            )));
        }
        if let Some(cost) = cost {
            ctx.cost = cost;
        }
        // When traced, the turn and the events it publishes continue from this call's span
        // (`ctx.span`).
        if telemetry::enabled() && !self.span().is_traced() {
            // Not sampled: what follows is not traced either, here or downstream.
            ctx.traceparent = Some(telemetry::unsampled_traceparent(parent.as_ref()));
        }
        ctx.span = self.span().clone();
        ctx.span.set("a2a.protocol.version", ctx.dialect.as_str());
        let creds = Credentials {
            headers,
            query,
            client_cert,
        };
        // In the span: a refusal's log line carries the trace id.
        let auth = self.span().in_span(gw.authenticate(&mut ctx, creds));
        if let Err(r) = auth.await {
            metrics::counter!("a2a_auth_failures_total", "reason" => r.reason).increment(1);
            return Err(Refusal::Unauthorized(r));
        }
        if let Some(rate) = rate
            && ctx.authenticated
        {
            passed[1] = rate
                .check_principal(&ctx.owner, ctx.cost)
                .await
                .map_err(Refusal::Limited)?;
        }
        let activated = gw
            .service()
            .check_extensions(&ctx)
            .map_err(Refusal::Invalid)?;
        Ok(Admitted {
            ctx,
            extensions: extensions_header(&activated),
            rate_limit: RateLimitHeaders::of(passed.iter().flatten()),
        })
    }

    /// Records a call answered with success.
    pub fn ok(mut self) {
        self.record("ok");
    }

    /// Records a call answered with success and a body of `bytes` (the HTTP bindings' JSON).
    pub fn ok_sized(mut self, bytes: usize) {
        if let Some(h) = semconv(Semconv::BodySize, self.binding, self.method) {
            h.record(bytes as f64);
        }
        self.record("ok");
    }

    /// Records a call answered with `err` (the outcome is its ErrorInfo reason).
    pub fn failed(mut self, err: &A2aError) {
        let codes = err.codes();
        if self.span().is_traced() {
            let status = self.status.unwrap_or(match self.binding {
                Binding::Rest => codes.http,
                // JSON-RPC answers errors with 200, except the transport's own refusals.
                Binding::JsonRpc => match err {
                    A2aError::Unauthenticated(_)
                    | A2aError::PermissionDenied(_)
                    | A2aError::PayloadTooLarge { .. }
                    | A2aError::RateLimited { .. } => codes.http,
                    _ => 200,
                },
                Binding::Grpc => 0,
            });
            self.status = Some(status);
            if self.binding == Binding::Grpc {
                self.span()
                    .set("rpc.response.status_code", grpc_code_name(codes.grpc));
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
                self.span().set_error();
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
        let mut meter = StreamMeter {
            binding: self.binding,
            method: self.method,
            started: self.started,
            events: 0,
        };
        events
            .map(move |item| {
                let _held = &open;
                meter.event();
                item
            })
            .boxed()
    }

    fn method_name(&self) -> &'static str {
        Method::ALL
            .get(self.method)
            .map_or(UNKNOWN_METHOD, |m| m.as_str())
    }

    fn record(&mut self, outcome: &'static str) {
        self.recorded = true;
        if self.span().is_traced() {
            self.end_span(outcome);
        }
        let elapsed = self.started.elapsed();
        // An access line at debug level, in the call's span (so it carries its trace id).
        if tracing::enabled!(tracing::Level::DEBUG) {
            let _in_span = self.span().enter();
            tracing::debug!(
                binding = self.binding.as_str(),
                method = self.method_name(),
                outcome,
                elapsed_ms = elapsed.as_millis() as u64,
                "a2a call"
            );
        }
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
            if let Some(h) = semconv(Semconv::Duration, self.binding, self.method) {
                h.record(elapsed.as_secs_f64());
            }
        } else {
            metrics::histogram!(
                "a2a_server_operation_duration_seconds",
                "a2a_method_name" => method,
                "a2a_protocol_binding" => self.binding.protocol_binding(),
                "error_type" => outcome,
            )
            .record(elapsed.as_secs_f64());
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

impl Drop for Call {
    fn drop(&mut self) {
        if !self.recorded {
            self.record("canceled");
        }
    }
}
