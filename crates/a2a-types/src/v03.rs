//! A2A 0.3 JSON-RPC dialect ⇄ the canonical 1.0 model, at the JSON level: 1.0 values are
//! printed as ProtoJSON and rewritten into the 0.3 shape (`kind` discriminators, lower-case
//! kebab enums, `file`/`data` part objects), and 0.3 values are rewritten into ProtoJSON and
//! parsed as the 1.0 types. Used toward upstream agents that speak 0.3 (`message/send`).
//!
//! What 0.3 cannot say is dropped on the way out (a part's `filename` on a text part, the 1.0
//! `tenant`); what 1.0 cannot say is dropped on the way in (0.3 `final`, which 1.0 expresses by
//! the state itself).
//!
//! The gateway also serves 0.3 clients with the same translation, in the other direction:
//! [`serve`] (0.3 JSON-RPC requests in, 1.0 results out as 0.3), [`rest`] (the 0.3 HTTP+JSON
//! dialect, ProtoJSON of the 0.3 proto) and [`card`] (one card both generations read).

pub mod card;
pub mod rest;
pub mod serve;

use serde_json::{Map, Value, json};

use crate::v1::{AgentCard, Message, SendMessageRequest, StreamResponse, Task};

/// The 0.3 JSON-RPC method names.
pub mod method {
    pub const SEND: &str = "message/send";
    pub const STREAM: &str = "message/stream";
    pub const GET: &str = "tasks/get";
    pub const CANCEL: &str = "tasks/cancel";
    pub const RESUBSCRIBE: &str = "tasks/resubscribe";
    pub const PUSH_SET: &str = "tasks/pushNotificationConfig/set";
    pub const PUSH_GET: &str = "tasks/pushNotificationConfig/get";
    pub const PUSH_LIST: &str = "tasks/pushNotificationConfig/list";
    pub const PUSH_DELETE: &str = "tasks/pushNotificationConfig/delete";
    pub const EXTENDED_CARD: &str = "agent/getAuthenticatedExtendedCard";
}

const STATES: [(&str, &str); 9] = [
    ("TASK_STATE_SUBMITTED", "submitted"),
    ("TASK_STATE_WORKING", "working"),
    ("TASK_STATE_INPUT_REQUIRED", "input-required"),
    ("TASK_STATE_COMPLETED", "completed"),
    ("TASK_STATE_CANCELED", "canceled"),
    ("TASK_STATE_FAILED", "failed"),
    ("TASK_STATE_REJECTED", "rejected"),
    ("TASK_STATE_AUTH_REQUIRED", "auth-required"),
    ("TASK_STATE_UNSPECIFIED", "unknown"),
];

/// A 1.0 value as JSON for the 0.3 rewrite, never failing: NaN and ±Infinity (which the edge
/// refuses, but a task stored before that may hold) print as `null` (see
/// [`crate::wkt::lossy`]); a value that still does not print (an enum number outside its
/// enum) becomes `null` as a whole.
pub(crate) fn to_value_lossy<T: serde::Serialize>(v: &T) -> Value {
    serde_json::to_value(v)
        .or_else(|_| crate::wkt::lossy(|| serde_json::to_value(v)))
        .unwrap_or(Value::Null)
}

fn obj(v: &Value) -> Map<String, Value> {
    v.as_object().cloned().unwrap_or_default()
}

// === 1.0 → 0.3 ===

/// `message/send` (and `message/stream`) params for a 1.0 SendMessageRequest.
pub fn send_params(req: &SendMessageRequest) -> Result<Value, String> {
    let message = req.message.as_ref().ok_or("the request has no message")?;
    let mut params = json!({ "message": message_to_v03(message)? });
    if let Some(cfg) = &req.configuration {
        let mut c = Map::new();
        if !cfg.accepted_output_modes.is_empty() {
            c.insert(
                "acceptedOutputModes".into(),
                json!(cfg.accepted_output_modes),
            );
        }
        if let Some(n) = cfg.history_length {
            c.insert("historyLength".into(), json!(n));
        }
        c.insert("blocking".into(), json!(!cfg.return_immediately));
        params["configuration"] = Value::Object(c);
    }
    if let Some(m) = &req.metadata {
        params["metadata"] = serde_json::to_value(m).map_err(|e| e.to_string())?;
    }
    Ok(params)
}

