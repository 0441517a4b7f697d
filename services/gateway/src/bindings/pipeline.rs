//! The one request pipeline every binding runs. A binding starts a [`Call`] when a request
//! arrives, names its method once it knows it, and runs [`Call::admit`] (service parameters,
//! authentication, extensions) before it decodes the payload; the call ends with the
//! operation's outcome ([`Call::ok`], [`Call::failed`], or [`Call::stream`] for a stream that
//! opened).
//! Request metrics hang here, so a new cross-cutting concern (rate limits, the server span) is
//! added in this file rather than in each binding.
//!
//! Metrics (README, Metrics): `a2a_requests_total{binding,method,outcome}` (outcome = the A2A
//! ErrorInfo reason, or `ok`), `a2a_request_duration_seconds{binding,method}`,
//! `a2a_open_streams{binding}` and `a2a_auth_failures_total{reason}`.

use std::time::Instant;

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
    method: &'static str,
    started: Instant,
    recorded: bool,
}

impl Call {
    pub fn start(binding: Binding) -> Self {
        Self {
            binding,
            method: UNKNOWN_METHOD,
            started: Instant::now(),
            recorded: false,
        }
    }

    /// Labels the call with its method (any name outside [`METHODS`] becomes `unknown`).
    pub fn method(&mut self, name: &str) {
        self.method = METHODS
            .iter()
            .find(|m| **m == name)
            .copied()
            .unwrap_or(UNKNOWN_METHOD);
    }

    /// The shared preamble, in order: service parameters (`A2A-Version`, `A2A-Extensions`,
    /// `Last-Event-ID`, `Idempotency-Key`, `traceparent`), authentication (which sets the
    /// owner), then the extensions the agent requires. `query` is the URL query of the HTTP
    /// bindings (`A2A-Version` may be there, and API keys); gRPC has none.
    pub async fn admit(
        &self,
        svc: &A2aService,
        headers: &HeaderMap,
        query: Option<&str>,
    ) -> Result<Admitted, Refusal> {
        let mut ctx = request_context(headers, query).map_err(Refusal::Invalid)?;
        let creds = Credentials { headers, query };
        if let Err(r) = svc.authenticate(&mut ctx, creds).await {
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
        self.record(err.codes().reason);
    }

    /// Records a call's result.
    pub fn finish<T>(self, result: &Result<T, A2aError>) {
        match result {
            Ok(_) => self.ok(),
            Err(e) => self.failed(e),
        }
    }

    /// Records an error answered with an ErrorInfo reason of the binding's own (REST's 405).
    pub fn finish_reason(mut self, reason: &'static str) {
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

    fn record(&mut self, outcome: &'static str) {
        self.recorded = true;
        let binding = self.binding.as_str();
        metrics::counter!(
            "a2a_requests_total",
            "binding" => binding,
            "method" => self.method,
            "outcome" => outcome,
        )
        .increment(1);
        metrics::histogram!(
            "a2a_request_duration_seconds",
            "binding" => binding,
            "method" => self.method,
        )
        .record(self.started.elapsed().as_secs_f64());
    }
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
