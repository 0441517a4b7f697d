//! `ClientError` and the decoding of each binding's error format into [`A2aError`]: JSON-RPC
//! `error.data[]`, REST `error.details[]` (both ProtoJSON `Any` lists holding a
//! `google.rpc.ErrorInfo`), and the gRPC rich status (`grpc-status-details-bin`).

use std::collections::BTreeMap;

use a2a_types::{A2aError, ERROR_DOMAIN};
use serde_json::Value;

pub(crate) type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Everything a client call can fail with.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The server answered with an A2A (or generic JSON-RPC/REST/gRPC) error it classified with a
    /// `google.rpc.ErrorInfo`, or with a code that names one error unambiguously.
    #[error(transparent)]
    A2a(A2aError),
    /// The server answered with an error this client cannot classify (no ErrorInfo, an ambiguous
    /// code): `status` is `HTTP 404`, `gRPC NOT_FOUND` or `JSON-RPC -32050`.
    #[error("{status}: {message}")]
    Unclassified { status: String, message: String },
    /// The request did not get an answer: connection refused or reset, stream cut, TLS...
    #[error("{context}: {source}")]
    Transport {
        context: String,
        #[source]
        source: BoxError,
    },
    /// The answer was not what the binding promises (bad JSON, wrong shape, too large).
    #[error("{context}: {message}")]
    Decode { context: String, message: String },
    /// The client cannot be built for this target (bad URL, no usable interface in the card).
    #[error("client configuration: {0}")]
    Config(String),
}

impl ClientError {
    pub(crate) fn transport(context: impl Into<String>, source: impl Into<BoxError>) -> Self {
        Self::Transport {
            context: context.into(),
            source: source.into(),
        }
    }

    pub(crate) fn decode(context: impl Into<String>, message: impl std::fmt::Display) -> Self {
        Self::Decode {
            context: context.into(),
            message: message.to_string(),
        }
    }

    /// The A2A error, when the server sent one.
    pub fn as_a2a(&self) -> Option<&A2aError> {
        match self {
            Self::A2a(e) => Some(e),
            _ => None,
        }
    }
}

impl From<A2aError> for ClientError {
    fn from(e: A2aError) -> Self {
        Self::A2a(e)
    }
}

/// The A2A error a ProtoJSON `Any` list (JSON-RPC `error.data`, REST `error.details`) names:
/// its `google.rpc.ErrorInfo` of the A2A domain decides (an ErrorInfo of another domain is not
/// trusted), and for INVALID_PARAMS the `google.rpc.BadRequest` violation gives the field and the
/// bare reason, as `A2aError::from_status` reads them from gRPC.
pub(crate) fn a2a_error_from_details(details: Option<&Value>, message: &str) -> Option<A2aError> {
    let details = details?.as_array()?;
    let of_type = |name: &str| {
        let name = name.to_owned();
        details.iter().filter(move |d| {
            d.get("@type")
                .and_then(Value::as_str)
                .and_then(|t| t.rsplit('/').next())
                .is_some_and(|t| t == name)
        })
    };
    let info = of_type("google.rpc.ErrorInfo")
        .find(|d| d.get("domain").and_then(Value::as_str) == Some(ERROR_DOMAIN))?;
    let reason = info.get("reason")?.as_str()?;
    if reason == "INVALID_PARAMS"
        && let Some(v) = of_type("google.rpc.BadRequest")
            .filter_map(|b| b.get("fieldViolations")?.as_array()?.first())
            .next()
    {
        let text = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or_default();
        return Some(A2aError::invalid_params(text("field"), text("description")));
    }
    let metadata: BTreeMap<String, String> = info
        .get("metadata")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| {
                    let v = match v {
                        Value::String(s) => s.clone(),
                        other => other.to_string(),
                    };
                    (k.clone(), v)
                })
                .collect()
        })
        .unwrap_or_default();
    Some(A2aError::from_wire(reason, message, &metadata))
}