pub fn message_to_v03(message: &Message) -> Result<Value, String> {
    Ok(message_value_to_v03(
        &serde_json::to_value(message).map_err(|e| e.to_string())?,
    ))
}

/// A 1.0 Message as ProtoJSON → the 0.3 JSON-RPC shape.
fn message_value_to_v03(message: &Value) -> Value {
    let mut m = obj(message);
    m.insert("kind".into(), json!("message"));
    let role = match m.get("role").and_then(Value::as_str) {
        Some("ROLE_AGENT") => "agent",
        _ => "user",
    };
    m.insert("role".into(), json!(role));
    let parts: Vec<Value> = m
        .get("parts")
        .and_then(Value::as_array)
        .map(|ps| ps.iter().map(part_to_v03).collect())
        .unwrap_or_default();
    m.insert("parts".into(), Value::Array(parts));
    Value::Object(m)
}

fn part_to_v03(p: &Value) -> Value {
    let mut out = Map::new();
    if let Some(text) = p.get("text") {
        out.insert("kind".into(), json!("text"));
        out.insert("text".into(), text.clone());
    } else if p.get("raw").is_some() || p.get("url").is_some() {
        let mut file = Map::new();
        if let Some(raw) = p.get("raw") {
            file.insert("bytes".into(), raw.clone());
        }
        if let Some(url) = p.get("url") {
            file.insert("uri".into(), url.clone());
        }
        if let Some(mt) = p.get("mediaType") {
            file.insert("mimeType".into(), mt.clone());
        }
        if let Some(name) = p.get("filename") {
            file.insert("name".into(), name.clone());
        }
        out.insert("kind".into(), json!("file"));
        out.insert("file".into(), Value::Object(file));
    } else {
        // 0.3 data parts hold an object; another JSON value is wrapped.
        let data = match p.get("data") {
            Some(Value::Object(o)) => Value::Object(o.clone()),
            Some(other) => json!({ "value": other }),
            None => json!({}),
        };
        out.insert("kind".into(), json!("data"));
        out.insert("data".into(), data);
    }
    if let Some(meta) = p.get("metadata") {
        out.insert("metadata".into(), meta.clone());
    }
    Value::Object(out)
}

// === 0.3 → 1.0 ===

/// A 0.3 result or stream event (`kind` = task, message, status-update, artifact-update).
pub fn stream_response(v: &Value) -> Result<StreamResponse, String> {
    let kind = v.get("kind").and_then(Value::as_str).unwrap_or_default();
    let (member, body) = match kind {
        "task" => ("task", task_json(v)),
        "message" => ("message", message_json(v)),
        "status-update" => {
            let mut u = obj(v);
            u.remove("kind");
            u.remove("final");
            if let Some(s) = v.get("status") {
                u.insert("status".into(), status_json(s));
            }
            ("statusUpdate", Value::Object(u))
        }
        "artifact-update" => {
            let mut u = obj(v);
            u.remove("kind");
            if let Some(a) = v.get("artifact") {
                u.insert("artifact".into(), artifact_json(a));
            }
            ("artifactUpdate", Value::Object(u))
        }
        other => return Err(format!("unknown 0.3 result kind {other:?}")),
    };
    serde_json::from_value(json!({ member: body })).map_err(|e| format!("0.3 {kind}: {e}"))
}

