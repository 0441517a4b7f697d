//! The 0.3 HTTP+JSON dialect: ProtoJSON of the 0.3 proto (package `a2a.v1`), which differs from
//! 1.0's ProtoJSON in a few names: a Message's parts are `content`; a Part is
//! `{text}` | `{file: {fileWithUri | fileWithBytes, mimeType, name}}` | `{data: {data: {…}}}`;
//! `TASK_STATE_CANCELLED`; a status update carries `final`; a push config is
//! `{name: "tasks/{id}/pushNotificationConfigs/{cid}", pushNotificationConfig}`. The 0.3 SDKs
//! parse strictly (an unknown field fails), so results carry only 0.3 fields.
//!
//! Requests in: 0.3 ProtoJSON → 1.0 ProtoJSON (the binding decodes it). Results out: the 1.0
//! types → 0.3 ProtoJSON. Shares `blocking`, `historyLength` and `final` rules with
//! [`super::serve`].

use serde_json::{Map, Value, json};

use super::obj;
use super::serve::{StreamEnd, push_config_body};
use crate::state::{is_interrupted, is_terminal};
use crate::v1::stream_response::Payload;
use crate::v1::{
    SendMessageResponse, StreamResponse, Task, TaskPushNotificationConfig, TaskState,
    send_message_response,
};

type Result<T> = std::result::Result<T, String>;

fn present<'a>(p: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    p.get(key).filter(|v| !v.is_null())
}

// === requests: 0.3 ProtoJSON → 1.0 ProtoJSON ===

/// `POST /v1/message:send|stream` (0.3 SendMessageRequest; the message under `message` or,
/// by its proto name, `request`).
pub fn send_request(body: &Value) -> Result<Value> {
    let b = body.as_object().ok_or("the body must be an object")?;
    let message = present(b, "message")
        .or_else(|| present(b, "request"))
        .ok_or("message is required")?;
    let mut req = json!({ "message": message_in(message)? });
    if let Some(c) = present(b, "configuration") {
        let c = c.as_object().ok_or("configuration must be an object")?;
        let mut cfg = Map::new();
        if let Some(m) = present(c, "acceptedOutputModes") {
            cfg.insert("acceptedOutputModes".into(), m.clone());
        }
        if let Some(n) = present(c, "historyLength").filter(|n| n.as_i64() != Some(0)) {
            cfg.insert("historyLength".into(), n.clone());
        }
        // A proto3 bool: absent is false, so a 0.3 configuration without `blocking` asks for
        // an immediate answer.
        let blocking = present(c, "blocking").and_then(Value::as_bool) == Some(true);
        cfg.insert("returnImmediately".into(), json!(!blocking));
        if let Some(push) = present(c, "pushNotification") {
            cfg.insert(
                "taskPushNotificationConfig".into(),
                super::serve::push_config_in(push, None)?,
            );
        }
        req["configuration"] = Value::Object(cfg);
    }
    if let Some(m) = present(b, "metadata") {
        req["metadata"] = m.clone();
    }
    Ok(req)
}

fn message_in(m: &Value) -> Result<Value> {
    let mut out = m.as_object().cloned().ok_or("message must be an object")?;
    if let Some(content) = out.remove("content") {
        let parts = content.as_array().ok_or("message.content must be a list")?;
        let parts: Result<Vec<Value>> = parts.iter().enumerate().map(part_in).collect();
        out.insert("parts".into(), Value::Array(parts?));
    }
    Ok(Value::Object(out))
}

fn part_in((i, p): (usize, &Value)) -> Result<Value> {
    let mut out = Map::new();
    if let Some(t) = p.get("text") {
        out.insert("text".into(), t.clone());
    } else if let Some(f) = p.get("file") {
        for (from, to) in [
            ("fileWithUri", "url"),
            ("fileWithBytes", "raw"),
            ("mimeType", "mediaType"),
            ("name", "filename"),
        ] {
            if let Some(v) = f.get(from) {
                out.insert(to.into(), v.clone());
            }
        }
    } else if let Some(d) = p.get("data") {
        out.insert("data".into(), d.get("data").cloned().unwrap_or(json!({})));
    } else {
        return Err(format!("message.content[{i}] must be text, file or data"));
    }
    if let Some(m) = p.get("metadata") {
        out.insert("metadata".into(), m.clone());
    }
    Ok(Value::Object(out))
}

