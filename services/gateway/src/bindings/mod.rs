//! The wire bindings: thin adapters that decode a request into the canonical type, call
//! [`A2aService`](crate::service::A2aService), and encode the result or the [`A2aError`] in the
//! binding's own format. No binding knows SQL or Redis.

pub mod card;
pub mod catalogue;
mod decode;
pub mod grpc;
mod grpc_v03;
pub mod jsonrpc;
mod jsonrpc_v03;
pub mod panic;
pub mod pipeline;
pub mod rate_headers;
pub mod rest;
mod sse;

use a2a_types::A2aError;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::Response;

use a2a_types::Dialect;

use self::pipeline::Refusal;
use crate::service::{Dialects, RequestContext};

pub const VERSION_HEADER: &str = "a2a-version";
pub const EXTENSIONS_HEADER: &str = "a2a-extensions";
/// SSE reconnection (JSON-RPC and HTTP+JSON): the `id:` of the last event the client has.
pub const LAST_EVENT_ID_HEADER: &str = "last-event-id";
/// The same for gRPC, where there is no SSE: metadata `a2a-last-event-id: <seq>`.
pub const GRPC_LAST_EVENT_ID: &str = "a2a-last-event-id";
/// gRPC response metadata: the sequence number of the stream's first message, when known.
pub const GRPC_FIRST_EVENT_ID: &str = "a2a-first-event-id";
/// W3C Trace Context (HTTP header and gRPC metadata alike).
pub const TRACEPARENT_HEADER: &str = "traceparent";
/// Safe retries of SendMessage (HTTP header and gRPC metadata alike).
pub const IDEMPOTENCY_KEY_HEADER: &str = "idempotency-key";
pub use crate::service::HOP_COUNT_HEADER;
/// The longest `A2A-Hop-Count` value read (a `u32` has at most 10 digits).
const MAX_HOP_COUNT_LEN: usize = 10;
/// The longest `Idempotency-Key` accepted.
const MAX_IDEMPOTENCY_KEY: usize = 255;
pub const JSON: &str = "application/json";
pub const A2A_JSON: &str = "application/a2a+json";
/// The 0.3 spelling, still sent by older clients.
const LEGACY_EXTENSIONS_HEADER: &str = "x-a2a-extensions";

/// The `A2A-Version` a request names: the header, or the `A2A-Version` query parameter.
fn requested_version(headers: &HeaderMap, query: Option<&str>) -> Option<String> {
    headers
        .get(VERSION_HEADER)
        .map(|v| v.to_str().unwrap_or("<invalid>").to_owned())
        .or_else(|| query_param(query, "A2A-Version"))
}

/// The dialect a request speaks, as [`request_context`] will negotiate it, for a binding that
/// must pick its route before the pipeline runs (HTTP+JSON's `/v1/…` paths); a version the
/// pipeline will refuse reads as `dialects.default` here.
pub fn dialect_of(headers: &HeaderMap, query: Option<&str>, dialects: Dialects) -> Dialect {
    crate::service::negotiate_version(requested_version(headers, query).as_deref(), dialects)
        .unwrap_or(dialects.default)
}

/// The longest `Last-Event-ID` (or gRPC `a2a-last-event-id`) accepted: a `u64` has 20 digits.
const MAX_LAST_EVENT_ID: usize = 32;