/// A 0.3 agent card (`url` + `preferredTransport` + `additionalInterfaces`, OpenAPI-style
/// security schemes) as a 1.0 card whose interfaces say `protocolVersion` "0.3". Security
/// schemes other than apiKey and OAuth2 client credentials are dropped.
pub fn card(v: &Value) -> Result<AgentCard, String> {
    if v.get("supportedInterfaces").is_some() {
        return serde_json::from_value(v.clone()).map_err(|e| format!("agent card: {e}"));
    }
    let mut interfaces = Vec::new();
    if let Some(url) = v.get("url") {
        let binding = v
            .get("preferredTransport")
            .cloned()
            .unwrap_or(json!("JSONRPC"));
        interfaces.push(json!({"url": url, "protocolBinding": binding, "protocolVersion": "0.3"}));
    }
    for i in v
        .get("additionalInterfaces")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        interfaces.push(json!({"url": i["url"], "protocolBinding": i["transport"],
                               "protocolVersion": "0.3"}));
    }
    let mut schemes = Map::new();
    for (name, s) in v
        .get("securitySchemes")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        let scheme = match s["type"].as_str() {
            Some("apiKey") => {
                json!({"apiKeySecurityScheme": {"location": s["in"], "name": s["name"]}})
            }
            Some("oauth2") if s["flows"].get("clientCredentials").is_some() => {
                let cc = &s["flows"]["clientCredentials"];
                json!({"oauth2SecurityScheme": {"flows": {"clientCredentials": {
                    "tokenUrl": cc["tokenUrl"], "scopes": cc.get("scopes").cloned().unwrap_or(json!({}))}}}})
            }
            _ => continue,
        };
        schemes.insert(name.clone(), scheme);
    }
    let caps = v.get("capabilities").cloned().unwrap_or(json!({}));
    let skills: Vec<Value> = v
        .get("skills")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|s| {
            json!({"id": s["id"], "name": s["name"], "description": s["description"],
                   "tags": s.get("tags").cloned().unwrap_or(json!([])),
                   "examples": s.get("examples").cloned().unwrap_or(json!([]))})
        })
        .collect();
    let card = json!({
        "name": v["name"], "description": v["description"], "version": v["version"],
        "supportedInterfaces": interfaces,
        "capabilities": {"streaming": caps["streaming"].as_bool().unwrap_or(false),
                         "pushNotifications": caps["pushNotifications"].as_bool().unwrap_or(false)},
        "securitySchemes": schemes,
        "defaultInputModes": v.get("defaultInputModes").cloned().unwrap_or(json!([])),
        "defaultOutputModes": v.get("defaultOutputModes").cloned().unwrap_or(json!([])),
        "skills": skills,
    });
    serde_json::from_value(card).map_err(|e| format!("0.3 agent card: {e}"))
}

pub fn task(v: &Value) -> Result<Task, String> {
    serde_json::from_value(task_json(v)).map_err(|e| format!("0.3 task: {e}"))
}

fn task_json(v: &Value) -> Value {
    let mut t = obj(v);
    t.remove("kind");
    if let Some(s) = v.get("status") {
        t.insert("status".into(), status_json(s));
    }
    for (key, f) in [
        ("artifacts", artifact_json as fn(&Value) -> Value),
        ("history", message_json),
    ] {
        if let Some(items) = v.get(key).and_then(Value::as_array) {
            t.insert(key.into(), Value::Array(items.iter().map(f).collect()));
        }
    }
    Value::Object(t)
}

fn status_json(s: &Value) -> Value {
    let mut st = obj(s);
    let state = s.get("state").and_then(Value::as_str).unwrap_or("unknown");
    let name = STATES
        .iter()
        .find(|(_, v03)| *v03 == state)
        .map_or("TASK_STATE_UNSPECIFIED", |(v1, _)| v1);
    st.insert("state".into(), json!(name));
    if let Some(m) = s.get("message") {
        st.insert("message".into(), message_json(m));
    }
    Value::Object(st)
}

fn message_json(v: &Value) -> Value {
    let mut m = obj(v);
    m.remove("kind");
    let role = match v.get("role").and_then(Value::as_str) {
        Some("agent") => "ROLE_AGENT",
        _ => "ROLE_USER",
    };
    m.insert("role".into(), json!(role));
    if let Some(parts) = v.get("parts").and_then(Value::as_array) {
        m.insert(
            "parts".into(),
            Value::Array(parts.iter().map(part_json).collect()),
        );
    }
    Value::Object(m)
}

fn artifact_json(v: &Value) -> Value {
    let mut a = obj(v);
    if let Some(parts) = v.get("parts").and_then(Value::as_array) {
        a.insert(
            "parts".into(),
            Value::Array(parts.iter().map(part_json).collect()),
        );
    }
    Value::Object(a)
}

