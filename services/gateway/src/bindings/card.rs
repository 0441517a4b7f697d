//! `GET /.well-known/agent-card.json`: the public card with `Cache-Control` and a strong `ETag`;
//! a matching `If-None-Match` gets 304.

use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use crate::service::A2aService;

pub const WELL_KNOWN_PATH: &str = "/.well-known/agent-card.json";

/// Where the rewritten card of each upstream agent is served.
pub const AGENT_CARD_PATH: &str = "/agents/{name}/.well-known/agent-card.json";

pub async fn agent_card(State(svc): State<A2aService>, headers: HeaderMap) -> Response {
    cached(&svc.agent_card(), &headers)
}

/// An upstream agent's card, rewritten to point at this gateway; 404 for an unknown agent or
/// one whose card was never fetched.
pub async fn upstream_agent_card(
    State(svc): State<A2aService>,
    Path(name): Path<String>,
    headers: HeaderMap,
) -> Response {
    match svc.upstream_agent_card(&name) {
        Some(doc) => cached(&doc, &headers),
        None => StatusCode::NOT_FOUND.into_response(),
    }
}

/// The card with `Cache-Control` and `ETag`; a matching `If-None-Match` gets 304.
fn cached(doc: &crate::service::CardDocument, headers: &HeaderMap) -> Response {
    let cache = format!("public, max-age={}", doc.max_age_secs);
    let etag = HeaderValue::from_str(&doc.etag).expect("the etag is hex in quotes");
    let matches = headers
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|t| t.trim().trim_start_matches("W/"))
        .any(|t| t == "*" || t == doc.etag);
    let mut response = if matches {
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
    h.insert(header::ETAG, etag);
    h.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_str(&cache).expect("ascii"),
    );
    response
}
