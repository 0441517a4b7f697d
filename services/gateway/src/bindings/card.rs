//! `GET /.well-known/agent-card.json`: the public card with `Cache-Control` and a strong `ETag`;
//! a matching `If-None-Match` gets 304.

use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use crate::service::A2aService;

pub const WELL_KNOWN_PATH: &str = "/.well-known/agent-card.json";

pub async fn agent_card(State(svc): State<A2aService>, headers: HeaderMap) -> Response {
    let doc = svc.agent_card();
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
