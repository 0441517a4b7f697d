//! The task lifecycle over JSON-RPC: send, blocking and non-blocking, multi-turn, cancel, the
//! scenario ends, history and context rules.

use serde_json::json;

use crate::harness::*;

#[tokio::test]
async fn echo_completes_with_the_echo_artifact() {
    let gw = TestGateway::start().await;
    let task = gw.send_text("hello").await;
    assert_eq!(state(&task), "TASK_STATE_COMPLETED");
    assert_eq!(task["artifacts"][0]["artifactId"], "echo");
    assert_eq!(task["artifacts"][0]["parts"][0]["text"], "hello");
    assert!(task["status"]["timestamp"].as_str().unwrap().ends_with('Z'));
    let id = task["id"].as_str().unwrap();
    assert_eq!(
        uuid::Uuid::parse_str(id).unwrap().get_version_num(),
        7,
        "gateway mints UUID v7"
    );
    let got = gw.ok("GetTask", json!({"id": id})).await;
    assert_eq!(got, task, "GetTask returns what SendMessage returned");
}

#[tokio::test]
async fn every_scenario_end() {
    let gw = TestGateway::start().await;
    for (end, expected) in [
        ("completed", "TASK_STATE_COMPLETED"),
        ("failed", "TASK_STATE_FAILED"),
        ("rejected", "TASK_STATE_REJECTED"),
        ("input-required", "TASK_STATE_INPUT_REQUIRED"),
        ("auth-required", "TASK_STATE_AUTH_REQUIRED"),
    ] {
        let r = gw
            .scenario(json!({"chunks": 3, "end": end}), json!({}))
            .await;
        let task = &r["task"];
        assert_eq!(state(task), expected, "end {end}");
        assert_eq!(task["artifacts"][0]["parts"].as_array().unwrap().len(), 3);
    }
    let r = gw.scenario(json!({"end": "message"}), json!({})).await;
    assert!(r.get("task").is_none());
    assert_eq!(r["message"]["role"], "ROLE_AGENT");
    assert!(
        r["message"]["contextId"]
            .as_str()
            .is_some_and(|c| !c.is_empty())
    );
    assert!(
        r["message"].get("taskId").is_none(),
        "no task exists for a direct reply"
    );
}

#[tokio::test]
async fn input_required_then_a_follow_up_completes_the_task() {
    let gw = TestGateway::start().await;
    let task = gw
        .scenario(json!({"end": "input-required"}), json!({}))
        .await["task"]
        .clone();
    assert_eq!(state(&task), "TASK_STATE_INPUT_REQUIRED");
    assert_eq!(task["status"]["message"]["role"], "ROLE_AGENT");
    let id = task["id"].as_str().unwrap();
    let ctx = task["contextId"].as_str().unwrap();

    // A mismatched contextId is rejected, not substituted.
    let mut bad = user_message("more");
    bad["taskId"] = json!(id);
    bad["contextId"] = json!("another-context");
    let resp = gw
        .rpc("SendMessage", json!({"tenant": "scenario", "message": bad}))
        .await;
    assert_eq!(resp["error"]["code"], -32602);
    assert_eq!(
        resp["error"]["data"][0]["metadata"]["field"],
        "message.contextId"
    );

    // Only the taskId: the context is inferred.
    let mut follow = user_message("here you go");
    follow["taskId"] = json!(id);
    let done = gw.ok("SendMessage", json!({"message": follow})).await["task"].clone();
    assert_eq!(state(&done), "TASK_STATE_COMPLETED");
    assert_eq!(done["id"], id);
    assert_eq!(done["contextId"], ctx);
    let texts: Vec<_> = done["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        texts,
        ["ROLE_USER", "ROLE_AGENT", "ROLE_USER"],
        "history is chronological"
    );
}

#[tokio::test]
async fn hang_then_cancel_and_cancel_of_a_completed_task() {
    let gw = TestGateway::start().await;
    let task = gw
        .scenario(json!({"end": "hang"}), json!({"returnImmediately": true}))
        .await["task"]
        .clone();
    let st = state(&task);
    assert!(
        st == "TASK_STATE_SUBMITTED" || st == "TASK_STATE_WORKING",
        "{st}"
    );
    let id = task["id"].as_str().unwrap().to_owned();
    let working = gw.ok("GetTask", json!({"id": id})).await;
    assert_ne!(state(&working), "TASK_STATE_CANCELED");
    let canceled = gw.ok("CancelTask", json!({"id": id})).await;
    assert_eq!(state(&canceled), "TASK_STATE_CANCELED");
    assert_eq!(
        state(&gw.ok("GetTask", json!({"id": id})).await),
        "TASK_STATE_CANCELED"
    );
    assert_eq!(gw.err_code("CancelTask", json!({"id": id})).await, -32002);

    let done = gw.send_text("x").await;
    let resp = gw.rpc("CancelTask", json!({"id": done["id"]})).await;
    assert_eq!(resp["error"]["code"], -32002);
    assert_eq!(resp["error"]["data"][0]["reason"], "TASK_NOT_CANCELABLE");
}

