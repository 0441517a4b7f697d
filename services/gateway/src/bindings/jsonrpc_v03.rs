//! The 0.3 dialect of the JSON-RPC binding, on the same endpoint: the slash-named 0.3 methods
//! (`message/send`, `tasks/get`, ...) decoded through `a2a_types::v03::serve` into the 1.0
//! requests of the one service, and its results encoded back in the 0.3 shapes. Errors keep
//! the A2A codes (-32001.. are the same numbers in 0.3) with a 0.3 `data`: one object (the
//! ErrorInfo's reason, domain and metadata; the field of an invalid param), not 1.0's array.

use a2a_types::v1::{
    CancelTaskRequest, DeleteTaskPushNotificationConfigRequest, GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest, GetTaskRequest, ListTaskPushNotificationConfigsRequest,
    SendMessageRequest, SubscribeToTaskRequest, TaskPushNotificationConfig,
};
use a2a_types::v03::method;
use a2a_types::v03::serve::{self as v03, StreamEnd};
use a2a_types::{A2aError, Dialect, Method};
use serde::de::DeserializeOwned;
use serde_json::Value;
use serde_json::value::RawValue;

use super::decode;
use super::jsonrpc::{Outcome, success_body};
use crate::service::{A2aService, RequestContext};

/// The 1.0 method a 0.3 method is (the metrics and span label), or `None` for a name 0.3 lacks.
pub fn method_label(name: &str) -> Option<Method> {
    Some(match name {
        method::SEND => Method::SendMessage,
        method::STREAM => Method::SendStreamingMessage,
        method::GET => Method::GetTask,
        method::CANCEL => Method::CancelTask,
        method::RESUBSCRIBE => Method::SubscribeToTask,
        method::PUSH_SET => Method::CreateTaskPushNotificationConfig,
        method::PUSH_GET => Method::GetTaskPushNotificationConfig,
        method::PUSH_LIST => Method::ListTaskPushNotificationConfigs,
        method::PUSH_DELETE => Method::DeleteTaskPushNotificationConfig,
        method::EXTENDED_CARD => Method::GetExtendedAgentCard,
        _ => return None,
    })
}

/// The dialect a method name belongs to: 0.3 names have a slash, 1.0 names are PascalCase.
pub fn dialect_of(method: &str) -> Dialect {
    if method.contains('/') {
        Dialect::V03
    } else {
        Dialect::V1
    }
}

/// The params as a JSON value (`null` when absent).
fn value(raw: Option<&RawValue>) -> Result<Value, A2aError> {
    match raw {
        None => Ok(Value::Null),
        Some(raw) => decode::json(raw.get(), "params"),
    }
}

/// Rewrites the 0.3 params with `rewrite`, then decodes the 1.0 request (errors name the field).
fn params<T: DeserializeOwned>(
    raw: Option<&RawValue>,
    rewrite: fn(&Value) -> Result<Value, String>,
) -> Result<T, A2aError> {
    let v03 = value(raw)?;
    let v1 = rewrite(&v03).map_err(|reason| A2aError::invalid_params("params", reason))?;
    decode::json(&v1.to_string(), "params")
}

fn json(id: &Value, result: &Value) -> Outcome {
    Outcome::Json(success_body(id, result))
}

