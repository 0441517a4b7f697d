//! [`A2aError`] ↔ [`tonic::Status`], the gRPC binding's error table (spec §10, 1.0.1 codes).
//!
//! Server side: the status code is `codes().grpc`, the message is the error's `Display`, and the
//! `grpc-status-details-bin` trailer carries a `google.rpc.Status` whose details hold the
//! `google.rpc.ErrorInfo` the spec makes mandatory (plus a `google.rpc.BadRequest` field
//! violation for invalid params, which the spec recommends for validation errors).
//!
//! Client side: the ErrorInfo `reason` decides (clients classify by reason, not by code); a
//! status without an A2A ErrorInfo (a proxy, a plain gRPC server, tonic's own transport errors)
//! falls back to the gRPC code.

use std::collections::{BTreeMap, HashMap};

use tonic::{Code, Status};
use tonic_types::{ErrorDetails, StatusExt};

use crate::error::{A2aError, ERROR_DOMAIN};

impl A2aError {
    /// The rich gRPC status for this error.
    pub fn to_status(&self) -> Status {
        let info = self.error_info();
        let mut details = ErrorDetails::with_error_info(
            info.reason,
            info.domain,
            info.metadata.into_iter().collect::<HashMap<_, _>>(),
        );
        if let Self::InvalidParams { field, reason } = self {
            details.add_bad_request_violation(field, reason);
        }
        // A rate limit says when to come back (`google.rpc.RetryInfo`), as HTTP's Retry-After.
        if let Some(delay) = self.retry_after() {
            details.set_retry_info(Some(delay));
        }
        Status::with_error_details(self.codes().grpc, self.to_string(), details)
    }

    /// Rebuilds the error a gRPC peer sent: by its A2A ErrorInfo when there is one, otherwise by
    /// the status code alone.
    pub fn from_status(status: &Status) -> Self {
        let details = status.get_error_details();
        let Some(info) = details.error_info().filter(|i| i.domain == ERROR_DOMAIN) else {
            return from_code(status);
        };
        // The BadRequest violation carries the field and the bare reason; the message would
        // repeat the "invalid params: field:" prefix of our Display on every hop.
        if info.reason == "INVALID_PARAMS"
            && let Some(v) = details
                .bad_request()
                .and_then(|b| b.field_violations.first())
        {
            return Self::invalid_params(&v.field, &v.description);
        }
        let metadata: BTreeMap<String, String> = info
            .metadata
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        Self::from_wire(&info.reason, status.message(), &metadata)
    }
}

/// A status without A2A details: the closest error by code. The message is kept; an empty
/// one (tonic's transport errors often have none) becomes the code's description.
fn from_code(status: &Status) -> A2aError {
    let msg = if status.message().is_empty() {
        status.code().description().to_owned()
    } else {
        status.message().to_owned()
    };
    match status.code() {
        Code::InvalidArgument | Code::OutOfRange => A2aError::InvalidRequest(msg),
        // A2A servers send NOT_FOUND only for tasks (and push configs, which also answer
        // TASK_NOT_FOUND); the id is not recoverable without the ErrorInfo.
        Code::NotFound => A2aError::task_not_found(""),
        // UNIMPLEMENTED is what a gRPC server answers for an RPC it does not have.
        Code::FailedPrecondition | Code::Unimplemented => A2aError::UnsupportedOperation(msg),
        Code::Unauthenticated => A2aError::Unauthenticated(msg),
        Code::PermissionDenied => A2aError::PermissionDenied(msg),
        // Worth retrying: the server, or the path to it, is overloaded, down or slow.
        Code::Unavailable
        | Code::ResourceExhausted
        | Code::DeadlineExceeded
        | Code::Aborted
        | Code::Cancelled => A2aError::Unavailable(msg),
        Code::Ok | Code::Unknown | Code::AlreadyExists | Code::Internal | Code::DataLoss => {
            A2aError::Internal(msg)
        }
    }
}

impl From<A2aError> for Status {
    fn from(err: A2aError) -> Self {
        err.to_status()
    }
}

impl From<&A2aError> for Status {
    fn from(err: &A2aError) -> Self {
        err.to_status()
    }
}