/// `POST /v1/tasks/{id}/pushNotificationConfigs`: the body is the 0.3
/// TaskPushNotificationConfig (the proto's `body: "config"`), or the whole
/// CreateTaskPushNotificationConfigRequest (`{parent, configId, config}`, what the 0.3 SDKs
/// send), or a bare PushNotificationConfig; the result is the 1.0 config of `task_id`.
pub fn push_config_request(body: &Value, task_id: &str) -> Result<Value> {
    let b = body.as_object().ok_or("the body must be an object")?;
    let config_id = present(b, "configId").cloned();
    let tpc = present(b, "config").unwrap_or(body);
    let push = tpc.get("pushNotificationConfig").unwrap_or(tpc);
    let mut cfg = super::serve::push_config_in(push, Some(&json!(task_id)))?;
    if push.get("id").is_none_or(Value::is_null)
        && let Some(id) = config_id.filter(|id| id.as_str().is_some_and(|s| !s.is_empty()))
    {
        cfg["id"] = id;
    }
    Ok(cfg)
}

// === results: the 1.0 types → 0.3 ProtoJSON ===

fn to_value<T: serde::Serialize>(v: &T) -> Value {
    crate::v03::to_value_lossy(v)
}

/// A Task as 0.3 ProtoJSON.
pub fn task(t: &Task) -> Value {
    task_value(&to_value(t))
}

fn task_value(v: &Value) -> Value {
    let mut t = Map::new();
    for key in ["id", "contextId", "metadata"] {
        if let Some(x) = v.get(key) {
            t.insert(key.into(), x.clone());
        }
    }
    if let Some(s) = v.get("status") {
        t.insert("status".into(), status_value(s));
    }
    if let Some(items) = v.get("artifacts").and_then(Value::as_array) {
        t.insert(
            "artifacts".into(),
            items.iter().map(artifact_value).collect(),
        );
    }
    if let Some(items) = v.get("history").and_then(Value::as_array) {
        t.insert("history".into(), items.iter().map(message_value).collect());
    }
    Value::Object(t)
}

fn status_value(s: &Value) -> Value {
    let mut st = Map::new();
    let state = match s.get("state").and_then(Value::as_str) {
        Some("TASK_STATE_CANCELED") => "TASK_STATE_CANCELLED",
        Some(other) => other,
        None => "TASK_STATE_UNSPECIFIED",
    };
    st.insert("state".into(), json!(state));
    if let Some(m) = s.get("message") {
        st.insert("message".into(), message_value(m));
    }
    if let Some(ts) = s.get("timestamp") {
        st.insert("timestamp".into(), ts.clone());
    }
    Value::Object(st)
}

fn message_value(m: &Value) -> Value {
    let mut out = Map::new();
    for key in [
        "messageId",
        "contextId",
        "taskId",
        "role",
        "metadata",
        "extensions",
    ] {
        if let Some(x) = m.get(key) {
            out.insert(key.into(), x.clone());
        }
    }
    let parts = m.get("parts").and_then(Value::as_array);
    out.insert(
        "content".into(),
        parts.into_iter().flatten().map(part_value).collect(),
    );
    Value::Object(out)
}

fn artifact_value(a: &Value) -> Value {
    let mut out = Map::new();
    for key in [
        "artifactId",
        "name",
        "description",
        "metadata",
        "extensions",
    ] {
        if let Some(x) = a.get(key) {
            out.insert(key.into(), x.clone());
        }
    }
    let parts = a.get("parts").and_then(Value::as_array);
    out.insert(
        "parts".into(),
        parts.into_iter().flatten().map(part_value).collect(),
    );
    Value::Object(out)
}

fn part_value(p: &Value) -> Value {
    let mut out = Map::new();
    if let Some(t) = p.get("text") {
        out.insert("text".into(), t.clone());
    } else if p.get("raw").is_some() || p.get("url").is_some() {
        let mut f = Map::new();
        for (from, to) in [
            ("url", "fileWithUri"),
            ("raw", "fileWithBytes"),
            ("mediaType", "mimeType"),
            ("filename", "name"),
        ] {
            if let Some(v) = p.get(from) {
                f.insert(to.into(), v.clone());
            }
        }
        out.insert("file".into(), Value::Object(f));
    } else {
        // DataPart.data is a Struct: another JSON value is wrapped, as in the JSON-RPC dialect.
        let data = match p.get("data") {
            Some(Value::Object(o)) => Value::Object(o.clone()),
            Some(other) => json!({ "value": other }),
            None => json!({}),
        };
        out.insert("data".into(), json!({ "data": data }));
    }
    if let Some(m) = p.get("metadata") {
        out.insert("metadata".into(), m.clone());
    }
    Value::Object(out)
}