/// A JSON-RPC `error` object: classified by its ErrorInfo, else by its code.
pub(crate) fn from_jsonrpc_error(error: &Value) -> ClientError {
    let code = error.get("code").and_then(Value::as_i64).unwrap_or(0);
    let message = error
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if let Some(err) = a2a_error_from_details(error.get("data"), message) {
        return ClientError::A2a(err);
    }
    let reason = match code {
        -32001 => "TASK_NOT_FOUND",
        -32002 => "TASK_NOT_CANCELABLE",
        -32003 => "PUSH_NOTIFICATION_NOT_SUPPORTED",
        -32004 => "UNSUPPORTED_OPERATION",
        -32005 => "CONTENT_TYPE_NOT_SUPPORTED",
        -32006 => "INVALID_AGENT_RESPONSE",
        -32007 => "EXTENDED_AGENT_CARD_NOT_CONFIGURED",
        -32008 => "EXTENSION_SUPPORT_REQUIRED",
        -32009 => "VERSION_NOT_SUPPORTED",
        -32700 => "PARSE_ERROR",
        -32600 => "INVALID_REQUEST",
        -32601 => "METHOD_NOT_FOUND",
        -32602 => "INVALID_PARAMS",
        -32603 => "INTERNAL_ERROR",
        -32090 => "QUOTA_EXCEEDED",
        -32029 => "RATE_LIMIT_EXCEEDED", // a2a_types::RATE_LIMITED_CODE
        _ => {
            return ClientError::Unclassified {
                status: format!("JSON-RPC {code}"),
                message: message.to_owned(),
            };
        }
    };
    ClientError::A2a(A2aError::from_wire(reason, message, &BTreeMap::new()))
}

/// A REST error answer (`{"error":{"code","status","message","details"}}`) with its HTTP status.
pub(crate) fn from_rest_error(status: u16, body: &[u8]) -> ClientError {
    let parsed: Option<Value> = serde_json::from_slice(body).ok();
    let error = parsed.as_ref().and_then(|v| v.get("error"));
    let message = error
        .and_then(|e| e.get("message"))
        .and_then(Value::as_str)
        .map(str::to_owned)
        .unwrap_or_else(|| truncated_text(body));
    if let Some(err) = a2a_error_from_details(error.and_then(|e| e.get("details")), &message) {
        return ClientError::A2a(err);
    }
    let reason = match status {
        401 => "UNAUTHENTICATED",
        403 => "PERMISSION_DENIED",
        413 => "PAYLOAD_TOO_LARGE",
        429 => "RATE_LIMIT_EXCEEDED",
        500 => "INTERNAL_ERROR",
        503 => "UNAVAILABLE",
        _ => {
            return ClientError::Unclassified {
                status: format!("HTTP {status}"),
                message,
            };
        }
    };
    ClientError::A2a(A2aError::from_wire(reason, &message, &BTreeMap::new()))
}

/// At most 512 bytes of a body, for error messages.
pub(crate) fn truncated_text(body: &[u8]) -> String {
    let end = body.len().min(512);
    let mut s = String::from_utf8_lossy(&body[..end]).into_owned();
    if body.len() > end {
        s.push('…');
    }
    s
}

#[cfg(test)]
mod tests {
    use a2a_types::v1::TaskState;
    use serde_json::json;

    use super::*;

    fn a2a(e: ClientError) -> A2aError {
        match e {
            ClientError::A2a(e) => e,
            other => panic!("not an A2A error: {other:?}"),
        }
    }

    #[test]
    fn jsonrpc_error_info_wins_over_the_code() {
        let err = json!({"code": -32001, "message": "task t-1 not found", "data": [
            {"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "TASK_NOT_FOUND",
             "domain": "a2a-protocol.org", "metadata": {"taskId": "t-1"}}]});
        assert_eq!(
            a2a(from_jsonrpc_error(&err)),
            A2aError::task_not_found("t-1")
        );
    }

