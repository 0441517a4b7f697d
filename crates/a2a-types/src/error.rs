//! The one error type of the gateway. Every binding maps it with an exhaustive `match`, so a new
//! variant does not compile until each binding has decided what it means on the wire. The codes
//! follow the A2A 1.0.1 mapping table (JSON-RPC code, HTTP status, gRPC code, ErrorInfo reason).

use std::collections::BTreeMap;

use crate::v1::TaskState;

/// `google.rpc.ErrorInfo.domain` for every error the gateway emits.
pub const ERROR_DOMAIN: &str = "a2a-protocol.org";

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum A2aError {
    #[error("task {task_id} not found")]
    TaskNotFound { task_id: String },
    #[error("task {task_id} is {} and cannot be canceled", state.as_str_name())]
    TaskNotCancelable { task_id: String, state: TaskState },
    #[error("push notifications are not supported by this agent")]
    PushNotificationNotSupported,
    #[error("{0}")]
    UnsupportedOperation(String),
    #[error("content type {media_type} is not supported by agent {agent}")]
    ContentTypeNotSupported { media_type: String, agent: String },
    #[error("invalid agent response: {0}")]
    InvalidAgentResponse(String),
    #[error("the extended agent card is not configured")]
    ExtendedAgentCardNotConfigured,
    #[error("extension {uri} is required; activate it with the A2A-Extensions header")]
    ExtensionSupportRequired { uri: String },
    #[error("A2A version {version} is not supported; this interface serves 1.x")]
    VersionNotSupported { version: String },
    #[error("invalid JSON: {0}")]
    Parse(String),
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    #[error("method {method} not found")]
    MethodNotFound { method: String },
    /// Names the offending field (`message.parts[0]`, `pageSize`, ...).
    #[error("invalid params: {field}: {reason}")]
    InvalidParams { field: String, reason: String },
    /// A retried send whose `Idempotency-Key` was used for a different request: refused, never
    /// answered with the other request's task (HTTP 422, as the Idempotency-Key draft says).
    #[error("invalid params: Idempotency-Key: {key:?} was already used for a different request")]
    IdempotencyKeyReused { key: String },
    #[error("payload too large: the limit is {limit} bytes")]
    PayloadTooLarge { limit: usize },
    #[error("authentication required: {0}")]
    Unauthenticated(String),
    #[error("permission denied: {0}")]
    PermissionDenied(String),
    /// A dependency (database, bus, upstream agent) is unreachable; the request may be retried.
    #[error("service unavailable: {0}")]
    Unavailable(String),
    /// Never echoes internal causes: callers log the cause and put a short description here.
    #[error("internal error: {0}")]
    Internal(String),
    /// A per-owner quota (`[limits.quotas]`) is used up: the request past it is refused until
    /// the caller's own streams, turns, sends or push configs end. `quota` is the config key.
    #[error("quota {quota} exceeded: the limit is {limit}")]
    QuotaExceeded { quota: String, limit: u64 },
    /// A rate limit refused the request (HTTP 429, JSON-RPC [`RATE_LIMITED_CODE`] with HTTP
    /// 429, gRPC RESOURCE_EXHAUSTED with a `google.rpc.RetryInfo`). `scope` is the limit's
    /// (`ip`, `principal`, `agent`); `limit` units per `window_secs` is its policy (the burst,
    /// and the time it takes to refill); the request may be retried after `retry_after_ms`.
    #[error(
        "rate limit exceeded: {scope} limit of {limit} per {window_secs} s; retry after {retry_after_ms} ms"
    )]
    RateLimited {
        scope: String,
        limit: u32,
        window_secs: u64,
        retry_after_ms: u64,
    },
}

/// The JSON-RPC code of [`A2aError::RateLimited`], from the implementation-defined server-error
/// range (-32000 to -32099) that A2A leaves free past -32009 ("429" in its last digits).
pub const RATE_LIMITED_CODE: i32 = -32029;

/// HTTP status and gRPC code names, without pulling an HTTP crate into the wire model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WireCodes {
    pub json_rpc: i32,
    pub http: u16,
    pub grpc: tonic::Code,
    pub reason: &'static str,
}

