//! `GET /.well-known/agent-card.json` (and its 0.2.x alias `/.well-known/agent.json`) and the
//! per-agent cards: the card in the shape the request's `A2A-Version` asks for (the strict 1.0
//! card for `1.x`, the combined 0.3 + 1.0 card otherwise), with `Cache-Control`, a strong
//! `ETag` per shape, `Last-Modified` and `Vary: A2A-Version`; a conditional request that
//! matches gets 304. The REST binding answers the extended card the same way ([`conditional`]).

use a2a_types::Dialect;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};

use crate::gateway::Gateway;
use crate::service::{CardDocument, Dialects};

pub use a2a_types::WELL_KNOWN_AGENT_CARD_PATH as WELL_KNOWN_PATH;
/// Where A2A 0.2.x clients look for the card: the 0.3 (combined) card is served there.
pub const LEGACY_WELL_KNOWN_PATH: &str = "/.well-known/agent.json";

/// Where the rewritten card of each upstream agent is served.
pub const AGENT_CARD_PATH: &str = "/agents/{name}/.well-known/agent-card.json";

/// The card shape a request for a well-known card asks for: the strict 1.0 card for
/// `A2A-Version: 1.x` (header, or the `A2A-Version` query parameter), the combined card (0.3
/// and 1.0 members) otherwise. A missing version means 0.3 (spec §3.6), and the combined card
/// is also what a 1.0 client that fetches the card without the header reads without trouble;
/// a version this gateway does not speak gets the combined card too (discovery never fails on
/// the header).
fn requested_shape(headers: &HeaderMap, query: Option<&str>) -> Dialect {
    super::dialect_of(headers, query, Dialects::both(Dialect::V03))
}

/// The card at `/.well-known/agent-card.json`, in the shape the request's `A2A-Version` asks
/// for (`Vary: A2A-Version`); at the 0.2.x path `/.well-known/agent.json`, always the combined
/// card (0.2 and 0.3 clients read it; 1.0 clients do not look there).
pub async fn agent_card(State(gw): State<Gateway>, uri: Uri, headers: HeaderMap) -> Response {
    let doc = gw.cards().public.clone();
    if uri.path() == LEGACY_WELL_KNOWN_PATH {
        return public(&doc, Dialect::V03, &headers, false);
    }
    let shape = requested_shape(&headers, uri.query());
    let mut response = public(&doc, shape, &headers, true);
    // The root card points to the AI Catalog by the draft's `ai-catalog` link relation (AI
    // Catalog draft, *Link Relation Discovery*): a header, so the strict 1.0 card keeps its
    // schema (it has no member for it).
    response
        .headers_mut()
        .append(header::LINK, HeaderValue::from_static(AI_CATALOG_LINK));
    response
}

/// The `Link` header of the root card toward the AI Catalog.
pub const AI_CATALOG_LINK: &str =
    "</.well-known/ai-catalog.json>; rel=\"ai-catalog\"; type=\"application/ai-catalog+json\"";

/// An upstream agent's card, rewritten to point at this gateway, in the requested shape; 404
/// for an unknown agent or one whose card was never fetched.
pub async fn upstream_agent_card(
    State(gw): State<Gateway>,
    Path(name): Path<String>,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    match gw.cards().agents.get(&name).cloned() {
        Some(doc) => {
            let shape = requested_shape(&headers, uri.query());
            public(&doc, shape, &headers, true)
        }
        None => StatusCode::NOT_FOUND.into_response(),
    }
}

fn public(doc: &CardDocument, shape: Dialect, headers: &HeaderMap, varies: bool) -> Response {
    let cache = format!("public, max-age={}", doc.max_age_secs);
    conditional(doc, shape, headers, &cache, varies)
}

/// The card in `shape` with `cache_control`, `ETag` (each shape has its own) and
/// `Last-Modified`, `Vary: A2A-Version` when `varies` (the shape was picked by that header), or
/// 304 when the request's validators match (RFC 9110 §13.2.2: `If-None-Match` when present,
/// else `If-Modified-Since`).
pub fn conditional(
    doc: &CardDocument,
    shape: Dialect,
    headers: &HeaderMap,
    cache_control: &str,
    varies: bool,
) -> Response {
    let served = doc.shape(shape);
    let mut response = if not_modified(&served.etag, doc.last_modified, headers) {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        (
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            )],
            served.json.clone(),
        )
            .into_response()
    };
    let h = response.headers_mut();
    h.insert(
        header::ETAG,
        HeaderValue::from_str(&served.etag).expect("the etag is hex in quotes"),
    );
    h.insert(
        header::LAST_MODIFIED,
        HeaderValue::from_str(&http_date(doc.last_modified)).expect("an HTTP-date is ASCII"),
    );
    if let Ok(v) = HeaderValue::from_str(cache_control) {
        h.insert(header::CACHE_CONTROL, v);
    }
    if varies {
        h.append(header::VARY, HeaderValue::from_static(VARY_VERSION));
    }
    response
}

/// The request header a card's shape depends on.
const VARY_VERSION: &str = "A2A-Version";

fn not_modified(etag: &str, last_modified: DateTime<Utc>, headers: &HeaderMap) -> bool {
    if let Some(matched) = if_none_match(headers, etag) {
        // If-Modified-Since is then ignored.
        return matched;
    }
    // An invalid date is ignored (RFC 9110 §13.1.3).
    headers
        .get(header::IF_MODIFIED_SINCE)
        .and_then(|v| v.to_str().ok())
        .and_then(parse_http_date)
        .is_some_and(|since| last_modified <= since)
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

/// IMF-fixdate: `Sun, 06 Nov 1994 08:49:37 GMT` (what senders must use). Formatted by chrono,
/// not `httpdate`, whose formatter panics past the year 9999.
fn http_date(t: DateTime<Utc>) -> String {
    t.format("%a, %d %b %Y %H:%M:%S GMT").to_string()
}

/// An HTTP-date in any of the three forms a recipient must accept (RFC 9110 §5.6.7): IMF-fixdate
/// and the obsolete RFC 850 and asctime forms.
fn parse_http_date(v: &str) -> Option<DateTime<Utc>> {
    httpdate::parse_http_date(v.trim()).ok().map(DateTime::from)
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
        assert_eq!(parse_http_date("Sunday, 06-Nov-94 08:49:37 GMT"), Some(t));
        assert_eq!(parse_http_date("Sun Nov  6 08:49:37 1994"), Some(t));
        assert_eq!(parse_http_date("yesterday"), None);
    }
}