/// The A2A service parameters of an HTTP request: `A2A-Version` (header, or the `A2A-Version`
/// query parameter) read against the `dialects` the request can speak, `A2A-Extensions`
/// (comma-separated, possibly repeated; a set of at most `edge.max_extensions` URIs in
/// `edge.max_extension_bytes`) and the resume point (`Last-Event-ID`, or `a2a-last-event-id`
/// in gRPC metadata). Every part is capped before it is parsed, and parsed in linear time (the
/// extension set in O(n log n) of a capped n): this runs for anonymous callers.
pub fn request_context(
    headers: &HeaderMap,
    query: Option<&str>,
    dialects: Dialects,
    edge: &crate::limits::EdgeConfig,
) -> Result<RequestContext, A2aError> {
    if let Some(q) = query
        && q.len() > edge.max_query_bytes
    {
        return Err(A2aError::invalid_params(
            "query",
            format!("longer than {} bytes", edge.max_query_bytes),
        ));
    }
    let version = requested_version(headers, query);
    let dialect = crate::service::negotiate_version(version.as_deref(), dialects)?;
    let mut ctx = RequestContext::anonymous();
    ctx.dialect = dialect;
    let values = || {
        headers
            .get_all(EXTENSIONS_HEADER)
            .iter()
            .chain(headers.get_all(LEGACY_EXTENSIONS_HEADER).iter())
    };
    ctx.extensions = extension_set(values, edge, &mut 0)?;
    if let Some(value) = headers
        .get(LAST_EVENT_ID_HEADER)
        .or_else(|| headers.get(GRPC_LAST_EVENT_ID))
    {
        let seq = (value.len() <= MAX_LAST_EVENT_ID)
            .then(|| value.to_str().ok().and_then(|v| v.trim().parse().ok()))
            .flatten();
        ctx.last_event_id = Some(seq.ok_or_else(|| {
            A2aError::invalid_params(
                "Last-Event-ID",
                "must be the sequence number (SSE id) of an event",
            )
        })?);
    }
    if let Some(value) = headers.get(IDEMPOTENCY_KEY_HEADER) {
        ctx.idempotency_key = Some(idempotency_key(value)?);
    }
    if let Some(value) = headers.get(HOP_COUNT_HEADER) {
        ctx.hops = hop_count(value)?;
    }
    // An invalid traceparent is ignored, as W3C Trace Context asks (a new trace starts).
    ctx.traceparent = headers
        .get(TRACEPARENT_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .filter(|v| valid_traceparent(v))
        .map(str::to_owned);
    Ok(ctx)
}

/// The `A2A-Extensions` URIs of `values` (comma separated, blanks trimmed), each once, in the
/// order of their first mention. Refused beyond `edge.max_extension_bytes` (summed before
/// anything is split) or `edge.max_extensions` distinct URIs. De-duplication sorts the URIs'
/// indices, so it costs O(n log n) comparisons; `work` counts the steps (header values, URIs,
/// comparisons) for the linearity property test.
pub(crate) fn extension_set<'a, I: Iterator<Item = &'a HeaderValue>>(
    values: impl Fn() -> I,
    edge: &crate::limits::EdgeConfig,
    work: &mut u64,
) -> Result<Vec<String>, A2aError> {
    let mut total = 0usize;
    for value in values() {
        *work += 1;
        total = total.saturating_add(value.len());
        if total > edge.max_extension_bytes {
            return Err(A2aError::invalid_params(
                "A2A-Extensions",
                format!("longer than {} bytes", edge.max_extension_bytes),
            ));
        }
    }
    if total == 0 {
        return Ok(Vec::new());
    }
    let mut uris: Vec<&str> = Vec::new();
    for value in values() {
        let Ok(value) = value.to_str() else { continue };
        for uri in value.split(',').map(str::trim).filter(|u| !u.is_empty()) {
            *work += 1;
            uris.push(uri);
        }
    }
    let mut order: Vec<usize> = (0..uris.len()).collect();
    // Stable: equal URIs keep the order of their mentions, so the first of a run is the first.
    order.sort_by(|a, b| {
        *work += 1;
        uris[*a].cmp(uris[*b])
    });
    let mut first = vec![false; uris.len()];
    let mut distinct = 0usize;
    let mut previous: Option<&str> = None;
    for i in order {
        *work += 1;
        if previous != Some(uris[i]) {
            first[i] = true;
            distinct += 1;
            previous = Some(uris[i]);
        }
    }
    if distinct > edge.max_extensions {
        return Err(A2aError::invalid_params(
            "A2A-Extensions",
            format!("more than {} distinct extensions", edge.max_extensions),
        ));
    }
    Ok(uris
        .iter()
        .zip(first)
        .filter(|(_, first)| *first)
        .map(|(uri, _)| (*uri).to_owned())
        .collect())
}

/// The value of an `A2A-Hop-Count` header: a decimal count, at most 10 digits.
fn hop_count(value: &HeaderValue) -> Result<u32, A2aError> {
    (value.len() <= MAX_HOP_COUNT_LEN)
        .then(|| value.to_str().ok().and_then(|v| v.trim().parse().ok()))
        .flatten()
        .ok_or_else(|| {
            A2aError::invalid_params("A2A-Hop-Count", "must be a decimal count of gateways")
        })
}

/// The refusal of a request that went through more than `max` gateways: most likely an
/// upstream agent that routes back to this gateway, directly or through others.
pub fn request_loop(hops: u32, max: u32) -> A2aError {
    A2aError::InvalidRequest(format!(
        "request loop: the request already went through {hops} gateways (A2A-Hop-Count), more \
         than the {max} allowed; an upstream agent probably routes back to this gateway, \
         directly or through another gateway"
    ))
}

/// The key of an `Idempotency-Key` header: the draft's Structured Field string (`"..."`), or
/// the bare token many clients send; 1 to 255 visible ASCII characters.
fn idempotency_key(value: &HeaderValue) -> Result<String, A2aError> {
    let invalid = || {
        A2aError::invalid_params(
            "Idempotency-Key",
            format!("must be 1 to {MAX_IDEMPOTENCY_KEY} visible ASCII characters"),
        )
    };
    let raw = value.to_str().map_err(|_| invalid())?.trim();
    let key = raw
        .strip_prefix('"')
        .and_then(|k| k.strip_suffix('"'))
        .unwrap_or(raw);
    if key.is_empty()
        || key.len() > MAX_IDEMPOTENCY_KEY
        || !key.bytes().all(|b| b.is_ascii_graphic())
    {
        return Err(invalid());
    }
    Ok(key.to_owned())
}

/// A request body (JSON-RPC, HTTP+JSON) must be `application/json` or `application/a2a+json` (parameters such as
/// `charset` allowed); a body without a Content-Type is read as JSON.
pub(crate) fn check_content_type(headers: &HeaderMap, body: &[u8]) -> Result<(), A2aError> {
    if body.is_empty() {
        return Ok(());
    }
    let Some(value) = headers.get(header::CONTENT_TYPE) else {
        return Ok(());
    };
    let raw = value.to_str().unwrap_or("<invalid>").trim();
    let essence = raw.split(';').next().unwrap_or_default().trim();
    if essence.eq_ignore_ascii_case(JSON) || essence.eq_ignore_ascii_case(A2A_JSON) {
        return Ok(());
    }
    Err(A2aError::ContentTypeNotSupported {
        media_type: raw.to_owned(),
        agent: "gateway".into(),
    })
}

/// `version-traceid-parentid-flags` in lowercase hex (2-32-16-2), version not `ff`, ids not all
/// zeros; longer values are allowed for future versions only.
fn valid_traceparent(v: &str) -> bool {
    let hex = |s: &str, n: usize| {
        s.len() == n
            && s.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    };
    let nonzero = |s: &str| s.bytes().any(|b| b != b'0');
    let mut parts = v.splitn(5, '-');
    let (Some(version), Some(trace), Some(parent), Some(flags)) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return false;
    };
    let rest_ok = parts.next().is_none() || version != "00";
    hex(version, 2)
        && version != "ff"
        && hex(trace, 32)
        && nonzero(trace)
        && hex(parent, 16)
        && nonzero(parent)
        && hex(flags, 2)
        && rest_ok
}