/// `POST /v1/message:send`: `{task}` or `{message}`.
pub fn send_result(resp: &SendMessageResponse) -> Value {
    match &resp.payload {
        Some(send_message_response::Payload::Task(t)) => json!({ "task": task(t) }),
        Some(send_message_response::Payload::Message(m)) => {
            json!({ "message": message_value(&to_value(m)) })
        }
        None => json!({}),
    }
}

/// One SSE event of `/v1/message:stream` or `/v1/tasks/{id}:subscribe`: a 0.3 StreamResponse.
pub fn stream_event(ev: &StreamResponse, end: StreamEnd) -> Value {
    match &ev.payload {
        Some(Payload::Task(t)) => json!({ "task": task(t) }),
        Some(Payload::Message(m)) => json!({ "message": message_value(&to_value(m)) }),
        Some(Payload::StatusUpdate(u)) => {
            let v = to_value(u);
            let mut out = Map::new();
            for key in ["taskId", "contextId", "metadata"] {
                if let Some(x) = v.get(key) {
                    out.insert(key.into(), x.clone());
                }
            }
            if let Some(s) = v.get("status") {
                out.insert("status".into(), status_value(s));
            }
            let state = u
                .status
                .as_ref()
                .map_or(TaskState::Unspecified, |s| s.state());
            let last = is_terminal(state) || (end == StreamEnd::Settled && is_interrupted(state));
            out.insert("final".into(), json!(last));
            json!({ "statusUpdate": out })
        }
        Some(Payload::ArtifactUpdate(u)) => {
            let mut v = obj(&to_value(u));
            if let Some(a) = v.get("artifact").map(artifact_value) {
                v.insert("artifact".into(), a);
            }
            json!({ "artifactUpdate": v })
        }
        None => json!({}),
    }
}

/// A push config as the 0.3 TaskPushNotificationConfig.
pub fn push_config(cfg: &TaskPushNotificationConfig) -> Value {
    json!({
        "name": format!("tasks/{}/pushNotificationConfigs/{}", cfg.task_id, cfg.id),
        "pushNotificationConfig": push_config_body(cfg),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::v1::{Artifact, Part, SendMessageRequest, TaskStatus, part::Content};

    #[test]
    fn a_0_3_rest_send_becomes_a_1_0_request() {
        let body = json!({"request": {"messageId": "m", "role": "ROLE_USER", "content": [
            {"text": "hi"},
            {"file": {"fileWithUri": "https://x/a.pdf", "mimeType": "application/pdf"}},
            {"data": {"data": {"k": 1}}}]},
            "configuration": {"blocking": true, "historyLength": 0}});
        let req: SendMessageRequest = serde_json::from_value(send_request(&body).unwrap()).unwrap();
        let m = req.message.unwrap();
        assert_eq!(m.parts.len(), 3);
        assert_eq!(m.parts[1].media_type, "application/pdf");
        assert!(matches!(m.parts[2].content, Some(Content::Data(_))));
        let cfg = req.configuration.unwrap();
        assert!(!cfg.return_immediately);
        assert_eq!(cfg.history_length, None);
        let bad = json!({"message": {"content": [{"nothing": 1}]}});
        assert!(send_request(&bad).unwrap_err().contains("content[0]"));
    }

    #[test]
    fn results_speak_0_3_protojson() {
        let t = Task {
            id: "t".into(),
            context_id: "c".into(),
            status: Some(TaskStatus {
                state: TaskState::Canceled as i32,
                ..Default::default()
            }),
            artifacts: vec![Artifact {
                artifact_id: "a".into(),
                parts: vec![Part {
                    content: Some(Content::Raw(b"hi".to_vec())),
                    media_type: "text/plain".into(),
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        };
        let v = task(&t);
        assert_eq!(v["status"]["state"], "TASK_STATE_CANCELLED");
        assert_eq!(
            v["artifacts"][0]["parts"][0],
            json!({"file": {"fileWithBytes": "aGk=", "mimeType": "text/plain"}})
        );
    }

    #[test]
    fn push_config_bodies_in_every_shape() {
        let want = json!({"taskId": "t", "id": "c", "url": "https://h"});
        for body in [
            json!({"parent": "tasks/t", "configId": "c",
                   "config": {"pushNotificationConfig": {"url": "https://h"}}}),
            json!({"name": "x", "pushNotificationConfig": {"id": "c", "url": "https://h"}}),
            json!({"id": "c", "url": "https://h"}),
        ] {
            assert_eq!(push_config_request(&body, "t").unwrap(), want, "{body}");
        }
        let cfg: TaskPushNotificationConfig = serde_json::from_value(want).unwrap();
        assert_eq!(
            push_config(&cfg)["name"],
            "tasks/t/pushNotificationConfigs/c"
        );
    }
}