impl A2aError {
    pub fn invalid_params(field: impl Into<String>, reason: impl Into<String>) -> Self {
        Self::InvalidParams {
            field: field.into(),
            reason: reason.into(),
        }
    }

    pub fn task_not_found(task_id: impl Into<String>) -> Self {
        Self::TaskNotFound {
            task_id: task_id.into(),
        }
    }

    /// The 1.0.1 mapping table, in one place.
    pub fn codes(&self) -> WireCodes {
        use tonic::Code;
        let (json_rpc, http, grpc, reason) = match self {
            Self::TaskNotFound { .. } => (-32001, 404, Code::NotFound, "TASK_NOT_FOUND"),
            Self::TaskNotCancelable { .. } => {
                (-32002, 400, Code::FailedPrecondition, "TASK_NOT_CANCELABLE")
            }
            Self::PushNotificationNotSupported => (
                -32003,
                400,
                Code::FailedPrecondition,
                "PUSH_NOTIFICATION_NOT_SUPPORTED",
            ),
            Self::UnsupportedOperation(_) => (
                -32004,
                400,
                Code::FailedPrecondition,
                "UNSUPPORTED_OPERATION",
            ),
            Self::ContentTypeNotSupported { .. } => (
                -32005,
                400,
                Code::InvalidArgument,
                "CONTENT_TYPE_NOT_SUPPORTED",
            ),
            Self::InvalidAgentResponse(_) => {
                (-32006, 500, Code::Internal, "INVALID_AGENT_RESPONSE")
            }
            Self::ExtendedAgentCardNotConfigured => (
                -32007,
                400,
                Code::FailedPrecondition,
                "EXTENDED_AGENT_CARD_NOT_CONFIGURED",
            ),
            Self::ExtensionSupportRequired { .. } => (
                -32008,
                400,
                Code::FailedPrecondition,
                "EXTENSION_SUPPORT_REQUIRED",
            ),
            Self::VersionNotSupported { .. } => (
                -32009,
                400,
                Code::FailedPrecondition,
                "VERSION_NOT_SUPPORTED",
            ),
            Self::Parse(_) => (-32700, 400, Code::InvalidArgument, "PARSE_ERROR"),
            Self::InvalidRequest(_) => (-32600, 400, Code::InvalidArgument, "INVALID_REQUEST"),
            Self::MethodNotFound { .. } => (-32601, 404, Code::Unimplemented, "METHOD_NOT_FOUND"),
            Self::InvalidParams { .. } => (-32602, 400, Code::InvalidArgument, "INVALID_PARAMS"),
            Self::IdempotencyKeyReused { .. } => {
                (-32602, 422, Code::InvalidArgument, "IDEMPOTENCY_KEY_REUSED")
            }
            Self::PayloadTooLarge { .. } => {
                (-32600, 413, Code::ResourceExhausted, "PAYLOAD_TOO_LARGE")
            }
            Self::Unauthenticated(_) => (-31401, 401, Code::Unauthenticated, "UNAUTHENTICATED"),
            Self::PermissionDenied(_) => (-31403, 403, Code::PermissionDenied, "PERMISSION_DENIED"),
            Self::Unavailable(_) => (-32603, 503, Code::Unavailable, "UNAVAILABLE"),
            Self::Internal(_) => (-32603, 500, Code::Internal, "INTERNAL_ERROR"),
            // A server-error-range code of our own, far from the A2A sequence (-32001...).
            Self::QuotaExceeded { .. } => (-32090, 429, Code::ResourceExhausted, "QUOTA_EXCEEDED"),
            Self::RateLimited { .. } => (
                RATE_LIMITED_CODE,
                429,
                Code::ResourceExhausted,
                "RATE_LIMIT_EXCEEDED",
            ),
        };
        WireCodes {
            json_rpc,
            http,
            grpc,
            reason,
        }
    }

