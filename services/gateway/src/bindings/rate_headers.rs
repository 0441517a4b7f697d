//! The rate-limit headers of the HTTP bindings (draft-ietf-httpapi-ratelimit-headers, the
//! Structured Fields form): `RateLimit-Policy: "principal";q=40;w=8` names each policy that
//! applied (quota `q` units, refilled in `w` seconds) and `RateLimit: "principal";r=35;t=1`
//! what is left of it (`r` units, full again in `t` seconds). A refusal adds `Retry-After`.

use a2a_types::A2aError;
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::response::Response;

use crate::limits::Allowance;

pub const RATELIMIT: HeaderName = HeaderName::from_static("ratelimit");
pub const RATELIMIT_POLICY: HeaderName = HeaderName::from_static("ratelimit-policy");

/// The headers of a request the limits let through.
#[derive(Debug, Clone)]
pub struct RateLimitHeaders {
    pub policy: HeaderValue,
    pub limit: HeaderValue,
}

impl RateLimitHeaders {
    /// The headers for the checks a request passed (none: no header). Per request only the
    /// `RateLimit` items are written; the policies' items were made with their scopes.
    pub fn of<'a>(allowances: impl IntoIterator<Item = &'a Allowance>) -> Option<Self> {
        use std::fmt::Write;
        let mut iter = allowances.into_iter();
        let first = iter.next()?;
        let item = |out: &mut String, a: &Allowance| {
            let p = &a.policy;
            let reset = p.reset_secs(a.remaining);
            let _ = write!(out, "\"{}\";r={};t={reset}", p.scope, a.remaining);
        };
        let mut limit = String::with_capacity(64);
        item(&mut limit, first);
        let mut policy = first.policy_item.clone();
        for a in iter {
            limit.push_str(", ");
            item(&mut limit, a);
            let joined = [policy.as_bytes(), b", ", a.policy_item.as_bytes()].concat();
            policy = HeaderValue::from_bytes(&joined).ok()?;
        }
        Some(Self {
            policy,
            limit: HeaderValue::from_str(&limit).ok()?,
        })
    }

    pub fn apply(&self, headers: &mut HeaderMap) {
        headers.insert(RATELIMIT_POLICY, self.policy.clone());
        headers.insert(RATELIMIT, self.limit.clone());
    }
}

/// For a rate-limit refusal: HTTP 429 (also for JSON-RPC, whose body stays a JSON-RPC error),
/// `Retry-After` in whole seconds (at least 1) and the policy that refused; any other error's
/// response is returned as it is.
pub fn on_refusal(mut response: Response, err: &A2aError) -> Response {
    let A2aError::RateLimited {
        scope,
        limit,
        window_secs,
        retry_after_ms,
    } = err
    else {
        return response;
    };
    let retry_secs = retry_after_ms.div_ceil(1000).max(1);
    *response.status_mut() = StatusCode::TOO_MANY_REQUESTS;
    let headers = response.headers_mut();
    headers.insert(header::RETRY_AFTER, HeaderValue::from(retry_secs));
    let values = (
        HeaderValue::from_str(&format!("\"{scope}\";q={limit};w={window_secs}")),
        HeaderValue::from_str(&format!("\"{scope}\";r=0;t={retry_secs}")),
    );
    if let (Ok(policy), Ok(left)) = values {
        headers.insert(RATELIMIT_POLICY, policy);
        headers.insert(RATELIMIT, left);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limits::Policy;
    use axum::response::IntoResponse;

    #[test]
    fn success_lists_every_policy_that_applied() {
        let ip = Policy {
            scope: "ip",
            burst: 100,
            rate: 50.0,
        };
        let principal = Policy {
            scope: "principal",
            burst: 40,
            rate: 5.0,
        };
        let h = RateLimitHeaders::of(&[
            Allowance {
                policy: ip,
                remaining: 99,
                policy_item: HeaderValue::from_static(r#""ip";q=100;w=2"#),
            },
            Allowance {
                policy: principal,
                remaining: 35,
                policy_item: HeaderValue::from_static(r#""principal";q=40;w=8"#),
            },
        ])
        .unwrap();
        assert_eq!(h.policy, r#""ip";q=100;w=2, "principal";q=40;w=8"#);
        assert_eq!(h.limit, r#""ip";r=99;t=1, "principal";r=35;t=1"#);
        assert!(RateLimitHeaders::of(&[]).is_none());
    }

    #[test]
    fn a_refusal_is_429_with_retry_after() {
        let err = A2aError::RateLimited {
            scope: "ip".into(),
            limit: 10,
            window_secs: 1,
            retry_after_ms: 1200,
        };
        let r = on_refusal(().into_response(), &err);
        assert_eq!(r.status(), 429);
        assert_eq!(r.headers()[header::RETRY_AFTER], "2");
        assert_eq!(r.headers()[RATELIMIT_POLICY], r#""ip";q=10;w=1"#);
        assert_eq!(r.headers()[RATELIMIT], r#""ip";r=0;t=2"#);
        let other = on_refusal(().into_response(), &A2aError::task_not_found("t"));
        assert_eq!(other.status(), 200);
    }
}
