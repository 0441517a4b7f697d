//! Serving 0.3 JSON-RPC clients: their params rewritten as the ProtoJSON of the 1.0 request
//! the service takes (the binding then decodes it with its field-naming decoder), and the
//! service's 1.0 results in the 0.3 shapes (`kind`, kebab-case states, `final`).
//!
//! 0.3 meanings that differ from 1.0 are translated here, once: `blocking` (absent = blocking,
//! as the 0.3 servers did) is `!returnImmediately`; `historyLength: 0` meant "all" in the 0.3
//! SDKs; a push config registered without an id gets the task id (what 0.3 servers did), and
//! `tasks/pushNotificationConfig/get` without `pushNotificationConfigId` reads that one.

use serde_json::{Map, Value, json};

use super::{STATES, message_json, message_value_to_v03, obj, part_to_v03};
use crate::state::{is_interrupted, is_terminal};
use crate::v1::stream_response::Payload;
use crate::v1::{
    SendMessageResponse, StreamResponse, Task, TaskPushNotificationConfig, TaskState,
    send_message_response,
};

type Result<T> = std::result::Result<T, String>;

fn params(p: &Value) -> Result<&Map<String, Value>> {
    p.as_object()
        .ok_or_else(|| "params must be an object".into())
}

fn present<'a>(p: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    p.get(key).filter(|v| !v.is_null())
}

fn required<'a>(p: &'a Map<String, Value>, key: &str) -> Result<&'a Value> {
    present(p, key).ok_or_else(|| format!("{key} is required"))
}

// === requests: 0.3 params → 1.0 ProtoJSON ===

/// `message/send` and `message/stream` (MessageSendParams) → SendMessageRequest.
pub fn send_request(p: &Value) -> Result<Value> {
    let p = params(p)?;
    let mut req = Map::new();
    req.insert("message".into(), message_in(required(p, "message")?)?);
    if let Some(c) = present(p, "configuration") {
        let c = c.as_object().ok_or("configuration must be an object")?;
        let mut cfg = Map::new();
        if let Some(m) = present(c, "acceptedOutputModes") {
            cfg.insert("acceptedOutputModes".into(), m.clone());
        }
        if let Some(n) = history_length(c) {
            cfg.insert("historyLength".into(), n.clone());
        }
        if let Some(b) = present(c, "blocking") {
            let b = b
                .as_bool()
                .ok_or("configuration.blocking must be a boolean")?;
            cfg.insert("returnImmediately".into(), json!(!b));
        }
        if let Some(push) = present(c, "pushNotificationConfig") {
            cfg.insert(
                "taskPushNotificationConfig".into(),
                push_config_in(push, None)?,
            );
        }
        req.insert("configuration".into(), Value::Object(cfg));
    }
    if let Some(m) = present(p, "metadata") {
        req.insert("metadata".into(), m.clone());
    }
    Ok(Value::Object(req))
}

/// `historyLength`, where 0 means everything (the 0.3 SDKs trimmed only for n > 0).
fn history_length(p: &Map<String, Value>) -> Option<&Value> {
    present(p, "historyLength").filter(|n| n.as_i64() != Some(0))
}

/// A 0.3 Message from a client: `kind` (if given) must be `message`, every part must have a
/// known `kind`, and a role other than `user`/`agent` is passed on as it is for the decoder to
/// name (the upstream-facing [`message_json`] is lenient where this must not be).
pub fn message_in(m: &Value) -> Result<Value> {
    let o = m.as_object().ok_or("message must be an object")?;
    if let Some(k) = present(o, "kind")
        && k != "message"
    {
        return Err(format!("message.kind must be \"message\", not {k}"));
    }
    for (i, part) in present(o, "parts")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        match part.get("kind").and_then(Value::as_str) {
            Some("text" | "file" | "data") => {}
            _ => {
                return Err(format!(
                    "message.parts[{i}].kind must be text, file or data"
                ));
            }
        }
    }
    let mut out = obj(&message_json(m));
    match o.get("role") {
        Some(Value::String(r)) if r == "user" || r == "agent" => {}
        Some(other) => {
            out.insert("role".into(), other.clone());
        }
        None => {
            out.remove("role");
        }
    }
    if o.get("parts").is_none() {
        out.remove("parts");
    }
    Ok(Value::Object(out))
}