fn part_json(p: &Value) -> Value {
    let mut out = Map::new();
    match p.get("kind").and_then(Value::as_str) {
        Some("file") => {
            let file = p.get("file").cloned().unwrap_or_default();
            if let Some(b) = file.get("bytes") {
                out.insert("raw".into(), b.clone());
            }
            if let Some(u) = file.get("uri") {
                out.insert("url".into(), u.clone());
            }
            if let Some(mt) = file.get("mimeType") {
                out.insert("mediaType".into(), mt.clone());
            }
            if let Some(n) = file.get("name") {
                out.insert("filename".into(), n.clone());
            }
        }
        Some("data") => {
            out.insert("data".into(), p.get("data").cloned().unwrap_or(json!({})));
        }
        _ => {
            out.insert("text".into(), p.get("text").cloned().unwrap_or(json!("")));
        }
    }
    if let Some(meta) = p.get("metadata") {
        out.insert("metadata".into(), meta.clone());
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::v1::stream_response::Payload;
    use crate::v1::{Part, Role, SendMessageConfiguration, TaskState, part::Content};

    #[test]
    fn send_params_speak_the_kind_dialect() {
        let req = SendMessageRequest {
            message: Some(Message {
                message_id: "m1".into(),
                task_id: "t-up".into(),
                role: Role::User as i32,
                parts: vec![
                    Part {
                        content: Some(Content::Text("hi".into())),
                        ..Default::default()
                    },
                    Part {
                        content: Some(Content::Url("https://x/y.png".into())),
                        media_type: "image/png".into(),
                        ..Default::default()
                    },
                ],
                ..Default::default()
            }),
            configuration: Some(SendMessageConfiguration {
                return_immediately: true,
                ..Default::default()
            }),
            ..Default::default()
        };
        let p = send_params(&req).unwrap();
        assert_eq!(p["message"]["kind"], "message");
        assert_eq!(p["message"]["role"], "user");
        assert_eq!(p["message"]["taskId"], "t-up");
        assert_eq!(
            p["message"]["parts"][0],
            json!({"kind": "text", "text": "hi"})
        );
        assert_eq!(
            p["message"]["parts"][1],
            json!({"kind": "file", "file": {"uri": "https://x/y.png", "mimeType": "image/png"}})
        );
        assert_eq!(p["configuration"]["blocking"], false);
    }

    #[test]
    fn results_come_back_as_1_0() {
        let t = json!({"kind": "task", "id": "t", "contextId": "c",
            "status": {"state": "input-required", "message": {"kind": "message", "messageId": "q",
                "role": "agent", "parts": [{"kind": "text", "text": "more?"}]}},
            "artifacts": [{"artifactId": "a", "parts": [{"kind": "data", "data": {"x": 1}}]}]});
        let Payload::Task(task) = stream_response(&t).unwrap().payload.unwrap() else {
            panic!("a task");
        };
        assert_eq!(
            task.status.as_ref().unwrap().state,
            TaskState::InputRequired as i32
        );
        let q = task.status.unwrap().message.unwrap();
        assert_eq!(q.role, Role::Agent as i32);
        assert!(matches!(
            task.artifacts[0].parts[0].content,
            Some(Content::Data(_))
        ));

        let u = json!({"kind": "status-update", "taskId": "t", "contextId": "c", "final": true,
            "status": {"state": "completed"}});
        let Payload::StatusUpdate(u) = stream_response(&u).unwrap().payload.unwrap() else {
            panic!("a status update");
        };
        assert_eq!(u.status.unwrap().state, TaskState::Completed as i32);

        let a = json!({"kind": "artifact-update", "taskId": "t", "contextId": "c", "append": true,
            "lastChunk": false, "artifact": {"artifactId": "a", "parts": [{"kind": "text", "text": "x"}]}});
        assert!(matches!(
            stream_response(&a).unwrap().payload,
            Some(Payload::ArtifactUpdate(ref u)) if u.append && !u.last_chunk
        ));
        assert!(stream_response(&json!({"kind": "nope"})).is_err());
    }

    #[test]
    fn a_0_3_card_becomes_a_1_0_card() {
        let c = card(&json!({"name": "old", "description": "d", "version": "1",
            "protocolVersion": "0.3.0", "url": "http://h/rpc", "preferredTransport": "JSONRPC",
            "capabilities": {"streaming": true},
            "securitySchemes": {"k": {"type": "apiKey", "in": "header", "name": "X-Key"}},
            "defaultInputModes": ["text/plain"], "defaultOutputModes": ["text/plain"],
            "skills": [{"id": "s", "name": "S", "description": "x", "tags": ["t"]}]}))
        .unwrap();
        assert_eq!(c.supported_interfaces[0].url, "http://h/rpc");
        assert_eq!(c.supported_interfaces[0].protocol_version, "0.3");
        assert_eq!(c.capabilities.unwrap().streaming, Some(true));
        assert!(c.security_schemes.contains_key("k"));
        assert_eq!(c.skills[0].tags, ["t"]);
    }
}
