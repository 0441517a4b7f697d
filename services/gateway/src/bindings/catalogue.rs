//! `GET /agents`: the catalogue of the agents behind the gateway (`service::catalogue` says
//! what it holds and who sees what). The request runs the same pipeline as every A2A operation
//! (authentication, rate limits; metrics and traces as method `ListAgents` on the `rest`
//! binding); errors are HTTP+JSON error bodies. The answer carries a strong `ETag` and
//! `Cache-Control: no-cache` (health changes at any time: revalidate, a match costs a 304), and
//! is `private` when auth is on (it depends on the caller).

use a2a_types::Method;
use axum::Extension;
use axum::extract::{ConnectInfo, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};

use super::pipeline::{Binding, Call};
use super::{JSON, refused, rest};
use crate::gateway::Gateway;
use crate::service::A2aService;
use crate::tls::PeerCert;

pub const PATH: &str = "/agents";
/// The AI Catalog (AI Catalog draft, *Well-Known URI*): the same agents as [`PATH`].
pub const AI_CATALOG_PATH: &str = "/.well-known/ai-catalog.json";

pub async fn list_agents(
    State(gw): State<Gateway>,
    peer: Option<Extension<ConnectInfo<std::net::SocketAddr>>>,
    uri: Uri,
    headers: HeaderMap,
    cert: PeerCert,
) -> Response {
    serve(
        gw,
        peer,
        uri,
        headers,
        cert,
        PATH,
        JSON,
        A2aService::agent_catalogue,
    )
    .await
}

/// `GET /.well-known/ai-catalog.json`: as `GET /agents` (same pipeline, visibility, ETag and
/// caching), in the AI Catalog's shape and media type.
pub async fn ai_catalog(
    State(gw): State<Gateway>,
    peer: Option<Extension<ConnectInfo<std::net::SocketAddr>>>,
    uri: Uri,
    headers: HeaderMap,
    cert: PeerCert,
) -> Response {
    let media = crate::service::catalogue::AI_CATALOG_MEDIA_TYPE;
    serve(
        gw,
        peer,
        uri,
        headers,
        cert,
        AI_CATALOG_PATH,
        media,
        A2aService::ai_catalog,
    )
    .await
}

#[allow(clippy::too_many_arguments)]
async fn serve(
    gw: Gateway,
    peer: Option<Extension<ConnectInfo<std::net::SocketAddr>>>,
    uri: Uri,
    headers: HeaderMap,
    cert: PeerCert,
    path: &'static str,
    media: &'static str,
    build: fn(&A2aService, &crate::service::RequestContext) -> crate::service::catalogue::Catalogue,
) -> Response {
    let mut call = Call::start(Binding::Rest);
    call.method(Method::ListAgents);
    call.http("GET", || path.into());
    let peer = peer.map(|Extension(ConnectInfo(addr))| addr.ip());
    let admitted = match call
        .admit(&gw, &headers, uri.query(), peer, cert.0.as_ref())
        .await
    {
        Ok(a) => a,
        Err(r) => {
            let response = rest::error_response(r.error());
            call.failed(r.error());
            return refused(response, r);
        }
    };
    let catalogue = call
        .traced(async { build(gw.service(), &admitted.ctx) })
        .await;
    call.ok();
    let mut response = if super::card::if_none_match(&headers, &catalogue.etag) == Some(true) {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        (
            [(header::CONTENT_TYPE, HeaderValue::from_static(media))],
            catalogue.json,
        )
            .into_response()
    };
    let h = response.headers_mut();
    h.insert(
        header::ETAG,
        HeaderValue::from_str(&catalogue.etag).expect("the etag is hex in quotes"),
    );
    h.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static(if gw.auth_enabled() {
            "private, no-cache"
        } else {
            "no-cache"
        }),
    );
    if let Some(v) = admitted.extensions {
        h.insert(super::EXTENSIONS_HEADER, v);
    }
    if let Some(rate) = &admitted.rate_limit {
        rate.apply(h);
    }
    response
}
