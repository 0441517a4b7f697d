//! `GET /.well-known/agent-card.json` (and its 0.2.x alias `/.well-known/agent.json`) and the
//! per-agent cards: the card with `Cache-Control`,
//! a strong `ETag` and `Last-Modified`; a conditional request that matches gets 304. The REST
//! binding answers `GET /extendedAgentCard` the same way ([`conditional`]).

use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};

use crate::service::{A2aService, CardDocument};

pub const WELL_KNOWN_PATH: &str = "/.well-known/agent-card.json";
/// Where A2A 0.2.x clients look for the card: the same card is served there.
pub const LEGACY_WELL_KNOWN_PATH: &str = "/.well-known/agent.json";

/// Where the rewritten card of each upstream agent is served.
pub const AGENT_CARD_PATH: &str = "/agents/{name}/.well-known/agent-card.json";

pub async fn agent_card(State(svc): State<A2aService>, headers: HeaderMap) -> Response {
    let doc = svc.agent_card();
    conditional(
        &doc,
        &headers,
        &format!("public, max-age={}", doc.max_age_secs),
    )
}

/// An upstream agent's card, rewritten to point at this gateway; 404 for an unknown agent or
/// one whose card was never fetched.
pub async fn upstream_agent_card(
    State(svc): State<A2aService>,
    Path(name): Path<String>,
    headers: HeaderMap,
) -> Response {
    match svc.upstream_agent_card(&name) {
        Some(doc) => conditional(
            &doc,
            &headers,
            &format!("public, max-age={}", doc.max_age_secs),
        ),
        None => StatusCode::NOT_FOUND.into_response(),
    }
}

/// The card with `cache_control`, `ETag` and `Last-Modified`, or 304 when the request's
/// validators match (RFC 9110 §13.2.2: `If-None-Match` when present, else
/// `If-Modified-Since`).
pub fn conditional(doc: &CardDocument, headers: &HeaderMap, cache_control: &str) -> Response {
    let mut response = if not_modified(doc, headers) {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        (
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            )],
            doc.json.clone(),
        )
            .into_response()
    };
    let h = response.headers_mut();
    h.insert(
        header::ETAG,
        HeaderValue::from_str(&doc.etag).expect("the etag is hex in quotes"),
    );
    h.insert(
        header::LAST_MODIFIED,
        HeaderValue::from_str(&http_date(doc.last_modified)).expect("an HTTP-date is ASCII"),
    );
    if let Ok(v) = HeaderValue::from_str(cache_control) {
        h.insert(header::CACHE_CONTROL, v);
    }
    response
}

fn not_modified(doc: &CardDocument, headers: &HeaderMap) -> bool {
    if let Some(matched) = if_none_match(headers, &doc.etag) {
        // If-Modified-Since is then ignored.
        return matched;
    }
    // An invalid date is ignored (RFC 9110 §13.1.3).
    headers
        .get(header::IF_MODIFIED_SINCE)
        .and_then(|v| v.to_str().ok())
        .and_then(parse_http_date)
        .is_some_and(|since| doc.last_modified <= since)
}

/// Whether the request's `If-None-Match` names `etag` (weak comparison, as If-None-Match
/// asks, `*` matching anything); `None` without the header.
pub fn if_none_match(headers: &HeaderMap, etag: &str) -> Option<bool> {
    let mut values = headers.get_all(header::IF_NONE_MATCH).iter().peekable();
    values.peek()?;
    Some(
        values
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .map(|t| t.trim().trim_start_matches("W/"))
            .any(|t| t == "*" || t == etag),
    )
}

/// IMF-fixdate: `Sun, 06 Nov 1994 08:49:37 GMT`.
fn http_date(t: DateTime<Utc>) -> String {
    t.format("%a, %d %b %Y %H:%M:%S GMT").to_string()
}

/// An IMF-fixdate (the form HTTP senders use; RFC 2822 syntax with `GMT`).
fn parse_http_date(v: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc2822(v.trim())
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn http_dates_round_trip() {
        let t = DateTime::parse_from_rfc3339("1994-11-06T08:49:37Z")
            .unwrap()
            .with_timezone(&Utc);
        assert_eq!(http_date(t), "Sun, 06 Nov 1994 08:49:37 GMT");
        assert_eq!(parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT"), Some(t));
        assert_eq!(parse_http_date("yesterday"), None);
    }
}
