//! ProtoJSON round trips against documents written from the spec's examples.

use crate::v1::*;
use serde_json::{Value, json};

fn round_trip<T>(doc: Value) -> T
where
    T: serde::de::DeserializeOwned + serde::Serialize,
{
    let parsed: T = serde_json::from_value(doc.clone()).expect("parses");
    let printed = serde_json::to_value(&parsed).unwrap();
    assert_eq!(printed, doc, "printed form differs from the input document");
    parsed
}

#[test]
fn send_message_request_from_the_spec_example() {
    let req: SendMessageRequest = round_trip(json!({
        "message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "hi"}]},
        "configuration": {"acceptedOutputModes": ["text/plain"], "historyLength": 2}
    }));
    let msg = req.message.unwrap();
    assert_eq!(msg.role(), Role::User);
    assert_eq!(req.configuration.unwrap().history_length, Some(2));
}

#[test]
fn task_with_artifacts_and_status_timestamp() {
    let task: Task = round_trip(json!({
        "id": "t1", "contextId": "c1",
        "status": {"state": "TASK_STATE_COMPLETED", "timestamp": "2026-01-01T00:00:00.000Z"},
        "artifacts": [{"artifactId": "a1", "parts": [{"text": "hello"}]}]
    }));
    assert_eq!(task.status.unwrap().state(), TaskState::Completed);
}

#[test]
fn every_part_kind() {
    let msg: Message = round_trip(json!({
        "messageId": "m", "role": "ROLE_AGENT",
        "parts": [
            {"text": "t"},
            {"raw": "aGVsbG8=", "filename": "a.png", "mediaType": "image/png"},
            {"url": "https://example.com/a.pdf", "mediaType": "application/pdf"},
            {"data": {"chunks": 5, "nested": [1, "x", null, true]}, "mediaType": "application/json"},
            {"data": [1, 2]}
        ]
    }));
    match &msg.parts[1].content {
        Some(part::Content::Raw(b)) => assert_eq!(b.as_slice(), b"hello"),
        other => panic!("raw part decoded as {other:?}"),
    }
    // Integral numbers print as JSON integers, not `5.0`.
    let printed = serde_json::to_string(&msg.parts[3]).unwrap();
    assert!(printed.contains(r#""chunks":5,"#), "{printed}");
}

#[test]
fn stream_responses_use_member_keys() {
    let ev: StreamResponse = round_trip(json!({
        "statusUpdate": {"taskId": "t", "contextId": "c",
                         "status": {"state": "TASK_STATE_WORKING", "timestamp": "2026-01-01T00:00:00.000Z"}}
    }));
    assert!(matches!(
        ev.payload,
        Some(stream_response::Payload::StatusUpdate(_))
    ));
    let ev: StreamResponse = round_trip(json!({
        "artifactUpdate": {"taskId": "t", "contextId": "c", "append": true, "lastChunk": true,
                           "artifact": {"artifactId": "a", "parts": [{"text": "x"}]}}
    }));
    assert!(matches!(
        ev.payload,
        Some(stream_response::Payload::ArtifactUpdate(_))
    ));
}

#[test]
fn agent_card_with_security_schemes() {
    round_trip::<AgentCard>(json!({
        "name": "gw", "description": "d", "version": "1",
        "supportedInterfaces": [{"url": "http://h/a2a/jsonrpc", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}],
        "capabilities": {"streaming": true, "pushNotifications": false},
        "securitySchemes": {
            "key": {"apiKeySecurityScheme": {"location": "header", "name": "X-API-Key"}},
            "oidc": {"openIdConnectSecurityScheme": {"openIdConnectUrl": "https://i/.well-known/openid-configuration"}},
            "oauth": {"oauth2SecurityScheme": {"flows": {"clientCredentials": {"tokenUrl": "https://i/token", "scopes": {"read": "r"}}}}}
        },
        "securityRequirements": [{"schemes": {"oauth": {"list": ["read"]}, "key": {}}}],
        "defaultInputModes": ["text/plain"], "defaultOutputModes": ["text/plain"],
        "skills": [{"id": "echo", "name": "Echo", "description": "echoes", "tags": ["echo"]}]
    }));
}

#[test]
fn list_tasks_response_fields() {
    round_trip::<ListTasksResponse>(json!({
        "tasks": [{"id": "t", "status": {"state": "TASK_STATE_SUBMITTED"}}],
        "nextPageToken": "abc", "pageSize": 50, "totalSize": 1
    }));
}

#[test]
fn lenient_input() {
    // snake_case names, enum numbers, unknown fields, bare-array StringList, offset timestamps.
    let msg: Message = serde_json::from_value(json!({
        "message_id": "m", "role": 1, "parts": [{"text": "x", "media_type": "text/plain"}],
        "somethingNew": {"a": 1}
    }))
    .unwrap();
    assert_eq!(msg.message_id, "m");
    assert_eq!(msg.role(), Role::User);
    assert_eq!(msg.parts[0].media_type, "text/plain");

    let req: SecurityRequirement =
        serde_json::from_value(json!({"schemes": {"oauth": ["read", "write"]}})).unwrap();
    assert_eq!(req.schemes["oauth"].list, ["read", "write"]);

    let status: TaskStatus = serde_json::from_value(
        json!({"state": "TASK_STATE_FAILED", "timestamp": "2026-01-01T01:00:00.5+01:00"}),
    )
    .unwrap();
    assert_eq!(
        serde_json::to_value(status).unwrap()["timestamp"],
        "2026-01-01T00:00:00.500Z"
    );

    let part: Part = serde_json::from_value(json!({"raw": "aGVsbG8"})).unwrap();
    assert!(matches!(part.content, Some(part::Content::Raw(ref b)) if b.as_slice() == b"hello"));
}

#[test]
fn unknown_enum_names_are_rejected() {
    assert!(serde_json::from_value::<Message>(json!({"role": "ROLE_ROBOT"})).is_err());
}

#[test]
fn protobuf_and_json_agree() {
    use prost::Message as _;
    let task: Task = serde_json::from_value(json!({
        "id": "t", "contextId": "c", "status": {"state": "TASK_STATE_WORKING"},
        "history": [{"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "x"}, {"data": {"n": 5, "l": [0.5, null]}}]}],
        "metadata": {"k": {"nested": true}, "n": -1}
    }))
    .unwrap();
    let decoded = Task::decode(task.encode_to_vec().as_slice()).unwrap();
    assert_eq!(decoded, task);
    let printed = serde_json::to_value(&decoded).unwrap();
    assert_eq!(printed["metadata"], json!({"k": {"nested": true}, "n": -1}));
    assert_eq!(
        printed["history"][0]["parts"][1]["data"],
        json!({"n": 5, "l": [0.5, null]})
    );
}

/// Found by the ProtoJSON round-trip property test: `"data": null` is a data part holding the
/// null value (ProtoJSON's rule for `google.protobuf.Value`), not a part without content.
#[test]
fn a_null_data_part_keeps_its_null() {
    let part: Part = round_trip(json!({"data": null}));
    assert_eq!(
        part.content,
        Some(part::Content::Data(crate::wkt::Value::null()))
    );
}