#[tokio::test]
async fn cancel_an_interrupted_task() {
    let gw = TestGateway::start().await;
    let task = gw
        .scenario(json!({"end": "input-required"}), json!({}))
        .await["task"]
        .clone();
    let canceled = gw.ok("CancelTask", json!({"id": task["id"]})).await;
    assert_eq!(state(&canceled), "TASK_STATE_CANCELED");
}

#[tokio::test]
async fn blocking_send_waits_for_the_last_chunk() {
    let gw = TestGateway::start().await;
    let r = gw
        .scenario(json!({"chunks": 5, "delayMs": 20}), json!({}))
        .await;
    let task = &r["task"];
    assert_eq!(state(task), "TASK_STATE_COMPLETED");
    let parts = task["artifacts"][0]["parts"].as_array().unwrap();
    let texts: Vec<_> = parts.iter().map(|p| p["text"].as_str().unwrap()).collect();
    assert_eq!(
        texts,
        ["chunk 0", "chunk 1", "chunk 2", "chunk 3", "chunk 4"]
    );
}

#[tokio::test]
async fn messages_to_missing_or_terminal_tasks() {
    let gw = TestGateway::start().await;
    let mut m = user_message("x");
    m["taskId"] = json!("no-such-task");
    assert_eq!(
        gw.err_code("SendMessage", json!({"message": m})).await,
        -32001
    );

    let done = gw.send_text("x").await;
    let mut m = user_message("again");
    m["taskId"] = done["id"].clone();
    let resp = gw.rpc("SendMessage", json!({"message": m})).await;
    assert_eq!(resp["error"]["code"], -32004);
    assert_eq!(resp["error"]["data"][0]["reason"], "UNSUPPORTED_OPERATION");

    // A working task does not take messages until it asks for input.
    let hanging = gw
        .scenario(json!({"end": "hang"}), json!({"returnImmediately": true}))
        .await["task"]
        .clone();
    let mut m = user_message("hey");
    m["taskId"] = hanging["id"].clone();
    assert_eq!(
        gw.err_code("SendMessage", json!({"message": m})).await,
        -32004
    );
    gw.ok("CancelTask", json!({"id": hanging["id"]})).await;
}

#[tokio::test]
async fn history_length_rules() {
    let gw = TestGateway::start().await;
    let full = gw.send_text("one").await;
    let id = full["id"].clone();
    assert_eq!(full["history"].as_array().unwrap().len(), 1);
    let none = gw
        .ok("GetTask", json!({"id": id, "historyLength": 0}))
        .await;
    assert!(
        none.get("history").is_none(),
        "historyLength 0 omits history: {none}"
    );
    let one = gw
        .ok("GetTask", json!({"id": id, "historyLength": 1}))
        .await;
    assert_eq!(one["history"].as_array().unwrap().len(), 1);
    let resp = gw
        .rpc("GetTask", json!({"id": id, "historyLength": -1}))
        .await;
    assert_eq!(resp["error"]["code"], -32602);
    assert_eq!(
        resp["error"]["data"][0]["metadata"]["field"],
        "historyLength"
    );
    let sent = gw
        .ok(
            "SendMessage",
            json!({"message": user_message("x"), "configuration": {"historyLength": 0}}),
        )
        .await;
    assert!(sent["task"].get("history").is_none());
}

#[tokio::test]
async fn a_client_context_id_is_kept() {
    let gw = TestGateway::start().await;
    let mut m = user_message("x");
    m["contextId"] = json!("my-context");
    let task = gw.ok("SendMessage", json!({"message": m})).await["task"].clone();
    assert_eq!(task["contextId"], "my-context");
    let second = gw.send_text("y").await;
    assert_ne!(
        second["contextId"], "my-context",
        "a new context per message without one"
    );
}

#[tokio::test]
async fn unsupported_part_media_types() {
    let gw = TestGateway::start().await;
    let m = json!({"messageId": "m", "role": "ROLE_USER",
                   "parts": [{"raw": "AAEC", "mediaType": "application/x-unsupported-tck-type"}]});
    let resp = gw.rpc("SendMessage", json!({"message": m})).await;
    assert_eq!(resp["error"]["code"], -32005);
    assert_eq!(
        resp["error"]["data"][0]["metadata"]["mediaType"],
        "application/x-unsupported-tck-type"
    );
    let m = json!({"messageId": "m", "role": "ROLE_USER",
                   "parts": [{"text": "# hi", "mediaType": "text/markdown"}]});
    gw.ok("SendMessage", json!({"message": m})).await;
}