impl From<Status> for A2aError {
    fn from(status: Status) -> Self {
        Self::from_status(&status)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::v1::TaskState;

    /// What a real client sees: the status rebuilt from its HTTP/2 headers and trailers.
    fn over_the_wire(status: Status) -> Status {
        let mut headers = tonic::codegen::http::HeaderMap::new();
        status
            .add_header(&mut headers)
            .expect("a status encodes as headers");
        Status::from_header_map(&headers).expect("and decodes again")
    }

    #[test]
    fn a_rich_status_carries_code_message_and_error_info() {
        let err = A2aError::task_not_found("t-1");
        let status = over_the_wire(err.to_status());
        assert_eq!(status.code(), Code::NotFound);
        assert_eq!(status.message(), "task t-1 not found");
        let info = status
            .get_details_error_info()
            .expect("an ErrorInfo detail");
        assert_eq!(info.reason, "TASK_NOT_FOUND");
        assert_eq!(info.domain, "a2a-protocol.org");
        assert_eq!(info.metadata["taskId"], "t-1");
        assert!(status.get_details_bad_request().is_none());
    }

    #[test]
    fn invalid_params_adds_a_bad_request_violation() {
        let status = over_the_wire(Status::from(A2aError::invalid_params(
            "message.parts[0]",
            "has no content",
        )));
        assert_eq!(status.code(), Code::InvalidArgument);
        assert_eq!(
            status.get_details_error_info().unwrap().reason,
            "INVALID_PARAMS"
        );
        let bad = status
            .get_details_bad_request()
            .expect("a BadRequest detail");
        assert_eq!(bad.field_violations.len(), 1);
        assert_eq!(bad.field_violations[0].field, "message.parts[0]");
        assert_eq!(bad.field_violations[0].description, "has no content");
    }

    #[test]
    fn a_rate_limit_carries_retry_info() {
        let err = A2aError::RateLimited {
            scope: "principal".into(),
            limit: 40,
            window_secs: 2,
            retry_after_ms: 1500,
        };
        let status = over_the_wire(err.to_status());
        assert_eq!(status.code(), Code::ResourceExhausted);
        let retry = status.get_details_retry_info().expect("a RetryInfo detail");
        assert_eq!(
            retry.retry_delay,
            Some(std::time::Duration::from_millis(1500))
        );
        assert_eq!(A2aError::from_status(&status), err);
    }

    #[test]
    fn codes_follow_the_1_0_1_table() {
        let cases = [
            (
                A2aError::TaskNotCancelable {
                    task_id: "t".into(),
                    state: TaskState::Completed,
                },
                Code::FailedPrecondition,
            ),
            (
                A2aError::VersionNotSupported {
                    version: "99.0".into(),
                },
                Code::FailedPrecondition,
            ),
            (
                A2aError::PushNotificationNotSupported,
                Code::FailedPrecondition,
            ),
            (
                A2aError::PayloadTooLarge { limit: 1 },
                Code::ResourceExhausted,
            ),
            (A2aError::Internal("x".into()), Code::Internal),
        ];
        for (err, code) in cases {
            assert_eq!(err.to_status().code(), code, "{err:?}");
        }
    }

    #[test]
    fn round_trip_through_the_wire() {
        let errors = [
            A2aError::task_not_found("t"),
            A2aError::TaskNotCancelable {
                task_id: "t".into(),
                state: TaskState::Canceled,
            },
            A2aError::PushNotificationNotSupported,
            A2aError::UnsupportedOperation("task t is COMPLETED".into()),
            A2aError::ContentTypeNotSupported {
                media_type: "a/b".into(),
                agent: "echo".into(),
            },
            A2aError::ExtendedAgentCardNotConfigured,
            A2aError::ExtensionSupportRequired {
                uri: "urn:x".into(),
            },
            A2aError::VersionNotSupported {
                version: "99.0".into(),
            },
            A2aError::invalid_params("pageSize", "must be between 1 and 100"),
            A2aError::PayloadTooLarge { limit: 10 },
            A2aError::QuotaExceeded {
                quota: "streams_per_owner".into(),
                limit: 5,
            },
        ];
        for err in errors {
            let back = A2aError::from(over_the_wire(err.to_status()));
            assert_eq!(back, err);
        }
    }

    #[test]
    fn a_plain_status_falls_back_to_its_code() {
        let cases = [
            (Status::not_found("gone"), A2aError::task_not_found("")),
            (
                Status::unavailable("down"),
                A2aError::Unavailable("down".into()),
            ),
            (
                Status::invalid_argument("bad"),
                A2aError::InvalidRequest("bad".into()),
            ),
            (
                Status::unauthenticated("who"),
                A2aError::Unauthenticated("who".into()),
            ),
            (
                Status::unimplemented(""),
                A2aError::UnsupportedOperation(
                    "Operation is not implemented or not supported".into(),
                ),
            ),
            (Status::internal("boom"), A2aError::Internal("boom".into())),
        ];
        for (status, want) in cases {
            assert_eq!(A2aError::from_status(&status), want, "{status:?}");
        }
    }

    #[test]
    fn an_error_info_of_another_domain_is_not_trusted() {
        let status = Status::with_error_details(
            Code::FailedPrecondition,
            "quota",
            ErrorDetails::with_error_info("TASK_NOT_FOUND", "example.com", HashMap::new()),
        );
        assert_eq!(
            A2aError::from_status(&status),
            A2aError::UnsupportedOperation("quota".into())
        );
    }
}
