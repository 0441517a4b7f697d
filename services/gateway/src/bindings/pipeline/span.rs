//! A call's SERVER span (README, Traces): built when a sampled call is admitted, its outcome
//! attributes set and ended when the call is recorded.

use std::borrow::Cow;

use a2a_process::telemetry::{self, KeyValue, SpanKind, TraceSpan};

use super::{Binding, Call};

impl Call {
    /// The SERVER span's outcome attributes, then its end (a stream's at its opening).
    pub(super) fn end_span(&self, outcome: &'static str) {
        let span = self.span();
        let status = if self.binding != Binding::Grpc {
            KeyValue::new(
                "http.response.status_code",
                i64::from(self.status.unwrap_or(200)),
            )
        } else {
            // A failure's gRPC code was set by `failed`.
            KeyValue::new("rpc.response.status_code", "OK")
        };
        if outcome == "ok" {
            span.set_all(|| [status]);
        } else if self.binding != Binding::Grpc {
            span.set_all(|| {
                [
                    status,
                    KeyValue::new("error.type", outcome),
                    KeyValue::new("a2a.error.reason", outcome),
                ]
            });
        } else {
            span.set_all(|| {
                [
                    KeyValue::new("error.type", outcome),
                    KeyValue::new("a2a.error.reason", outcome),
                ]
            });
        }
        span.end();
    }
}

/// The SERVER span of one sampled call (attributes: README, Traces), named after its method,
/// child of the caller's `traceparent` (`remote`; a new trace without one).
pub(super) fn server_span(
    binding: Binding,
    method: &'static str,
    http: Option<&(Cow<'static, str>, Cow<'static, str>)>,
    remote: &telemetry::Context,
) -> TraceSpan {
    let mut attributes = Vec::with_capacity(6);
    // HTTP+JSON is an HTTP API, not an RPC protocol: it has no `rpc.system.name`.
    match binding {
        Binding::JsonRpc => attributes.push(KeyValue::new("rpc.system.name", "jsonrpc")),
        Binding::Grpc => attributes.push(KeyValue::new("rpc.system.name", "grpc")),
        Binding::Rest => {}
    }
    attributes.push(KeyValue::new("rpc.method", method));
    // The A2A semantic conventions (OpenTelemetry draft): the span is named after this too.
    attributes.push(KeyValue::new("a2a.method.name", method));
    if let Some((m, route)) = http {
        attributes.push(KeyValue::new("http.request.method", m.clone()));
        attributes.push(KeyValue::new("http.route", route.clone()));
    }
    attributes.push(KeyValue::new("a2a.binding", binding.as_str()));
    TraceSpan::start(method, SpanKind::Server, attributes, remote)
}

/// A gRPC status code as the OpenTelemetry conventions spell it (`NOT_FOUND`).
pub(super) fn grpc_code_name(code: tonic::Code) -> &'static str {
    use tonic::Code;
    match code {
        Code::Ok => "OK",
        Code::Cancelled => "CANCELLED",
        Code::Unknown => "UNKNOWN",
        Code::InvalidArgument => "INVALID_ARGUMENT",
        Code::DeadlineExceeded => "DEADLINE_EXCEEDED",
        Code::NotFound => "NOT_FOUND",
        Code::AlreadyExists => "ALREADY_EXISTS",
        Code::PermissionDenied => "PERMISSION_DENIED",
        Code::ResourceExhausted => "RESOURCE_EXHAUSTED",
        Code::FailedPrecondition => "FAILED_PRECONDITION",
        Code::Aborted => "ABORTED",
        Code::OutOfRange => "OUT_OF_RANGE",
        Code::Unimplemented => "UNIMPLEMENTED",
        Code::Internal => "INTERNAL",
        Code::Unavailable => "UNAVAILABLE",
        Code::DataLoss => "DATA_LOSS",
        Code::Unauthenticated => "UNAUTHENTICATED",
    }
}
