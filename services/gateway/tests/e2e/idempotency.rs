//! Safe retries: no deduplication by `messageId`; one task per `Idempotency-Key` and request;
//! the same key with another request refused; keys that never stick. Each case runs over the
//! three bindings through [`send`], which answers in one shape whatever the binding.

use std::time::Duration;

use a2a_types::v1::SendMessageRequest;
use a2a_types::v1::a2a_service_client::A2aServiceClient;
use serde_json::{Value, json};
use tonic::transport::Channel;

use crate::harness::{SseStream, TestGateway, kind, state};

#[derive(Debug, Clone, Copy)]
enum Binding {
    JsonRpc,
    Rest,
    Grpc,
}

const BINDINGS: [Binding; 3] = [Binding::JsonRpc, Binding::Rest, Binding::Grpc];

/// A refused send, as the binding put it.
#[derive(Debug)]
struct Refusal {
    /// JSON-RPC error code, HTTP status, or gRPC code (as i64).
    code: i64,
    message: String,
}

/// A SendMessage to the echo agent with `text`; the task, or how the binding refused it.
async fn send(
    gw: &TestGateway,
    binding: Binding,
    message_id: &str,
    text: &str,
    key: Option<&str>,
) -> Result<Value, Refusal> {
    let params = json!({"message": {"messageId": message_id, "role": "ROLE_USER",
                                    "parts": [{"text": text}]}});
    send_params(gw, binding, params, key).await
}