    #[test]
    fn jsonrpc_invalid_params_keep_the_field() {
        let err = json!({"code": -32602, "message": "invalid params: message.role: bad", "data": [
            {"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "INVALID_PARAMS",
             "domain": "a2a-protocol.org", "metadata": {"field": "message.role"}}]});
        match a2a(from_jsonrpc_error(&err)) {
            A2aError::InvalidParams { field, reason } => {
                assert_eq!(field, "message.role");
                assert_eq!(
                    reason, "invalid params: message.role: bad",
                    "no BadRequest: the message"
                );
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn jsonrpc_without_data_falls_back_to_the_code() {
        let err = json!({"code": -32002, "message": "not cancelable"});
        assert!(matches!(
            a2a(from_jsonrpc_error(&err)),
            A2aError::TaskNotCancelable { .. }
        ));
        let err = json!({"code": -32050, "message": "odd"});
        match from_jsonrpc_error(&err) {
            ClientError::Unclassified { status, message } => {
                assert_eq!(
                    (status.as_str(), message.as_str()),
                    ("JSON-RPC -32050", "odd")
                )
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn rest_error_body() {
        let body = json!({"error": {"code": 400, "status": "FAILED_PRECONDITION",
            "message": "task t is TASK_STATE_COMPLETED and cannot be canceled",
            "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo",
                "reason": "TASK_NOT_CANCELABLE", "domain": "a2a-protocol.org",
                "metadata": {"taskId": "t", "state": "TASK_STATE_COMPLETED"}}]}});
        assert_eq!(
            a2a(from_rest_error(400, body.to_string().as_bytes())),
            A2aError::TaskNotCancelable {
                task_id: "t".into(),
                state: TaskState::Completed
            }
        );
    }

    #[test]
    fn rest_error_without_error_info() {
        match from_rest_error(404, b"no route") {
            ClientError::Unclassified { status, message } => {
                assert_eq!(
                    (status.as_str(), message.as_str()),
                    ("HTTP 404", "no route")
                )
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            a2a(from_rest_error(503, b"{}")),
            A2aError::Unavailable(_)
        ));
    }

    #[test]
    fn rate_limits_are_classified_with_or_without_error_info() {
        let err = A2aError::RateLimited {
            scope: "ip".into(),
            limit: 5,
            window_secs: 1,
            retry_after_ms: 200,
        };
        let body = json!({"code": -32029, "message": err.to_string(),
            "data": [err.error_info().to_json()]});
        assert_eq!(a2a(from_jsonrpc_error(&body)), err);
        assert!(matches!(
            a2a(from_jsonrpc_error(
                &json!({"code": -32029, "message": "slow down"})
            )),
            A2aError::RateLimited { .. }
        ));
        assert!(matches!(
            a2a(from_rest_error(429, b"{}")),
            A2aError::RateLimited { .. }
        ));
    }

    #[test]
    fn bad_request_violations_give_field_and_reason() {
        let details = json!([
            {"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "INVALID_PARAMS",
             "domain": "a2a-protocol.org", "metadata": {"field": "pageSize"}},
            {"@type": "type.googleapis.com/google.rpc.BadRequest",
             "fieldViolations": [{"field": "pageSize", "description": "must be between 1 and 100"}]}]);
        assert_eq!(
            a2a_error_from_details(
                Some(&details),
                "invalid params: pageSize: must be between 1 and 100"
            ),
            Some(A2aError::invalid_params(
                "pageSize",
                "must be between 1 and 100"
            ))
        );
    }

    #[test]
    fn only_a2a_domain_error_info_is_trusted() {
        let details = json!([
            {"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "TASK_NOT_FOUND", "domain": "x.example"},
            {"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "TASK_NOT_FOUND",
             "domain": "a2a-protocol.org", "metadata": {"taskId": "t", "n": 3}}]);
        assert_eq!(
            a2a_error_from_details(Some(&details), "m"),
            Some(A2aError::task_not_found("t"))
        );
        let foreign = json!([{"@type": "type.googleapis.com/google.rpc.ErrorInfo",
                              "reason": "TASK_NOT_FOUND", "domain": "x.example"}]);
        assert_eq!(a2a_error_from_details(Some(&foreign), "m"), None);
    }
}
