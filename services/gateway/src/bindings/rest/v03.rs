//! The 0.3 HTTP+JSON dialect under `/a2a/rest/v1/…`: bodies and results are ProtoJSON of the
//! 0.3 proto, translated by `a2a_types::v03::rest` to and from the 1.0 requests and results of
//! the one service. Errors are the binding's own (`google.rpc.Status` with the 1.0.1 HTTP
//! status), which 0.3 clients read by status.

use a2a_types::A2aError;
use a2a_types::v1::{
    CancelTaskRequest, DeleteTaskPushNotificationConfigRequest, GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest, GetTaskRequest, ListTaskPushNotificationConfigsRequest,
    SendMessageRequest, SubscribeToTaskRequest, TaskPushNotificationConfig,
};
use a2a_types::v03::rest as v03;
use a2a_types::v03::serve::StreamEnd;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::routes::{Op, Route};
use super::{Reply, decode, encode, errors, json_body, query};
use crate::service::{A2aService, RequestContext, SeqEvent};

/// A 0.3 body rewritten by `rewrite` into the 1.0 request, decoded (errors name the field).
fn body_as<T: DeserializeOwned>(
    body: &[u8],
    rewrite: impl FnOnce(&Value) -> Result<Value, String>,
) -> Result<T, A2aError> {
    let v03: Value = json_body(body)?;
    let v1 = rewrite(&v03).map_err(|reason| A2aError::invalid_params("body", reason))?;
    decode::json(&v1.to_string(), "body")
}

fn json(v: &Value) -> Reply {
    Reply::Json(encode(v))
}

pub(super) async fn call_op(
    svc: &A2aService,
    ctx: &RequestContext,
    route: Route,
    query: Option<&str>,
    body: &[u8],
) -> Result<Reply, A2aError> {
    let Route { tenant, op } = route;
    Ok(match op {
        Op::SendMessage => {
            let mut req: SendMessageRequest = body_as(body, v03::send_request)?;
            req.tenant = tenant;
            json(&v03::send_result(&svc.send_message(ctx, req).await?))
        }
        Op::SendStreamingMessage => {
            let mut req: SendMessageRequest = body_as(body, v03::send_request)?;
            req.tenant = tenant;
            let events = svc.send_streaming_message(ctx, req).await?;
            Reply::Stream(events, Some(StreamEnd::Settled))
        }
        Op::GetTask { id } => {
            let mut req: GetTaskRequest = query::parse(query, query::GET_TASK)?;
            // 0 meant "all" in the 0.3 SDKs.
            req.history_length = req.history_length.filter(|n| *n != 0);
            req.tenant = tenant;
            req.id = id;
            json(&v03::task(&svc.get_task(ctx, req).await?))
        }
        Op::CancelTask { id } => {
            // The 0.3 body (`{name}`) says nothing the path does not.
            let req = CancelTaskRequest {
                tenant,
                id,
                ..Default::default()
            };
            json(&v03::task(&svc.cancel_task(ctx, req).await?))
        }
        Op::SubscribeToTask { id } => {
            let req = SubscribeToTaskRequest { tenant, id };
            let events = svc.subscribe_to_task(ctx, req).await?;
            Reply::Stream(events, Some(StreamEnd::Terminal))
        }
        Op::CreatePushConfig { task_id } => {
            let mut cfg: TaskPushNotificationConfig =
                body_as(body, |b| v03::push_config_request(b, &task_id))?;
            cfg.tenant = tenant;
            json(&v03::push_config(&svc.create_push_config(ctx, cfg).await?))
        }
        Op::GetPushConfig { task_id, id } => {
            let req = GetTaskPushNotificationConfigRequest {
                tenant,
                task_id,
                id,
            };
            json(&v03::push_config(&svc.get_push_config(ctx, req).await?))
        }
        Op::ListPushConfigs { task_id } => {
            let mut req: ListTaskPushNotificationConfigsRequest =
                query::parse(query, query::LIST_PUSH_CONFIGS)?;
            req.tenant = tenant;
            req.task_id = task_id;
            let page = svc.list_push_configs(ctx, req).await?;
            let configs: Vec<Value> = page.configs.iter().map(v03::push_config).collect();
            let mut out = json!({ "configs": configs });
            if !page.next_page_token.is_empty() {
                out["nextPageToken"] = json!(page.next_page_token);
            }
            json(&out)
        }
        Op::DeletePushConfig { task_id, id } => {
            let req = DeleteTaskPushNotificationConfigRequest {
                tenant,
                task_id,
                id,
            };
            svc.delete_push_config(ctx, req).await?;
            json(&json!({}))
        }
        Op::GetExtendedAgentCard => {
            let req = GetExtendedAgentCardRequest { tenant };
            Reply::Card(svc.extended_agent_card(ctx, req).await?)
        }
        Op::ListTasks => {
            return Err(A2aError::MethodNotFound {
                method: "GET /v1/tasks".into(),
            });
        }
    })
}

/// The `data:` of a 0.3 SSE event: the 0.3 StreamResponse, or the error body (`event: error`).
pub(super) fn sse_data(item: Result<&SeqEvent, &A2aError>, end: StreamEnd) -> String {
    match item {
        Ok(ev) => v03::stream_event(&ev.event, end).to_string(),
        Err(err) => errors::body(err).to_string(),
    }
}