/// `tasks/get` (TaskQueryParams) → GetTaskRequest.
pub fn get_task_request(p: &Value) -> Result<Value> {
    let p = params(p)?;
    let mut req = json!({ "id": required(p, "id")? });
    if let Some(n) = history_length(p) {
        req["historyLength"] = n.clone();
    }
    Ok(req)
}

/// `tasks/cancel` (TaskIdParams) → CancelTaskRequest.
pub fn cancel_task_request(p: &Value) -> Result<Value> {
    let p = params(p)?;
    let mut req = json!({ "id": required(p, "id")? });
    if let Some(m) = present(p, "metadata") {
        req["metadata"] = m.clone();
    }
    Ok(req)
}

/// `tasks/resubscribe` (TaskIdParams) → SubscribeToTaskRequest.
pub fn subscribe_request(p: &Value) -> Result<Value> {
    Ok(json!({ "id": required(params(p)?, "id")? }))
}

/// `tasks/pushNotificationConfig/set` (0.3 TaskPushNotificationConfig) → the 1.0 config.
pub fn set_push_config_request(p: &Value) -> Result<Value> {
    let p = params(p)?;
    let task_id = required(p, "taskId")?;
    push_config_in(required(p, "pushNotificationConfig")?, Some(task_id))
}

/// A 0.3 PushNotificationConfig (`authentication.schemes` a list; 1.0 keeps one scheme, the
/// first) as a 1.0 TaskPushNotificationConfig of `task_id`; its id defaults to the task id.
pub fn push_config_in(c: &Value, task_id: Option<&Value>) -> Result<Value> {
    let c = c
        .as_object()
        .ok_or("pushNotificationConfig must be an object")?;
    let mut out = Map::new();
    if let Some(t) = task_id {
        out.insert("taskId".into(), t.clone());
        out.insert("id".into(), t.clone());
    }
    for key in ["id", "url", "token"] {
        if let Some(v) = present(c, key) {
            out.insert(key.into(), v.clone());
        }
    }
    if let Some(auth) = present(c, "authentication") {
        let scheme = auth
            .get("schemes")
            .and_then(Value::as_array)
            .and_then(|s| s.first())
            .cloned()
            .ok_or("pushNotificationConfig.authentication.schemes must name a scheme")?;
        let mut a = json!({ "scheme": scheme });
        if let Some(cred) = auth.get("credentials").filter(|v| !v.is_null()) {
            a["credentials"] = cred.clone();
        }
        out.insert("authentication".into(), a);
    }
    Ok(Value::Object(out))
}

/// `tasks/pushNotificationConfig/get` (`{id, pushNotificationConfigId?}`) → the 1.0 request.
pub fn get_push_config_request(p: &Value) -> Result<Value> {
    let p = params(p)?;
    let task_id = required(p, "id")?;
    let id = present(p, "pushNotificationConfigId").unwrap_or(task_id);
    Ok(json!({ "taskId": task_id, "id": id }))
}

/// `tasks/pushNotificationConfig/delete` (`{id, pushNotificationConfigId}`) → the 1.0 request.
pub fn delete_push_config_request(p: &Value) -> Result<Value> {
    let p = params(p)?;
    Ok(json!({ "taskId": required(p, "id")?, "id": required(p, "pushNotificationConfigId")? }))
}

/// `tasks/pushNotificationConfig/list` (`{id}`) → the task whose configs are listed.
pub fn list_push_configs_task(p: &Value) -> Result<Value> {
    Ok(required(params(p)?, "id")?.clone())
}

// === results: 1.0 → 0.3 ===

fn to_value<T: serde::Serialize>(v: &T) -> Value {
    crate::v03::to_value_lossy(v)
}

/// A Task in the 0.3 shape (`kind: task`).
pub fn task(task: &Task) -> Value {
    task_value(&to_value(task))
}