    /// The `google.rpc.ErrorInfo` detail every binding attaches.
    pub fn error_info(&self) -> ErrorInfo {
        let mut metadata = BTreeMap::new();
        match self {
            Self::TaskNotFound { task_id } => {
                metadata.insert("taskId".to_owned(), task_id.clone());
            }
            Self::TaskNotCancelable { task_id, state } => {
                metadata.insert("taskId".to_owned(), task_id.clone());
                metadata.insert("state".to_owned(), state.as_str_name().to_owned());
            }
            Self::ContentTypeNotSupported { media_type, agent } => {
                metadata.insert("mediaType".to_owned(), media_type.clone());
                metadata.insert("agent".to_owned(), agent.clone());
            }
            Self::IdempotencyKeyReused { key } => {
                metadata.insert("field".to_owned(), "Idempotency-Key".to_owned());
                metadata.insert("key".to_owned(), key.clone());
            }
            Self::PayloadTooLarge { limit } => {
                metadata.insert("limit".to_owned(), limit.to_string());
            }
            Self::ExtensionSupportRequired { uri } => {
                metadata.insert("extension".to_owned(), uri.clone());
            }
            Self::VersionNotSupported { version } => {
                metadata.insert("version".to_owned(), version.clone());
                metadata.insert("supportedVersions".to_owned(), "1.0".to_owned());
            }
            Self::MethodNotFound { method } => {
                metadata.insert("method".to_owned(), method.clone());
            }
            Self::InvalidParams { field, .. } => {
                metadata.insert("field".to_owned(), field.clone());
            }
            Self::QuotaExceeded { quota, limit } => {
                metadata.insert("quota".to_owned(), quota.clone());
                metadata.insert("limit".to_owned(), limit.to_string());
            }
            Self::RateLimited {
                scope,
                limit,
                window_secs,
                retry_after_ms,
            } => {
                metadata.insert("scope".to_owned(), scope.clone());
                metadata.insert("limit".to_owned(), limit.to_string());
                metadata.insert("windowSecs".to_owned(), window_secs.to_string());
                metadata.insert("retryAfterMs".to_owned(), retry_after_ms.to_string());
            }
            _ => {}
        }
        ErrorInfo {
            reason: self.codes().reason,
            domain: ERROR_DOMAIN,
            metadata,
        }
    }

    /// Rebuilds a typed error from what a binding carried (ErrorInfo reason and metadata, the
    /// message): the client side of [`A2aError::error_info`]. Unknown reasons become `Internal`.
    pub fn from_wire(reason: &str, message: &str, metadata: &BTreeMap<String, String>) -> Self {
        let meta = |k: &str| metadata.get(k).cloned().unwrap_or_default();
        // Display adds a prefix to some variants; strip it so a round trip is exact.
        let text = |prefix: &str| message.strip_prefix(prefix).unwrap_or(message).to_owned();
        let msg = message.to_owned();
        match reason {
            "TASK_NOT_FOUND" => Self::TaskNotFound {
                task_id: meta("taskId"),
            },
            "TASK_NOT_CANCELABLE" => Self::TaskNotCancelable {
                task_id: meta("taskId"),
                state: TaskState::from_str_name(&meta("state")).unwrap_or(TaskState::Unspecified),
            },
            "PUSH_NOTIFICATION_NOT_SUPPORTED" => Self::PushNotificationNotSupported,
            "UNSUPPORTED_OPERATION" => Self::UnsupportedOperation(msg),
            "CONTENT_TYPE_NOT_SUPPORTED" => Self::ContentTypeNotSupported {
                media_type: meta("mediaType"),
                agent: meta("agent"),
            },
            "INVALID_AGENT_RESPONSE" => {
                Self::InvalidAgentResponse(text("invalid agent response: "))
            }
            "EXTENDED_AGENT_CARD_NOT_CONFIGURED" => Self::ExtendedAgentCardNotConfigured,
            "EXTENSION_SUPPORT_REQUIRED" => Self::ExtensionSupportRequired {
                uri: meta("extension"),
            },
            "VERSION_NOT_SUPPORTED" => Self::VersionNotSupported {
                version: meta("version"),
            },
            "PARSE_ERROR" => Self::Parse(text("invalid JSON: ")),
            "INVALID_REQUEST" => Self::InvalidRequest(text("invalid request: ")),
            // REST answers a wrong verb with METHOD_NOT_ALLOWED (HTTP 405).
            "METHOD_NOT_FOUND" | "METHOD_NOT_ALLOWED" => Self::MethodNotFound {
                method: meta("method"),
            },
            "INVALID_PARAMS" => Self::InvalidParams {
                field: meta("field"),
                reason: msg,
            },
            "IDEMPOTENCY_KEY_REUSED" => Self::IdempotencyKeyReused { key: meta("key") },
            "PAYLOAD_TOO_LARGE" => Self::PayloadTooLarge {
                limit: meta("limit").parse().unwrap_or(0),
            },
            "UNAUTHENTICATED" => Self::Unauthenticated(text("authentication required: ")),
            "PERMISSION_DENIED" => Self::PermissionDenied(text("permission denied: ")),
            "UNAVAILABLE" => Self::Unavailable(text("service unavailable: ")),
            "QUOTA_EXCEEDED" => Self::QuotaExceeded {
                quota: meta("quota"),
                limit: meta("limit").parse().unwrap_or(0),
            },
            "RATE_LIMIT_EXCEEDED" => Self::RateLimited {
                scope: meta("scope"),
                limit: meta("limit").parse().unwrap_or(0),
                window_secs: meta("windowSecs").parse().unwrap_or(0),
                retry_after_ms: meta("retryAfterMs").parse().unwrap_or(0),
            },
            _ => Self::Internal(text("internal error: ")),
        }
    }