/// The HTTP error response of a request the pipeline refused: for a caller who failed to
/// authenticate, the error's status (401 or 403, also for JSON-RPC, whose body stays a
/// JSON-RPC error) and `WWW-Authenticate`; for a rate limit, 429 and its headers; otherwise
/// `response` as it is.
pub fn refused(mut response: Response, refusal: Refusal) -> Response {
    let rejection = match refusal {
        Refusal::Unauthorized(rejection) => rejection,
        Refusal::Limited(err) => return rate_headers::on_refusal(response, &err),
        Refusal::Invalid(_) => return response,
    };
    *response.status_mut() =
        StatusCode::from_u16(rejection.error.codes().http).unwrap_or(StatusCode::UNAUTHORIZED);
    if let Some(challenge) = rejection.challenge {
        response
            .headers_mut()
            .insert(header::WWW_AUTHENTICATE, challenge);
    }
    response
}

/// The `A2A-Extensions` response header listing the activated extensions, if any.
pub fn extensions_header(activated: &[String]) -> Option<HeaderValue> {
    if activated.is_empty() {
        return None;
    }
    HeaderValue::from_str(&activated.join(", ")).ok()
}

fn query_param(query: Option<&str>, name: &str) -> Option<String> {
    url::form_urlencoded::parse(query?.as_bytes())
        .find(|(k, _)| k.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idempotency_keys_are_sf_strings_or_tokens() {
        let key = |v: &str| idempotency_key(&HeaderValue::from_str(v).unwrap());
        assert_eq!(key("\"8e03978e-40d5\"").unwrap(), "8e03978e-40d5");
        assert_eq!(key("abc-123").unwrap(), "abc-123");
        for bad in ["", "\"\"", "a b", &"k".repeat(256)] {
            assert!(key(bad).is_err(), "{bad:?}");
        }
    }

    /// A header map of `pairs` (also for the bindings' own tests).
    pub(crate) fn headers(pairs: &[(header::HeaderName, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(k.clone(), HeaderValue::from_str(v).unwrap());
        }
        h
    }

    fn edge() -> crate::limits::EdgeConfig {
        crate::limits::EdgeConfig::default()
    }

    #[test]
    fn extensions_are_a_capped_set_in_first_mention_order() {
        let h = headers(&[
            (
                header::HeaderName::from_static(EXTENSIONS_HEADER),
                "urn:b, urn:a,,urn:b",
            ),
            (
                header::HeaderName::from_static(LEGACY_EXTENSIONS_HEADER),
                "urn:c, urn:a",
            ),
        ]);
        let ctx = request_context(&h, None, Dialects::V1_ONLY, &edge()).unwrap();
        assert_eq!(ctx.extensions, ["urn:b", "urn:a", "urn:c"]);
        // Over the URI cap, and over the byte cap: refused as invalid params.
        let many = (0..33)
            .map(|i| format!("urn:{i}"))
            .collect::<Vec<_>>()
            .join(",");
        let h = headers(&[(header::HeaderName::from_static(EXTENSIONS_HEADER), &many)]);
        let err = request_context(&h, None, Dialects::V1_ONLY, &edge()).unwrap_err();
        assert!(
            matches!(err, A2aError::InvalidParams { ref field, .. } if field == "A2A-Extensions"),
            "{err:?}"
        );
        // 32 distinct (however often repeated) pass.
        let ok = (0..64)
            .map(|i| format!("urn:{}", i % 32))
            .collect::<Vec<_>>()
            .join(",");
        let h = headers(&[(header::HeaderName::from_static(EXTENSIONS_HEADER), &ok)]);
        let ctx = request_context(&h, None, Dialects::V1_ONLY, &edge()).unwrap();
        assert_eq!(ctx.extensions.len(), 32);
        let long = "u".repeat(4097);
        let h = headers(&[(header::HeaderName::from_static(EXTENSIONS_HEADER), &long)]);
        assert!(request_context(&h, None, Dialects::V1_ONLY, &edge()).is_err());
    }

    #[test]
    fn resume_points_and_queries_are_capped() {
        let h = headers(&[(
            header::HeaderName::from_static(LAST_EVENT_ID_HEADER),
            " 42 ",
        )]);
        let ctx = request_context(&h, None, Dialects::V1_ONLY, &edge()).unwrap();
        assert_eq!(ctx.last_event_id, Some(42));
        let long = format!("{}1", " ".repeat(40));
        let h = headers(&[(header::HeaderName::from_static(LAST_EVENT_ID_HEADER), &long)]);
        assert!(request_context(&h, None, Dialects::V1_ONLY, &edge()).is_err());
        let query = format!("a={}", "x".repeat(8192));
        let err = request_context(&HeaderMap::new(), Some(&query), Dialects::V1_ONLY, &edge())
            .unwrap_err();
        assert!(matches!(err, A2aError::InvalidParams { ref field, .. } if field == "query"));
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(32))]
        /// The edge's cost is linear (up to the sort's log factor) in the size of its input:
        /// the steps `extension_set` counts for an input 8 times as large grow at most 16-fold
        /// (a quadratic de-duplication grows 64-fold), whatever the mix of distinct and repeated
        /// URIs. The caps are lifted so the input can grow.
        #[test]
        fn extension_parsing_cost_is_linear(
            n in 256usize..1024,
            distinct_every in 1usize..8,
            width in 3usize..12,
        ) {
            let edge = crate::limits::EdgeConfig {
                max_extensions: usize::MAX,
                max_extension_bytes: usize::MAX,
                ..edge()
            };
            let cost = |n: usize| {
                let value = (0..n)
                    .map(|i| format!("{:0width$}", if i % distinct_every == 0 { i } else { 0 }))
                    .collect::<Vec<_>>()
                    .join(",");
                let value = HeaderValue::from_str(&value).unwrap();
                let mut work = 0u64;
                let set = extension_set(|| std::iter::once(&value), &edge, &mut work).unwrap();
                proptest::prop_assert!(!set.is_empty());
                Ok(work)
            };
            let (small, large) = (cost(n)?, cost(8 * n)?);
            proptest::prop_assert!(
                large <= 16 * small,
                "{n} URIs: {small} steps, {} URIs: {large} steps", 8 * n
            );
        }
    }

    #[test]
    fn content_types() {
        let ok = [
            "application/json",
            "application/a2a+json",
            "Application/JSON; charset=utf-8",
        ];
        for ct in ok {
            assert!(check_content_type(&headers(&[(header::CONTENT_TYPE, ct)]), b"{}").is_ok());
        }
        assert!(check_content_type(&HeaderMap::new(), b"{}").is_ok());
        let text = headers(&[(header::CONTENT_TYPE, "text/plain")]);
        assert!(check_content_type(&text, b"").is_ok(), "no body, no check");
        assert_eq!(
            check_content_type(&text, b"{}"),
            Err(A2aError::ContentTypeNotSupported {
                media_type: "text/plain".into(),
                agent: "gateway".into()
            })
        );
    }

    #[test]
    fn traceparent_validation_follows_w3c() {
        assert!(valid_traceparent(
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        ));
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
        ] {
            assert!(!valid_traceparent(bad), "{bad}");
        }
    }
}
