//! HTTP+JSON (REST) binding of A2A 1.0 under `/a2a/rest`, each path also under
//! `/a2a/rest/{tenant}/…` (the segment fills the request's `tenant`). Bodies and results are the
//! ProtoJSON of the canonical types; success is always HTTP 200; errors are `google.rpc.Status`
//! JSON with the 1.0.1 HTTP status (see [`errors`]); the streaming operations answer with SSE
//! whose `data:` is a bare StreamResponse and whose failure is an `event: error` carrying the
//! error body.
//!
//! The 0.3 dialect is served beside it ([`v03`]): `/a2a/rest/v1/…` paths, the 0.3 interface's
//! URL being `/a2a/rest`. Read as 1.0 such a path names tenant `v1`; `A2A-Version` decides
//! (1.x: 1.0, 0.3 or none: 0.3), and a 0.3 request on a path 0.3 lacks is 404.
//!
//! Order of checks: path (404/405), body size (413), `A2A-Version`, `A2A-Extensions`,
//! `Content-Type`, then decoding and the service call.

pub(crate) mod errors;
mod query;
mod routes;
mod v03;

use a2a_types::v1::{
    CancelTaskRequest, DeleteTaskPushNotificationConfigRequest, GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest, GetTaskRequest, ListTaskPushNotificationConfigsRequest,
    ListTasksRequest, SendMessageRequest, SubscribeToTaskRequest, TaskPushNotificationConfig,
};
use a2a_types::v03::serve::StreamEnd;
use a2a_types::{A2aError, Dialect};
use std::sync::Arc;

