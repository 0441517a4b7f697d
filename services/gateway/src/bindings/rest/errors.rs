//! REST errors: `google.rpc.Status` JSON (AIP-193), always `application/json`:
//! `{"error":{"code":<HTTP status>,"status":"<gRPC code name>","message":"…","details":[…]}}`
//! with the `google.rpc.ErrorInfo` of every error and a `google.rpc.BadRequest` for invalid
//! params; the HTTP status is the 1.0.1 table's; retryable errors add `Retry-After: 1`, a rate
//! limit its own `Retry-After` and `RateLimit` headers.

use a2a_types::{A2aError, ErrorInfo, grpc_status_name};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

/// The ErrorInfo reason of a known path asked with the wrong verb (HTTP 405).
pub const METHOD_NOT_ALLOWED: &str = "METHOD_NOT_ALLOWED";

/// The error body of `err` (also the `data` of an SSE `event: error`).
pub fn body(err: &A2aError) -> Value {
    let codes = err.codes();
    let mut details = vec![err.error_info().to_json()];
    if let A2aError::InvalidParams { field, reason } = err {
        details.push(json!({
            "@type": "type.googleapis.com/google.rpc.BadRequest",
            "fieldViolations": [{"field": field, "description": reason}],
        }));
    }
    status_body(
        codes.http,
        grpc_status_name(codes.grpc),
        &err.to_string(),
        details,
    )
}

/// The HTTP response for `err`.
pub fn response(err: &A2aError) -> Response {
    let status =
        StatusCode::from_u16(err.codes().http).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut resp = json_error(status, &body(err));
    if err.is_retryable() {
        resp.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    }
    // A rate limit says how long to wait, and which policy refused.
    crate::bindings::rate_headers::on_refusal(resp, err)
}

/// 415 for a request body that is not JSON (ContentTypeNotSupported at the transport level,
/// where HTTP asks for 415; a part's media type keeps the 1.0.1 table's 400). The body is the
/// error's usual body with `code` 415.
pub fn unsupported_media_type(err: &A2aError) -> Response {
    let status = StatusCode::UNSUPPORTED_MEDIA_TYPE;
    let mut body = body(err);
    body["error"]["code"] = status.as_u16().into();
    json_error(status, &body)
}

/// 405 for a known path asked with `method`, with `Allow` listing the verbs it serves. Reported
/// like MethodNotFound (gRPC `UNIMPLEMENTED`) with its own reason, METHOD_NOT_ALLOWED.
pub fn method_not_allowed(method: &Method, path: &str, allowed: &[Method]) -> Response {
    let allow = allowed
        .iter()
        .map(Method::as_str)
        .collect::<Vec<_>>()
        .join(", ");
    let err = A2aError::MethodNotFound {
        method: format!("{method} {path}"),
    };
    let mut info: ErrorInfo = err.error_info();
    info.reason = METHOD_NOT_ALLOWED;
    info.metadata.insert("allow".to_owned(), allow.clone());
    let status = StatusCode::METHOD_NOT_ALLOWED;
    let body = status_body(
        status.as_u16(),
        grpc_status_name(err.codes().grpc),
        &format!("method {method} is not allowed on {path}; allowed: {allow}"),
        vec![info.to_json()],
    );
    let mut resp = json_error(status, &body);
    if let Ok(v) = HeaderValue::from_str(&allow) {
        resp.headers_mut().insert(header::ALLOW, v);
    }
    resp
}

fn status_body(code: u16, status: &str, message: &str, details: Vec<Value>) -> Value {
    json!({"error": {"code": code, "status": status, "message": message, "details": details}})
}

fn json_error(status: StatusCode, body: &Value) -> Response {
    (
        status,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        body.to_string(),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_shape_with_error_info_and_bad_request() {
        let b = body(&A2aError::invalid_params("pageSize", "must be positive"));
        assert_eq!(
            b,
            json!({"error": {
                "code": 400,
                "status": "INVALID_ARGUMENT",
                "message": "invalid params: pageSize: must be positive",
                "details": [
                    {"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "INVALID_PARAMS",
                     "domain": "a2a-protocol.org", "metadata": {"field": "pageSize"}},
                    {"@type": "type.googleapis.com/google.rpc.BadRequest",
                     "fieldViolations": [{"field": "pageSize", "description": "must be positive"}]},
                ],
            }})
        );
        let r = response(&A2aError::Unavailable("x".into()));
        assert_eq!(r.status(), 503);
        assert_eq!(r.headers()[header::RETRY_AFTER], "1");
        assert_eq!(r.headers()[header::CONTENT_TYPE], "application/json");
        let r = method_not_allowed(&Method::PUT, "/a2a/rest/tasks", &[Method::GET]);
        assert_eq!(r.status(), 405);
        assert_eq!(r.headers()[header::ALLOW], "GET");
    }
}