fn task_value(v: &Value) -> Value {
    let mut t = obj(v);
    t.insert("kind".into(), json!("task"));
    if let Some(s) = v.get("status") {
        t.insert("status".into(), status_value(s));
    }
    if let Some(items) = v.get("artifacts").and_then(Value::as_array) {
        t.insert(
            "artifacts".into(),
            Value::Array(items.iter().map(artifact_value).collect()),
        );
    }
    if let Some(items) = v.get("history").and_then(Value::as_array) {
        t.insert(
            "history".into(),
            Value::Array(items.iter().map(message_value_to_v03).collect()),
        );
    }
    Value::Object(t)
}

fn status_value(s: &Value) -> Value {
    let mut st = obj(s);
    let name = s.get("state").and_then(Value::as_str).unwrap_or_default();
    let state = STATES
        .iter()
        .find(|(v1, _)| *v1 == name)
        .map_or("unknown", |(_, v03)| v03);
    st.insert("state".into(), json!(state));
    if let Some(m) = s.get("message") {
        st.insert("message".into(), message_value_to_v03(m));
    }
    Value::Object(st)
}

fn artifact_value(a: &Value) -> Value {
    let mut out = obj(a);
    let parts: Vec<Value> = a
        .get("parts")
        .and_then(Value::as_array)
        .map(|ps| ps.iter().map(part_to_v03).collect())
        .unwrap_or_default();
    out.insert("parts".into(), Value::Array(parts));
    Value::Object(out)
}

/// A `message/send` result: the bare Task or Message.
pub fn send_result(resp: &SendMessageResponse) -> Value {
    match &resp.payload {
        Some(send_message_response::Payload::Task(t)) => task(t),
        Some(send_message_response::Payload::Message(m)) => message_value_to_v03(&to_value(m)),
        None => Value::Null,
    }
}

/// Which status event is the last of a 0.3 stream (`final: true`): a terminal state always;
/// an interrupted one (input-required, auth-required) when the stream ends there too, as a
/// send's does and a resubscription's does not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamEnd {
    /// `message/stream`: ends at the first terminal or interrupted state.
    Settled,
    /// `tasks/resubscribe`: ends at a terminal state only.
    Terminal,
}

/// One stream event in the 0.3 shape: Task, Message, `status-update` (with `final`) or
/// `artifact-update`.
pub fn stream_event(ev: &StreamResponse, end: StreamEnd) -> Value {
    match &ev.payload {
        Some(Payload::Task(t)) => task(t),
        Some(Payload::Message(m)) => message_value_to_v03(&to_value(m)),
        Some(Payload::StatusUpdate(u)) => {
            let v = to_value(u);
            let mut out = obj(&v);
            out.insert("kind".into(), json!("status-update"));
            if let Some(s) = v.get("status") {
                out.insert("status".into(), status_value(s));
            }
            let state = u
                .status
                .as_ref()
                .map_or(TaskState::Unspecified, |s| s.state());
            let last = is_terminal(state) || (end == StreamEnd::Settled && is_interrupted(state));
            out.insert("final".into(), json!(last));
            Value::Object(out)
        }
        Some(Payload::ArtifactUpdate(u)) => {
            let v = to_value(u);
            let mut out = obj(&v);
            out.insert("kind".into(), json!("artifact-update"));
            if let Some(a) = v.get("artifact") {
                out.insert("artifact".into(), artifact_value(a));
            }
            Value::Object(out)
        }
        None => Value::Null,
    }
}

/// A 1.0 push config in the 0.3 JSON-RPC shape (`{taskId, pushNotificationConfig}`).
pub fn push_config(cfg: &TaskPushNotificationConfig) -> Value {
    json!({ "taskId": cfg.task_id, "pushNotificationConfig": push_config_body(cfg) })
}