    /// Whether a client may retry the same request later (used for `Retry-After`).
    pub fn is_retryable(&self) -> bool {
        matches!(self, Self::Unavailable(_) | Self::RateLimited { .. })
    }

    /// How long the client should wait before it retries, when the error says (a rate limit).
    pub fn retry_after(&self) -> Option<std::time::Duration> {
        match self {
            Self::RateLimited { retry_after_ms, .. } => {
                Some(std::time::Duration::from_millis(*retry_after_ms))
            }
            _ => None,
        }
    }
}

/// The canonical name of a gRPC code (`NOT_FOUND`), as REST errors carry it in `error.status`.
pub fn grpc_status_name(code: tonic::Code) -> &'static str {
    use tonic::Code::*;
    match code {
        Ok => "OK",
        Cancelled => "CANCELLED",
        Unknown => "UNKNOWN",
        InvalidArgument => "INVALID_ARGUMENT",
        DeadlineExceeded => "DEADLINE_EXCEEDED",
        NotFound => "NOT_FOUND",
        AlreadyExists => "ALREADY_EXISTS",
        PermissionDenied => "PERMISSION_DENIED",
        ResourceExhausted => "RESOURCE_EXHAUSTED",
        FailedPrecondition => "FAILED_PRECONDITION",
        Aborted => "ABORTED",
        OutOfRange => "OUT_OF_RANGE",
        Unimplemented => "UNIMPLEMENTED",
        Internal => "INTERNAL",
        Unavailable => "UNAVAILABLE",
        DataLoss => "DATA_LOSS",
        Unauthenticated => "UNAUTHENTICATED",
    }
}

/// `google.rpc.ErrorInfo`, as carried in JSON-RPC `error.data`, REST `error.details` and the gRPC
/// `grpc-status-details-bin` trailer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrorInfo {
    pub reason: &'static str,
    pub domain: &'static str,
    pub metadata: BTreeMap<String, String>,
}

impl ErrorInfo {
    pub const TYPE_URL: &'static str = "type.googleapis.com/google.rpc.ErrorInfo";