pub async fn dispatch(
    svc: &A2aService,
    ctx: &RequestContext,
    id: &Value,
    name: &str,
    raw: Option<&RawValue>,
) -> Result<Outcome, A2aError> {
    Ok(match name {
        method::SEND => {
            let req: SendMessageRequest = params(raw, v03::send_request)?;
            json(id, &v03::send_result(&svc.send_message(ctx, req).await?))
        }
        method::STREAM => {
            let req: SendMessageRequest = params(raw, v03::send_request)?;
            let events = svc.send_streaming_message(ctx, req).await?;
            Outcome::Stream(events, Dialect::V03, StreamEnd::Settled)
        }
        method::GET => {
            let req: GetTaskRequest = params(raw, v03::get_task_request)?;
            json(id, &v03::task(&svc.get_task(ctx, req).await?))
        }
        method::CANCEL => {
            let req: CancelTaskRequest = params(raw, v03::cancel_task_request)?;
            json(id, &v03::task(&svc.cancel_task(ctx, req).await?))
        }
        method::RESUBSCRIBE => {
            let req: SubscribeToTaskRequest = params(raw, v03::subscribe_request)?;
            let events = svc.subscribe_to_task(ctx, req).await?;
            Outcome::Stream(events, Dialect::V03, StreamEnd::Terminal)
        }
        method::PUSH_SET => {
            let cfg: TaskPushNotificationConfig = params(raw, v03::set_push_config_request)?;
            json(
                id,
                &v03::push_config(&svc.create_push_config(ctx, cfg).await?),
            )
        }
        method::PUSH_GET => {
            let req: GetTaskPushNotificationConfigRequest =
                params(raw, v03::get_push_config_request)?;
            json(id, &v03::push_config(&svc.get_push_config(ctx, req).await?))
        }
        method::PUSH_LIST => {
            let task_id: String = params(raw, v03::list_push_configs_task)?;
            let configs = all_push_configs(svc, ctx, task_id).await?;
            let list: Vec<Value> = configs.iter().map(v03::push_config).collect();
            json(id, &Value::Array(list))
        }
        method::PUSH_DELETE => {
            let req: DeleteTaskPushNotificationConfigRequest =
                params(raw, v03::delete_push_config_request)?;
            svc.delete_push_config(ctx, req).await?;
            json(id, &Value::Null)
        }
        method::EXTENDED_CARD => {
            let doc = svc
                .extended_agent_card(ctx, GetExtendedAgentCardRequest::default())
                .await?;
            // The combined card as it is served (0.3 and 1.0 fields, signed as such), not
            // re-encoded.
            let card: Value = serde_json::from_slice(&doc.v03.json)
                .map_err(|e| A2aError::Internal(format!("the extended card: {e}")))?;
            json(id, &card)
        }
        other => {
            return Err(A2aError::MethodNotFound {
                method: other.to_owned(),
            });
        }
    })
}

/// 0.3 lists a task's push configs in one array: every page of the 1.0 list.
async fn all_push_configs(
    svc: &A2aService,
    ctx: &RequestContext,
    task_id: String,
) -> Result<Vec<TaskPushNotificationConfig>, A2aError> {
    let mut out = Vec::new();
    let mut page_token = String::new();
    loop {
        let page = svc
            .list_push_configs(
                ctx,
                ListTaskPushNotificationConfigsRequest {
                    task_id: task_id.clone(),
                    page_size: 100,
                    page_token,
                    ..Default::default()
                },
            )
            .await?;
        out.extend(page.configs);
        if page.next_page_token.is_empty() {
            return Ok(out);
        }
        page_token = page.next_page_token;
    }
}

/// `{"jsonrpc":"2.0","id":…,"error":{"code","message","data":{reason, domain, metadata?,
/// field?}}}`: the 0.3 error object, whose `data` was free-form.
pub fn error_body(id: &Value, err: &A2aError) -> Vec<u8> {
    let mut data = err.error_info().to_json();
    if let Some(o) = data.as_object_mut() {
        o.remove("@type");
    }
    if let A2aError::InvalidParams { field, .. } = err {
        data["field"] = Value::from(field.as_str());
    }
    let body = serde_json::json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": {"code": err.codes().json_rpc, "message": err.to_string(), "data": data},
    });
    serde_json::to_vec(&body).expect("a JSON value always serialises")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_0_3_method_has_a_1_0_label() {
        for name in [
            method::SEND,
            method::STREAM,
            method::GET,
            method::CANCEL,
            method::RESUBSCRIBE,
            method::PUSH_SET,
            method::PUSH_GET,
            method::PUSH_LIST,
            method::PUSH_DELETE,
            method::EXTENDED_CARD,
        ] {
            assert!(method_label(name).is_some(), "{name}");
            assert_eq!(dialect_of(name), Dialect::V03);
        }
        assert_eq!(method_label("tasks/list"), None);
        assert_eq!(dialect_of("GetTask"), Dialect::V1);
    }

    #[test]
    fn errors_carry_one_data_object() {
        let body = error_body(&Value::from(3), &A2aError::task_not_found("t"));
        let v: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(v["error"]["code"], -32001);
        assert_eq!(v["error"]["data"]["reason"], "TASK_NOT_FOUND");
        assert_eq!(v["error"]["data"]["metadata"]["taskId"], "t");
        assert!(v["error"]["data"].get("@type").is_none());
    }
}