/// The 0.3 PushNotificationConfig of a 1.0 config (shared by both 0.3 HTTP dialects).
pub(super) fn push_config_body(cfg: &TaskPushNotificationConfig) -> Value {
    let mut c = json!({ "id": cfg.id, "url": cfg.url });
    if !cfg.token.is_empty() {
        c["token"] = json!(cfg.token);
    }
    if let Some(a) = &cfg.authentication {
        let mut auth = json!({ "schemes": [a.scheme] });
        if !a.credentials.is_empty() {
            auth["credentials"] = json!(a.credentials);
        }
        c["authentication"] = auth;
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::v1::{SendMessageRequest, TaskStatus, TaskStatusUpdateEvent};

    #[test]
    fn a_0_3_send_becomes_a_1_0_request() {
        let p = json!({"message": {"kind": "message", "messageId": "m", "role": "user",
            "parts": [{"kind": "text", "text": "hi"},
                      {"kind": "file", "file": {"uri": "https://x/a.png", "mimeType": "image/png"}}]},
            "configuration": {"blocking": false, "historyLength": 0,
                "pushNotificationConfig": {"url": "https://hook", "token": "t",
                    "authentication": {"schemes": ["Bearer"], "credentials": "c"}}}});
        let req: SendMessageRequest = serde_json::from_value(send_request(&p).unwrap()).unwrap();
        let cfg = req.configuration.unwrap();
        assert!(cfg.return_immediately);
        assert_eq!(cfg.history_length, None, "0 means all in 0.3");
        let push = cfg.task_push_notification_config.unwrap();
        assert_eq!(push.authentication.unwrap().scheme, "Bearer");
        assert_eq!(req.message.unwrap().parts[1].media_type, "image/png");

        let blocking = send_request(&json!({"message": {"messageId": "m", "role": "user",
            "parts": [{"kind": "text", "text": "x"}]}}))
        .unwrap();
        assert!(
            blocking.get("configuration").is_none(),
            "1.0 default: blocking"
        );
        let bad = json!({"message": {"messageId": "m", "role": "robot", "parts": []}});
        assert_eq!(send_request(&bad).unwrap()["message"]["role"], "robot");
        let bad = json!({"message": {"messageId": "m", "role": "user", "parts": [{"text": "x"}]}});
        assert!(send_request(&bad).unwrap_err().contains("parts[0].kind"));
        assert!(send_request(&json!({})).unwrap_err().contains("message"));
    }

    #[test]
    fn push_config_ids_default_to_the_task() {
        let set = set_push_config_request(
            &json!({"taskId": "t", "pushNotificationConfig": {"url": "https://h"}}),
        )
        .unwrap();
        assert_eq!(set, json!({"taskId": "t", "id": "t", "url": "https://h"}));
        assert_eq!(
            get_push_config_request(&json!({"id": "t"})).unwrap(),
            json!({"taskId": "t", "id": "t"})
        );
    }

    #[test]
    fn the_last_status_event_is_final() {
        let ev = |state: TaskState| StreamResponse {
            payload: Some(Payload::StatusUpdate(TaskStatusUpdateEvent {
                task_id: "t".into(),
                context_id: "c".into(),
                status: Some(TaskStatus {
                    state: state as i32,
                    ..Default::default()
                }),
                ..Default::default()
            })),
        };
        let done = stream_event(&ev(TaskState::Completed), StreamEnd::Terminal);
        assert_eq!(done["kind"], "status-update");
        assert_eq!(done["status"]["state"], "completed");
        assert_eq!(done["final"], true);
        let asked = ev(TaskState::InputRequired);
        assert_eq!(stream_event(&asked, StreamEnd::Settled)["final"], true);
        assert_eq!(stream_event(&asked, StreamEnd::Terminal)["final"], false);
        assert_eq!(
            stream_event(&ev(TaskState::Working), StreamEnd::Settled)["final"],
            false
        );
    }

    #[test]
    fn a_task_with_a_non_finite_number_still_prints() {
        use crate::wkt::{Struct, Value as PbValue};
        let metadata: Struct = [("x".to_owned(), PbValue::from(f64::NAN))]
            .into_iter()
            .collect();
        let t = Task {
            id: "t".into(),
            metadata: Some(metadata),
            ..Default::default()
        };
        let v = task(&t);
        assert_eq!(v["id"], "t");
        assert_eq!(v["metadata"], json!({"x": null}));
        assert_eq!(super::super::rest::task(&t)["metadata"], json!({"x": null}));
    }
}