use axum::Extension;
use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{ConnectInfo, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use serde::Serialize;
use serde::de::DeserializeOwned;

use self::routes::{NoRoute, Op, Route};
use super::pipeline::{Binding, Call};
use super::{check_content_type, decode, refused, sse};
use crate::gateway::Gateway;
use crate::service::{A2aService, CardDocument, Dialects, EventStream, RequestContext, SeqEvent};
use crate::tls::PeerCert;

pub const PREFIX: &str = "/a2a/rest";

use super::{A2A_JSON, JSON};

/// The routes of the binding; every path under [`PREFIX`] reaches one handler, which matches the
/// path itself (see [`routes`]).
pub fn routes() -> Router<Gateway> {
    Router::new()
        .route(PREFIX, any(handle))
        .route(&format!("{PREFIX}/"), any(handle))
        .route(&format!("{PREFIX}/{{*path}}"), any(handle))
}

enum Reply {
    Json(Vec<u8>),
    /// Events as 1.0 StreamResponses, or (with where the stream ends, for `final`) as 0.3 ones.
    Stream(EventStream, Option<StreamEnd>),
    /// The extended card, answered with its validators (ETag, Last-Modified) like the public
    /// card, and `private`: it is for the caller who authenticated.
    Card(Arc<CardDocument>),
}

async fn handle(
    State(gw): State<Gateway>,
    peer: Option<Extension<ConnectInfo<std::net::SocketAddr>>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    cert: PeerCert,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let mut call = Call::start(Binding::Rest);
    // A `/v1/…` path has a 0.3 reading: without a version header it is 0.3.
    let v03_route = routes::resolve_v03(&method, PREFIX, uri.path());
    let family = if v03_route.is_some() {
        Dialect::V03
    } else {
        Dialect::V1
    };
    let dialects = Dialects::both(family);
    call.dialects(dialects);
    let dialect = super::dialect_of(&headers, uri.query(), dialects);
    let resolved = match (dialect, v03_route) {
        (Dialect::V1, _) => routes::resolve(&method, PREFIX, uri.path()),
        (Dialect::V03, Some(route)) => route,
        (Dialect::V03, None) => Err(NoRoute::NotFound),
    };
    let route = match resolved {
        Ok(route) => route,
        Err(NoRoute::NotFound) => {
            let err = A2aError::MethodNotFound {
                method: format!("{method} {}", uri.path()),
            };
            return failed(call, &err);
        }
        Err(NoRoute::MethodNotAllowed(allowed)) => {
            call.finish_reason(errors::METHOD_NOT_ALLOWED, 405);
            return errors::method_not_allowed(&method, uri.path(), allowed);
        }
    };
    call.method(route.op.method());
    call.http(method.as_str(), || {
        let tenant = if route.tenant.is_empty() {
            ""
        } else {
            "/{tenant}"
        };
        let v1 = if dialect == Dialect::V03 { "/v1" } else { "" };
        let route = match (dialect, &route.op) {
            (Dialect::V03, Op::GetExtendedAgentCard) => "/card",
            (_, op) => op.route(),
        };
        format!("{PREFIX}{tenant}{v1}{route}").into()
    });
    let body = match body {
        Ok(b) => b,
        Err(rejection) if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE => {
            let err = A2aError::PayloadTooLarge {
                limit: gw.max_body_bytes(),
            };
            return failed(call, &err);
        }
        Err(rejection) => {
            return failed(call, &A2aError::InvalidRequest(rejection.body_text()));
        }
    };
    let peer = peer.map(|Extension(ConnectInfo(addr))| addr.ip());
    let admitted = match call
        .admit(&gw, &headers, uri.query(), peer, cert.0.as_ref())
        .await
    {
        Ok(a) => a,
        Err(r) => {
            let response = errors::response(r.error());
            call.failed(r.error());
            return refused(response, r);
        }
    };
    // A body that is not JSON is refused at the transport level: 415, not the 1.0.1 table's
    // 400 (which is about a part's media type, see `errors::unsupported_media_type`).
    let svc = gw.service();
    let outcome = match check_content_type(&headers, &body) {
        Ok(()) => match admitted.ctx.dialect {
            Dialect::V1 => {
                call.traced(call_op(svc, &admitted.ctx, route, uri.query(), &body))
                    .await
            }
            Dialect::V03 => {
                call.traced(v03::call_op(svc, &admitted.ctx, route, uri.query(), &body))
                    .await
            }
        },
        Err(err) => {
            call.status(415);
            call.failed(&err);
            let mut response = errors::unsupported_media_type(&err);
            if let Some(v) = admitted.extensions {
                response.headers_mut().insert(super::EXTENSIONS_HEADER, v);
            }
            if let Some(rate) = &admitted.rate_limit {
                rate.apply(response.headers_mut());
            }
            return response;
        }
    };
    let mut response = match outcome {
        Ok(Reply::Json(bytes)) => {
            call.ok_sized(bytes.len());
            let media = if accepts_a2a_json(&headers) {
                A2A_JSON
            } else {
                JSON
            };
            (
                [(header::CONTENT_TYPE, HeaderValue::from_static(media))],
                bytes,
            )
                .into_response()
        }
        Ok(Reply::Stream(events, None)) => {
            sse::respond(call.stream(events), gw.keep_alive(), sse_data)
        }
        Ok(Reply::Stream(events, Some(end))) => {
            sse::respond(call.stream(events), gw.keep_alive(), move |item| {
                v03::sse_data(item, end)
            })
        }
        Ok(Reply::Card(doc)) => {
            call.ok();
            let cache = format!("private, max-age={}", doc.max_age_secs);
            // The 1.0 path serves the strict 1.0 card, `/v1/card` the 0.3 (combined) one;
            // which path reads as which depends on `A2A-Version`.
            let shape = admitted.ctx.dialect;
            let mut response = super::card::conditional(&doc, shape, &headers, &cache, true);
            if response.status() == StatusCode::OK && accepts_a2a_json(&headers) {
                response
                    .headers_mut()
                    .insert(header::CONTENT_TYPE, HeaderValue::from_static(A2A_JSON));
            }
            response
        }
        Err(err) => failed(call, &err),
    };
    if let Some(v) = admitted.extensions {
        response.headers_mut().insert(super::EXTENSIONS_HEADER, v);
    }
    if let Some(rate) = &admitted.rate_limit {
        rate.apply(response.headers_mut());
    }
    response
}

/// The HTTP+JSON error response of `err` (`google.rpc.Status` JSON), for the gateway's own
/// HTTP endpoints (`GET /agents`).
pub fn error_response(err: &A2aError) -> Response {
    errors::response(err)
}

/// The error response of a call, with its outcome recorded.
fn failed(call: Call, err: &A2aError) -> Response {
    call.failed(err);
    errors::response(err)
}

/// Decodes the request of `route`, calls the service, encodes the result.
async fn call_op(
    svc: &A2aService,
    ctx: &RequestContext,
    route: Route,
    query: Option<&str>,
    body: &[u8],
) -> Result<Reply, A2aError> {
    let Route { tenant, op } = route;
    // The path's tenant wins over one in the body.
    let tenant_or = |body_tenant: String| {
        if tenant.is_empty() {
            body_tenant
        } else {
            tenant.clone()
        }
    };
    Ok(match op {
        Op::SendMessage => {
            let mut req: SendMessageRequest = json_body(body)?;
            req.tenant = tenant_or(req.tenant);
            json(&svc.send_message(ctx, req).await?)
        }
        Op::SendStreamingMessage => {
            let mut req: SendMessageRequest = json_body(body)?;
            req.tenant = tenant_or(req.tenant);
            Reply::Stream(svc.send_streaming_message(ctx, req).await?, None)
        }
        Op::GetTask { id } => {
            let mut req: GetTaskRequest = query::parse(query, query::GET_TASK)?;
            req.tenant = tenant_or(req.tenant);
            req.id = id;
            json(&svc.get_task(ctx, req).await?)
        }
        Op::ListTasks => {
            let mut req: ListTasksRequest = query::parse(query, query::LIST_TASKS)?;
            req.tenant = tenant_or(req.tenant);
            json(&svc.list_tasks(ctx, req).await?)
        }
        Op::CancelTask { id } => {
            let mut req: CancelTaskRequest = json_body(body)?;
            req.tenant = tenant_or(req.tenant);
            req.id = id;
            json(&svc.cancel_task(ctx, req).await?)
        }
        Op::SubscribeToTask { id } => {
            let req = SubscribeToTaskRequest {
                tenant: tenant_or(String::new()),
                id,
            };
            Reply::Stream(svc.subscribe_to_task(ctx, req).await?, None)
        }
        Op::CreatePushConfig { task_id } => {
            let mut cfg: TaskPushNotificationConfig = json_body(body)?;
            cfg.tenant = tenant_or(cfg.tenant);
            cfg.task_id = task_id;
            json(&svc.create_push_config(ctx, cfg).await?)
        }
        Op::GetPushConfig { task_id, id } => {
            let req = GetTaskPushNotificationConfigRequest {
                tenant: tenant_or(String::new()),
                task_id,
                id,
            };
            json(&svc.get_push_config(ctx, req).await?)
        }
        Op::ListPushConfigs { task_id } => {
            let mut req: ListTaskPushNotificationConfigsRequest =
                query::parse(query, query::LIST_PUSH_CONFIGS)?;
            req.tenant = tenant_or(req.tenant);
            req.task_id = task_id;
            json(&svc.list_push_configs(ctx, req).await?)
        }
        Op::DeletePushConfig { task_id, id } => {
            let req = DeleteTaskPushNotificationConfigRequest {
                tenant: tenant_or(String::new()),
                task_id,
                id,
            };
            svc.delete_push_config(ctx, req).await?;
            json(&serde_json::json!({}))
        }
        Op::GetExtendedAgentCard => {
            let req = GetExtendedAgentCardRequest {
                tenant: tenant_or(String::new()),
            };
            Reply::Card(svc.extended_agent_card(ctx, req).await?)
        }
    })
}

/// The binding's decoders, callable without a server: the fuzz targets and the
/// binding-equivalence tests go through these, not through copies.
#[doc(hidden)]
pub mod fuzzing {
    pub use super::query::{GET_TASK, Kind, LIST_PUSH_CONFIGS, LIST_TASKS, parse as query};
    pub use super::routes::{NoRoute, Op, Route, resolve};

    /// A request body as the binding decodes it.
    pub fn body<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, a2a_types::A2aError> {
        super::json_body(body)
    }
}

/// A JSON body; an empty body and `null` stand for `{}` (the service then reports any missing
/// required field by name).
fn json_body<T: DeserializeOwned>(body: &[u8]) -> Result<T, A2aError> {
    let text = std::str::from_utf8(body)
        .map_err(|e| A2aError::Parse(format!("the body is not UTF-8: {e}")))?;
    let text = match text.trim() {
        "" | "null" => "{}",
        _ => text,
    };
    decode::json(text, "body")
}

/// The `data:` of an SSE event: the bare StreamResponse, or the error body (`event: error`).
fn sse_data(item: Result<&SeqEvent, &A2aError>) -> String {
    match item {
        Ok(ev) => String::from_utf8(encode(&ev.event)).expect("serde_json writes UTF-8"),
        Err(err) => errors::body(err).to_string(),
    }
}

fn json<T: Serialize>(result: &T) -> Reply {
    Reply::Json(encode(result))
}

fn encode<T: Serialize>(result: &T) -> Vec<u8> {
    // A NaN stored before such numbers were refused prints as null: the task stays readable.
    serde_json::to_vec(result)
        .or_else(|_| a2a_types::wkt::lossy(|| serde_json::to_vec(result)))
        .unwrap_or_else(|e| {
            tracing::error!(error = %e, "cannot serialise a result");
            errors::body(&A2aError::Internal("cannot serialise the result".into()))
                .to_string()
                .into_bytes()
        })
}

/// Whether `Accept` asks for `application/a2a+json` (with a quality at least that of
/// `application/json`, if that is listed too).
fn accepts_a2a_json(headers: &HeaderMap) -> bool {
    let (mut a2a, mut json) = (None::<f32>, None::<f32>);
    for value in headers.get_all(header::ACCEPT) {
        let Ok(value) = value.to_str() else { continue };
        for range in value.split(',') {
            let mut parts = range.split(';');
            let essence = parts.next().unwrap_or_default().trim();
            let q = parts
                .find_map(|p| p.trim().strip_prefix("q="))
                .and_then(|q| q.trim().parse::<f32>().ok())
                .unwrap_or(1.0);
            let slot = if essence.eq_ignore_ascii_case(A2A_JSON) {
                &mut a2a
            } else if essence.eq_ignore_ascii_case(JSON) {
                &mut json
            } else {
                continue;
            };
            *slot = Some(slot.map_or(q, |old| old.max(q)));
        }
    }
    matches!(a2a, Some(q) if q > 0.0 && q >= json.unwrap_or(0.0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bindings::tests::headers;

    #[test]
    fn accept_negotiation() {
        let cases = [
            (vec![], false),
            (vec!["*/*"], false),
            (vec!["application/json"], false),
            (vec!["application/a2a+json"], true),
            (vec!["application/a2a+json;q=0"], false),
            (vec!["application/json, application/a2a+json"], true),
            (
                vec!["application/json;q=1, application/a2a+json;q=0.5"],
                false,
            ),
            (vec!["text/html", "application/a2a+json"], true),
        ];
        for (values, want) in cases {
            let h = headers(
                &values
                    .iter()
                    .map(|v| (header::ACCEPT, *v))
                    .collect::<Vec<_>>(),
            );
            assert_eq!(accepts_a2a_json(&h), want, "{values:?}");
        }
    }

    #[tokio::test]
    async fn a_stream_error_is_an_error_event_with_the_rest_body() {
        use a2a_types::v1::{StreamResponse, Task, stream_response::Payload};
        use futures::StreamExt;
        use http_body_util::BodyExt;

        let task = Task {
            id: "t1".into(),
            ..Default::default()
        };
        let items = vec![
            Ok(SeqEvent {
                seq: Some(1),
                event: StreamResponse {
                    payload: Some(Payload::Task(task)),
                },
            }),
            Err(A2aError::Unavailable("the bus went away".into())),
        ];
        let events: EventStream = futures::stream::iter(items).boxed();
        let resp = sse::respond(events, std::time::Duration::from_secs(60), sse_data);
        assert_eq!(resp.headers()[header::CONTENT_TYPE], "text/event-stream");
        let bytes = resp.into_body().collect().await.unwrap().to_bytes();
        let text = std::str::from_utf8(&bytes).unwrap();
        let blocks: Vec<&str> = text.split("\n\n").filter(|b| !b.is_empty()).collect();
        assert_eq!(blocks.len(), 2, "{text}");
        assert!(blocks[0].contains("id: 1"), "{text}");
        assert!(
            blocks[0].contains(r#"data: {"task":{"id":"t1"}}"#),
            "{text}"
        );
        assert!(blocks[1].contains("event: error"), "{text}");
        let data = blocks[1]
            .lines()
            .find_map(|l| l.strip_prefix("data: "))
            .unwrap();
        let body: serde_json::Value = serde_json::from_str(data).unwrap();
        assert_eq!(body["error"]["code"], 503);
        assert_eq!(body["error"]["status"], "UNAVAILABLE");
        assert_eq!(body["error"]["details"][0]["reason"], "UNAVAILABLE");
    }

    #[test]
    fn bodies() {
        let req: CancelTaskRequest = json_body(b"").unwrap();
        assert_eq!(req, CancelTaskRequest::default());
        let req: CancelTaskRequest = json_body(b" null ").unwrap();
        assert_eq!(req, CancelTaskRequest::default());
        assert!(matches!(
            json_body::<CancelTaskRequest>(b"{"),
            Err(A2aError::Parse(_))
        ));
        assert!(matches!(
            json_body::<CancelTaskRequest>(&[0xff, 0xfe]),
            Err(A2aError::Parse(_))
        ));
    }
}