    /// The ProtoJSON `Any` form: `{"@type": ..., "reason", "domain", "metadata"}`.
    pub fn to_json(&self) -> serde_json::Value {
        let mut v = serde_json::json!({
            "@type": Self::TYPE_URL,
            "reason": self.reason,
            "domain": self.domain,
        });
        if !self.metadata.is_empty() {
            v["metadata"] = serde_json::json!(self.metadata);
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a2a_errors_follow_the_1_0_1_table() {
        let cases = [
            (
                A2aError::task_not_found("t"),
                -32001,
                404,
                tonic::Code::NotFound,
            ),
            (
                A2aError::TaskNotCancelable {
                    task_id: "t".into(),
                    state: TaskState::Completed,
                },
                -32002,
                400,
                tonic::Code::FailedPrecondition,
            ),
            (
                A2aError::PushNotificationNotSupported,
                -32003,
                400,
                tonic::Code::FailedPrecondition,
            ),
            (
                A2aError::UnsupportedOperation("x".into()),
                -32004,
                400,
                tonic::Code::FailedPrecondition,
            ),
            (
                A2aError::ContentTypeNotSupported {
                    media_type: "a/b".into(),
                    agent: "echo".into(),
                },
                -32005,
                400,
                tonic::Code::InvalidArgument,
            ),
            (
                A2aError::InvalidAgentResponse("x".into()),
                -32006,
                500,
                tonic::Code::Internal,
            ),
            (
                A2aError::ExtendedAgentCardNotConfigured,
                -32007,
                400,
                tonic::Code::FailedPrecondition,
            ),
            (
                A2aError::ExtensionSupportRequired { uri: "u".into() },
                -32008,
                400,
                tonic::Code::FailedPrecondition,
            ),
            (
                A2aError::VersionNotSupported {
                    version: "99.0".into(),
                },
                -32009,
                400,
                tonic::Code::FailedPrecondition,
            ),
            (
                A2aError::IdempotencyKeyReused { key: "k".into() },
                -32602,
                422,
                tonic::Code::InvalidArgument,
            ),
            (
                A2aError::QuotaExceeded {
                    quota: "streams_per_owner".into(),
                    limit: 2,
                },
                -32090,
                429,
                tonic::Code::ResourceExhausted,
            ),
            (
                A2aError::RateLimited {
                    scope: "ip".into(),
                    limit: 10,
                    window_secs: 1,
                    retry_after_ms: 100,
                },
                -32029,
                429,
                tonic::Code::ResourceExhausted,
            ),
        ];
        for (err, rpc, http, grpc) in cases {
            let c = err.codes();
            assert_eq!((c.json_rpc, c.http, c.grpc), (rpc, http, grpc), "{err:?}");
            assert_eq!(err.error_info().domain, "a2a-protocol.org");
        }
    }

    #[test]
    fn wire_round_trip() {
        let errors = [
            A2aError::task_not_found("t"),
            A2aError::TaskNotCancelable {
                task_id: "t".into(),
                state: TaskState::Completed,
            },
            A2aError::PushNotificationNotSupported,
            A2aError::ContentTypeNotSupported {
                media_type: "a/b".into(),
                agent: "echo".into(),
            },
            A2aError::ExtensionSupportRequired { uri: "u".into() },
            A2aError::VersionNotSupported {
                version: "9.0".into(),
            },
            A2aError::MethodNotFound { method: "M".into() },
            A2aError::PayloadTooLarge { limit: 10 },
            A2aError::IdempotencyKeyReused { key: "k1".into() },
            A2aError::ExtendedAgentCardNotConfigured,
            A2aError::Internal("boom".into()),
            A2aError::Unavailable("db down".into()),
            A2aError::InvalidAgentResponse("garbage".into()),
            A2aError::UnsupportedOperation("no".into()),
            A2aError::QuotaExceeded {
                quota: "running_turns_per_owner".into(),
                limit: 3,
            },
            A2aError::RateLimited {
                scope: "principal".into(),
                limit: 40,
                window_secs: 2,
                retry_after_ms: 250,
            },
        ];
        for err in errors {
            let info = err.error_info();
            let back = A2aError::from_wire(info.reason, &err.to_string(), &info.metadata);
            assert_eq!(back, err);
        }
        assert_eq!(
            grpc_status_name(tonic::Code::FailedPrecondition),
            "FAILED_PRECONDITION"
        );
    }

    #[test]
    fn error_info_json_names_the_task() {
        let info = A2aError::task_not_found("t-1").error_info().to_json();
        assert_eq!(info["@type"], ErrorInfo::TYPE_URL);
        assert_eq!(info["reason"], "TASK_NOT_FOUND");
        assert_eq!(info["metadata"]["taskId"], "t-1");
    }
}