async fn send_params(
    gw: &TestGateway,
    binding: Binding,
    params: Value,
    key: Option<&str>,
) -> Result<Value, Refusal> {
    match binding {
        Binding::JsonRpc => {
            let body =
                json!({"jsonrpc": "2.0", "id": 7, "method": "SendMessage", "params": params});
            let resp = http(gw, "/a2a/jsonrpc", body, key).await;
            assert_eq!(resp.status(), 200);
            let v: Value = resp.json().await.unwrap();
            if let Some(e) = v.get("error") {
                assert_eq!(v["id"], 7, "the error carries the request id: {v}");
                return Err(Refusal {
                    code: e["code"].as_i64().unwrap(),
                    message: e["message"].as_str().unwrap_or_default().to_owned(),
                });
            }
            Ok(v["result"]["task"].clone())
        }
        Binding::Rest => {
            let resp = http(gw, "/a2a/rest/message:send", params, key).await;
            let status = resp.status().as_u16();
            let v: Value = resp.json().await.unwrap();
            if status != 200 {
                return Err(Refusal {
                    code: i64::from(status),
                    message: v["error"]["message"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned(),
                });
            }
            Ok(v["task"].clone())
        }
        Binding::Grpc => {
            let req: SendMessageRequest = serde_json::from_value(params).unwrap();
            let mut req = tonic::Request::new(req);
            req.metadata_mut()
                .insert("a2a-version", "1.0".parse().unwrap());
            if let Some(key) = key {
                req.metadata_mut()
                    .insert("idempotency-key", key.parse().unwrap());
            }
            match grpc(gw).await.send_message(req).await {
                Ok(resp) => {
                    let v = serde_json::to_value(resp.into_inner()).unwrap();
                    Ok(v["task"].clone())
                }
                Err(status) => Err(Refusal {
                    code: status.code() as i64,
                    message: status.message().to_owned(),
                }),
            }
        }
    }
}

async fn http(gw: &TestGateway, path: &str, body: Value, key: Option<&str>) -> reqwest::Response {
    let mut req = gw
        .client
        .post(gw.url(path))
        .header("content-type", "application/json")
        .header("a2a-version", "1.0")
        .body(body.to_string());
    if let Some(key) = key {
        req = req.header("idempotency-key", key);
    }
    req.send().await.unwrap()
}

async fn grpc(gw: &TestGateway) -> A2aServiceClient<Channel> {
    let channel = Channel::from_shared(format!("http://{}", gw.addr))
        .unwrap()
        .connect()
        .await
        .unwrap();
    A2aServiceClient::new(channel)
}

/// The text of echo's artifact.
fn echoed(task: &Value) -> &str {
    task["artifacts"][0]["parts"][0]["text"]
        .as_str()
        .unwrap_or_default()
}

#[tokio::test]
async fn a_reused_message_id_is_a_new_message() {
    for binding in BINDINGS {
        let gw = TestGateway::start().await;
        let a = send(&gw, binding, "m1", "hello", None).await.unwrap();
        let b = send(&gw, binding, "m1", "hi", None).await.unwrap();
        assert_ne!(a["id"], b["id"], "{binding:?}: two messages, two tasks");
        assert_eq!((echoed(&a), echoed(&b)), ("hello", "hi"), "{binding:?}");
        assert_eq!(gw.task_count().await, 2, "{binding:?}");
    }
}

#[tokio::test]
async fn one_key_and_one_request_is_one_task() {
    for binding in BINDINGS {
        let gw = TestGateway::start().await;
        let a = send(&gw, binding, "m1", "hello", Some("k-1"))
            .await
            .unwrap();
        // A retry may carry a new message id: it is what the message says that counts.
        let b = send(&gw, binding, "m2", "hello", Some("k-1"))
            .await
            .unwrap();
        assert_eq!(a, b, "{binding:?}: the same answer twice");
        assert_eq!(gw.task_count().await, 1, "{binding:?}");
        let c = send(&gw, binding, "m1", "hello", Some("k-2"))
            .await
            .unwrap();
        assert_ne!(c["id"], a["id"], "{binding:?}: another key is another send");
    }
}

#[tokio::test]
async fn one_key_with_another_request_is_refused() {
    let expected = [
        (Binding::JsonRpc, -32602),
        (Binding::Rest, 422),
        (Binding::Grpc, 3),
    ];
    for (binding, code) in expected {
        let gw = TestGateway::start().await;
        send(&gw, binding, "m1", "hello", Some("k-1"))
            .await
            .unwrap();
        let refused = send(&gw, binding, "m1", "bye", Some("k-1"))
            .await
            .unwrap_err();
        assert_eq!(refused.code, code, "{binding:?}: {refused:?}");
        assert!(
            refused.message.contains("Idempotency-Key")
                && refused.message.contains("different request"),
            "{binding:?}: {refused:?}"
        );
        assert_eq!(gw.task_count().await, 1, "{binding:?}: nothing dispatched");
    }
    // REST: the A2A error body, with the field named.
    let gw = TestGateway::start().await;
    send(&gw, Binding::Rest, "m1", "hello", Some("k"))
        .await
        .unwrap();
    let body =
        json!({"message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "x"}]}});
    let resp = http(&gw, "/a2a/rest/message:send", body, Some("k")).await;
    assert_eq!(resp.status(), 422);
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["error"]["status"], "INVALID_ARGUMENT", "{v}");
    let info = &v["error"]["details"][0];
    assert_eq!(info["metadata"]["field"], "Idempotency-Key", "{v}");
}

#[tokio::test]
async fn concurrent_retries_wait_for_the_first_and_share_its_task() {
    let gw = TestGateway::start().await;
    let params = json!({"tenant": "scenario", "message": {"messageId": "m", "role": "ROLE_USER",
        "parts": [{"data": {"chunks": 3, "delayMs": 100}}]}});
    let sends = (0..20).map(|_| send_params(&gw, Binding::JsonRpc, params.clone(), Some("same")));
    let answers = futures::future::join_all(sends).await;
    let first = answers[0].as_ref().unwrap();
    assert_eq!(state(first), "TASK_STATE_COMPLETED", "{first}");
    for a in &answers {
        assert_eq!(
            a.as_ref().unwrap(),
            first,
            "every retry gets the settled task"
        );
    }
    assert_eq!(gw.task_count().await, 1);
}

#[tokio::test]
async fn a_stream_retry_replays_the_task_and_its_events() {
    let gw = TestGateway::start().await;
    let params = json!({"tenant": "scenario", "message": {"messageId": "m", "role": "ROLE_USER",
        "parts": [{"data": {"chunks": 3, "delayMs": 50}}]}});
    let first = SseStream::new(
        gw.post_keyed("SendStreamingMessage", params.clone(), "s")
            .await,
    )
    .collect()
    .await;
    let again = SseStream::new(gw.post_keyed("SendStreamingMessage", params, "s").await)
        .collect()
        .await;
    let (k, task) = kind(&again[0].data["result"]);
    assert_eq!(k, "task");
    assert_eq!(task["id"], kind(&first[0].data["result"]).1["id"]);
    assert_eq!(
        state(task),
        "TASK_STATE_COMPLETED",
        "settled: the Task alone"
    );
    assert_eq!(gw.task_count().await, 1);
}

/// A follow-up retried with its key after its first send already moved the task on (the answer
/// was lost, e.g. with the replica that sent it): answered from that send, not refused because
/// the task no longer asks for input. Found by the system suite's random kills. A follow-up
/// under a new key on the finished task is still refused.
#[tokio::test]
async fn a_follow_up_retry_is_answered_from_its_first_send() {
    for binding in BINDINGS {
        let gw = TestGateway::start().await;
        let params = json!({"tenant": "scenario", "message": {"messageId": "m1",
            "role": "ROLE_USER", "parts": [{"data": {"end": "input-required"}}]}});
        let task = send_params(&gw, binding, params, Some("first"))
            .await
            .unwrap();
        assert_eq!(
            state(&task),
            "TASK_STATE_INPUT_REQUIRED",
            "{binding:?}: {task}"
        );
        let follow = json!({"tenant": "scenario", "message": {"messageId": "m2",
            "role": "ROLE_USER", "taskId": task["id"], "parts": [{"text": "more"}]}});
        let done = send_params(&gw, binding, follow.clone(), Some("second"))
            .await
            .unwrap();
        assert_eq!(state(&done), "TASK_STATE_COMPLETED", "{binding:?}: {done}");
        let again = send_params(&gw, binding, follow.clone(), Some("second"))
            .await
            .unwrap();
        assert_eq!(again["id"], done["id"], "{binding:?}");
        assert_eq!(
            state(&again),
            "TASK_STATE_COMPLETED",
            "{binding:?}: {again}"
        );
        assert_eq!(
            again["history"], done["history"],
            "{binding:?}: the message ran once"
        );
        let refused = send_params(&gw, binding, follow, Some("third"))
            .await
            .unwrap_err();
        assert!(
            refused.message.contains("accepts no more messages"),
            "{binding:?}: {refused:?}"
        );
    }
}

/// A send that reaches no task frees its key: the next send with it is dispatched again.
#[tokio::test]
async fn a_key_is_freed_when_no_task_was_created() {
    let gw = TestGateway::start().await;
    // Answered by a direct message.
    let params = json!({"tenant": "scenario", "message": {"messageId": "m", "role": "ROLE_USER",
        "parts": [{"data": {"end": "message"}}]}});
    for _ in 0..2 {
        let r = gw.rpc_keyed("SendMessage", params.clone(), "msg").await;
        assert!(
            r["result"]["message"].is_object(),
            "dispatched each time: {r}"
        );
    }
    // Refused by the agent before a task exists.
    let bad = json!({"tenant": "scenario", "message": {"messageId": "m", "role": "ROLE_USER",
        "parts": [{"data": {"end": "nonsense"}}]}});
    for _ in 0..2 {
        let r = gw.rpc_keyed("SendMessage", bad.clone(), "bad").await;
        assert_eq!(
            r["error"]["code"], -32602,
            "refused each time, never held: {r}"
        );
    }
    assert_eq!(gw.task_count().await, 0);
}

/// A client that hangs up (or whose gRPC deadline passes) right after sending leaves a key
/// that replays the task its send started, at once.
#[tokio::test]
async fn a_cut_off_send_leaves_a_usable_key() {
    let gw = TestGateway::start().await;
    let params = json!({"tenant": "scenario", "message": {"messageId": "m", "role": "ROLE_USER",
        "parts": [{"data": {"chunks": 2, "delayMs": 400}}]}});
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": params});
    let cut = gw
        .client
        .post(gw.url("/a2a/jsonrpc"))
        .header("content-type", "application/json")
        .header("idempotency-key", "cut")
        .timeout(Duration::from_millis(100))
        .body(body.to_string())
        .send()
        .await;
    assert!(cut.is_err(), "the client gave up first");
    let started = std::time::Instant::now();
    let r = gw.rpc_keyed("SendMessage", params.clone(), "cut").await;
    assert_eq!(state(&r["result"]["task"]), "TASK_STATE_COMPLETED", "{r}");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "no wait on a stuck key"
    );
    assert_eq!(gw.task_count().await, 1, "replayed, not dispatched twice");

    // gRPC: a deadline shorter than the turn.
    let req: SendMessageRequest = serde_json::from_value(params).unwrap();
    let keyed = |timeout: Option<Duration>| {
        let mut r = tonic::Request::new(req.clone());
        r.metadata_mut()
            .insert("a2a-version", "1.0".parse().unwrap());
        r.metadata_mut()
            .insert("idempotency-key", "grpc-cut".parse().unwrap());
        if let Some(t) = timeout {
            r.set_timeout(t);
        }
        r
    };
    let mut client = grpc(&gw).await;
    let late = client
        .send_message(keyed(Some(Duration::from_millis(100))))
        .await;
    let late = late.unwrap_err().code();
    assert!(
        matches!(late, tonic::Code::DeadlineExceeded | tonic::Code::Cancelled),
        "{late:?}"
    );
    let task = client.send_message(keyed(None)).await.unwrap().into_inner();
    let task = serde_json::to_value(task).unwrap();
    assert_eq!(state(&task["task"]), "TASK_STATE_COMPLETED", "{task}");
    assert_eq!(gw.task_count().await, 2);
}

#[tokio::test]
async fn message_ids_as_keys_when_configured() {
    let gw = TestGateway::with_config("[idempotency]\nmessage_id = true").await;
    let a = send(&gw, Binding::JsonRpc, "m1", "hello", None)
        .await
        .unwrap();
    let b = send(&gw, Binding::JsonRpc, "m1", "hello", None)
        .await
        .unwrap();
    assert_eq!(a, b, "a retried message id is answered from the first send");
    let refused = send(&gw, Binding::JsonRpc, "m1", "hi", None)
        .await
        .unwrap_err();
    assert_eq!(
        refused.code, -32602,
        "never answered with another task: {refused:?}"
    );
    // A header key still wins over the message id.
    let c = send(&gw, Binding::JsonRpc, "m1", "hi", Some("k"))
        .await
        .unwrap();
    assert_eq!(echoed(&c), "hi");
    assert_eq!(gw.task_count().await, 2);
}

#[tokio::test]
async fn keys_expire() {
    let gw = TestGateway::with_config("[idempotency]\nttl_secs = 1").await;
    let a = send(&gw, Binding::JsonRpc, "m1", "hello", Some("k"))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    let b = send(&gw, Binding::JsonRpc, "m1", "bye", Some("k"))
        .await
        .unwrap();
    assert_ne!(a["id"], b["id"], "an expired key is free");
    assert_eq!(echoed(&b), "bye");
}

#[tokio::test]
async fn the_card_declares_the_extension_and_bad_keys_are_refused() {
    let gw = TestGateway::start().await;
    let card = gw.card().await;
    let ext = card["capabilities"]["extensions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["uri"] == a2a_gateway::service::IDEMPOTENCY_EXTENSION)
        .unwrap_or_else(|| panic!("declared: {card}"));
    assert_ne!(ext["required"], true);
    // A client that activates it is told so, as for any supported extension.
    let resp = gw
        .client
        .post(gw.url("/a2a/jsonrpc"))
        .header("content-type", "application/json")
        .header(
            "a2a-extensions",
            a2a_gateway::service::IDEMPOTENCY_EXTENSION,
        )
        .body(r#"{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{}}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(
        resp.headers()["a2a-extensions"],
        a2a_gateway::service::IDEMPOTENCY_EXTENSION
    );
    let long = "k".repeat(300);
    let refused = send(&gw, Binding::Rest, "m", "x", Some(&long))
        .await
        .unwrap_err();
    assert_eq!(refused.code, 400, "{refused:?}");
    assert!(refused.message.contains("Idempotency-Key"), "{refused:?}");
}
