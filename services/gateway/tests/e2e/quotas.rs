//! Per-owner quotas (`[limits.quotas]`), the `builtin_agents` switch and the maximum turn
//! duration, against a real gateway: each quota refuses the request past it with the binding's
//! resource-exhausted error naming the quota (JSON-RPC -32090, HTTP 429, gRPC
//! RESOURCE_EXHAUSTED), and frees when what it counts ends.

use std::time::{Duration, Instant};

use a2a_types::v1::a2a_service_client::A2aServiceClient;
use a2a_types::v1::{Message, Part, Role, SendMessageRequest, part};
use serde_json::{Value, json};
use tonic_types::StatusExt;

use crate::harness::*;
use crate::upstream::{front, script, task_until, upstream};

/// Checks a JSON-RPC error object: -32090 with ErrorInfo QUOTA_EXCEEDED naming `quota`.
pub(crate) fn assert_quota_error(error: &Value, quota: &str, limit: u64) {
    assert_eq!(error["code"], -32090, "{error}");
    let info = &error["data"][0];
    assert_eq!(info["reason"], "QUOTA_EXCEEDED", "{error}");
    assert_eq!(info["metadata"]["quota"], quota, "{error}");
    assert_eq!(info["metadata"]["limit"], limit.to_string(), "{error}");
    assert!(
        error["message"].as_str().unwrap().contains(quota),
        "the message names the quota: {error}"
    );
}

/// The JSON-RPC error of a call that must be refused.
pub(crate) async fn refused(gw: &TestGateway, method: &str, params: Value) -> Value {
    let resp = gw.rpc(method, params).await;
    assert!(resp.get("error").is_some(), "{method} should fail: {resp}");
    resp["error"].clone()
}

/// A REST call's status and body.
pub(crate) async fn rest(gw: &TestGateway, path: &str, body: Value) -> (u16, Value) {
    let resp = gw
        .client
        .post(gw.url(&format!("/a2a/rest{path}")))
        .header("content-type", "application/json")
        .header("a2a-version", "1.0")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    let text = resp.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

/// Checks a REST refusal: HTTP 429, status RESOURCE_EXHAUSTED, ErrorInfo naming `quota`.
pub(crate) fn assert_rest_quota(status: u16, body: &Value, quota: &str) {
    assert_eq!(status, 429, "{body}");
    assert_eq!(body["error"]["status"], "RESOURCE_EXHAUSTED", "{body}");
    assert_eq!(body["error"]["details"][0]["reason"], "QUOTA_EXCEEDED");
    assert_eq!(body["error"]["details"][0]["metadata"]["quota"], quota);
}

/// Retries `attempt` until it returns `Some` (at most 5 s): a quota frees when the server has
/// dropped what held it, a moment after the client saw it end.
async fn eventually<T>(mut attempt: impl AsyncFnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        if let Some(v) = attempt().await {
            return v;
        }
        assert!(Instant::now() < deadline, "the quota was not freed in 5 s");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The value of the counter `series` (name and labels, as Prometheus prints them) on the
/// gateway's admin listener; 0 while it has not been recorded.
pub(crate) async fn counter(gw: &TestGateway, series: &str) -> f64 {
    crate::metrics::Scrape::take(gw).await.series(series)
}

fn hang() -> Value {
    json!({"tenant": "scenario", "message": script_message(json!({"end": "hang"}))})
}

fn hang_now() -> Value {
    json!({"tenant": "scenario", "message": script_message(json!({"end": "hang"})),
           "configuration": {"returnImmediately": true}})
}

pub(crate) fn grpc_hang() -> SendMessageRequest {
    let data: a2a_types::wkt::Value = serde_json::from_value(json!({"end": "hang"})).unwrap();
    SendMessageRequest {
        tenant: "scenario".into(),
        message: Some(Message {
            message_id: uuid::Uuid::new_v4().to_string(),
            role: Role::User as i32,
            parts: vec![Part {
                content: Some(part::Content::Data(data)),
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// One open stream per owner: the second is refused on all three bindings; once the first
/// ends (its task canceled), a stream opens again.
#[tokio::test]
async fn a_second_stream_is_refused_on_every_binding_until_the_first_ends() {
    let gw = TestGateway::with_config("[limits.quotas]\nstreams_per_owner = 1").await;
    let mut open = gw.stream("SendStreamingMessage", hang()).await;
    let first = open.next().await.expect("the Task");
    let id = first.data["result"]["task"]["id"]
        .as_str()
        .unwrap()
        .to_owned();

    let error = refused(&gw, "SendStreamingMessage", hang()).await;
    assert_quota_error(&error, "streams_per_owner", 1);
    let error = refused(&gw, "SubscribeToTask", json!({"id": id})).await;
    assert_quota_error(&error, "streams_per_owner", 1);
    let (status, body) = rest(
        &gw,
        "/scenario/message:stream",
        json!({"message": script_message(json!({"end": "hang"}))}),
    )
    .await;
    assert_rest_quota(status, &body, "streams_per_owner");

    let channel = tonic::transport::Channel::from_shared(format!("http://{}", gw.addr))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut grpc = A2aServiceClient::new(channel);
    let mut request = tonic::Request::new(grpc_hang());
    request
        .metadata_mut()
        .insert("a2a-version", "1.0".parse().unwrap());
    let status = grpc.send_streaming_message(request).await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::ResourceExhausted, "{status:?}");
    let info = status.get_error_details().error_info().cloned().unwrap();
    assert_eq!(info.reason, "QUOTA_EXCEEDED");
    assert_eq!(info.metadata["quota"], "streams_per_owner");
    assert_eq!(info.metadata["limit"], "1");
    assert!(status.message().contains("streams_per_owner"), "{status:?}");

    // The task's end closes the stream, which gives its place back.
    gw.ok("CancelTask", json!({"id": id})).await;
    let rest_of_it = open.collect().await;
    assert!(!rest_of_it.is_empty());
    let resp = eventually(async || {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage",
                          "params": hang()});
        let resp = gw.post_raw(body.to_string()).await;
        let sse = resp.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream");
        sse.then_some(resp)
    })
    .await;
    let mut stream = SseStream::new(resp);
    assert!(stream.next().await.is_some(), "a stream opens again");
}

/// Running turns per owner: past the limit a send is refused (nothing dispatched, no task);
/// a canceled turn frees its place; another owner is not affected.
#[tokio::test]
async fn running_turns_are_bounded_per_owner_and_freed_by_cancel() {
    let gw = TestGateway::with_admin("[limits.quotas]\nrunning_turns_per_owner = 2").await;
    let series = r#"a2a_quota_refusals_total{quota="running_turns_per_owner"}"#;
    let refusals = counter(&gw, series).await;
    let a = gw.ok("SendMessage", hang_now()).await["task"]["id"].clone();
    let keyed = hang_now();
    let b = gw.rpc_keyed("SendMessage", keyed.clone(), "quota-k").await;
    let before = gw.task_count().await;
    // A retry answered from its first send starts no turn: it is not refused.
    let again = gw.rpc_keyed("SendMessage", keyed, "quota-k").await;
    assert_eq!(
        again["result"]["task"]["id"], b["result"]["task"]["id"],
        "{again}"
    );
    let error = refused(&gw, "SendMessage", hang_now()).await;
    assert_quota_error(&error, "running_turns_per_owner", 2);
    // Any send starts a turn, an echo too.
    let error = refused(&gw, "SendMessage", json!({"message": user_message("hi")})).await;
    assert_quota_error(&error, "running_turns_per_owner", 2);
    let (status, body) = rest(&gw, "/message:send", json!({"message": user_message("hi")})).await;
    assert_rest_quota(status, &body, "running_turns_per_owner");
    assert_eq!(
        gw.task_count().await,
        before,
        "a refused send creates no task"
    );
    // The recorder is one per process: other tests may add to it, never take away.
    assert!(counter(&gw, series).await >= refusals + 3.0);

    gw.ok("CancelTask", json!({"id": a})).await;
    eventually(async || {
        let resp = gw
            .rpc("SendMessage", json!({"message": user_message("hi")}))
            .await;
        resp.get("result").map(|_| ())
    })
    .await;
}

/// Blocking sends per owner: while one waits for its task, a second blocking send is refused,
/// a `returnImmediately` send is not; once the first has its answer, blocking works again.
#[tokio::test]
async fn concurrent_blocking_sends_are_bounded() {
    let gw = std::sync::Arc::new(
        TestGateway::with_config("[limits.quotas]\nblocking_sends_per_owner = 1").await,
    );
    let slow = json!({"tenant": "scenario",
                      "message": script_message(json!({"chunks": 2, "delayMs": 1500}))});
    let waiting = tokio::spawn({
        let gw = gw.clone();
        async move { gw.ok("SendMessage", slow).await }
    });
    // The first send waits once its task exists.
    eventually(async || (gw.task_count().await > 0).then_some(())).await;
    let error = refused(&gw, "SendMessage", json!({"message": user_message("b")})).await;
    assert_quota_error(&error, "blocking_sends_per_owner", 1);
    let quick = json!({"message": user_message("c"), "configuration": {"returnImmediately": true}});
    gw.ok("SendMessage", quick).await;

    let done = waiting.await.unwrap();
    assert_eq!(state(&done["task"]), "TASK_STATE_COMPLETED", "{done}");
    eventually(async || {
        let resp = gw
            .rpc("SendMessage", json!({"message": user_message("d")}))
            .await;
        resp.get("result").map(|_| ())
    })
    .await;
}

/// Push configs per task and per owner, counted in the store: refused past each bound
/// (JSON-RPC and HTTP+JSON), a replacement is not a new config, a deletion frees.
#[tokio::test]
async fn push_configs_are_bounded_per_task_and_per_owner() {
    let gw = TestGateway::with_config(
        "[limits.quotas]\npush_configs_per_task = 2\npush_configs_per_owner = 3",
    )
    .await;
    let t1 = gw.send_text("one").await["id"].as_str().unwrap().to_owned();
    let t2 = gw.send_text("two").await["id"].as_str().unwrap().to_owned();
    let cfg = |task: &str, id: &str| json!({"taskId": task, "id": id, "url": format!("https://hooks.example.com/{id}")});
    gw.ok("CreateTaskPushNotificationConfig", cfg(&t1, "a"))
        .await;
    gw.ok("CreateTaskPushNotificationConfig", cfg(&t1, "b"))
        .await;
    let error = refused(&gw, "CreateTaskPushNotificationConfig", cfg(&t1, "c")).await;
    assert_quota_error(&error, "push_configs_per_task", 2);
    let (status, body) = rest(
        &gw,
        &format!("/tasks/{t1}/pushNotificationConfigs"),
        cfg(&t1, "c"),
    )
    .await;
    assert_rest_quota(status, &body, "push_configs_per_task");
    gw.ok("CreateTaskPushNotificationConfig", cfg(&t1, "b"))
        .await;

    gw.ok("CreateTaskPushNotificationConfig", cfg(&t2, "a"))
        .await;
    let error = refused(&gw, "CreateTaskPushNotificationConfig", cfg(&t2, "b")).await;
    assert_quota_error(&error, "push_configs_per_owner", 3);

    gw.ok(
        "DeleteTaskPushNotificationConfig",
        json!({"taskId": t1, "id": "a"}),
    )
    .await;
    gw.ok("CreateTaskPushNotificationConfig", cfg(&t2, "b"))
        .await;
}

/// `builtin_agents = ["echo"]`: a message for `scenario` is refused as for an unknown agent
/// (-32602 naming `tenant`, HTTP 400), saying it is not enabled; the card leaves it out.
#[tokio::test]
async fn the_scenario_agent_is_refused_where_disabled() {
    let gw = TestGateway::with_config("builtin_agents = [\"echo\"]").await;
    let error = refused(&gw, "SendMessage", hang_now()).await;
    assert_eq!(error["code"], -32602, "{error}");
    assert_eq!(error["data"][0]["metadata"]["field"], "tenant", "{error}");
    assert!(
        error["message"].as_str().unwrap().contains("not enabled"),
        "{error}"
    );
    let (status, body) = rest(
        &gw,
        "/scenario/message:send",
        json!({"message": user_message("x")}),
    )
    .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(gw.task_count().await, 0);
    assert_eq!(
        state(&gw.send_text("echo still works").await),
        "TASK_STATE_COMPLETED"
    );
    let card = gw.card().await.to_string();
    assert!(!card.contains("\"scenario\""), "{card}");
}

/// A built-in agent's turn past its `max_turn_secs` ends FAILED with a message saying so.
#[tokio::test]
async fn a_turn_past_its_maximum_duration_fails() {
    let gw = TestGateway::with_admin("[limits.builtin_max_turn_secs]\nscenario = 1").await;
    let series = r#"a2a_turns_timed_out_total{agent="scenario"}"#;
    let timed_out = counter(&gw, series).await;
    let started = Instant::now();
    let sent = gw.ok("SendMessage", hang_now()).await;
    let id = sent["task"]["id"].as_str().unwrap().to_owned();
    let task = task_until(&gw, &id, |t| state(t) == "TASK_STATE_FAILED").await;
    assert!(started.elapsed() >= Duration::from_millis(900));
    let text = task["status"]["message"]["parts"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(
        text.contains("scenario") && text.contains("maximum duration of 1 s"),
        "{task}"
    );
    assert!(counter(&gw, series).await >= timed_out + 1.0);
    // Echo (another agent) keeps the default bound.
    assert_eq!(state(&gw.send_text("quick").await), "TASK_STATE_COMPLETED");
}

/// An upstream agent's turn past its `[[agents]] max_turn_secs`: the task fails, and the
/// upstream's task is canceled (the call is not left running there).
#[tokio::test]
async fn an_upstream_turn_past_its_maximum_duration_fails_and_is_canceled_upstream() {
    let up = upstream("").await;
    let gw = front(&up, "max_turn_secs = 1").await;
    let sent = gw
        .ok(
            "SendMessage",
            script(
                "up",
                json!({"end": "hang"}),
                json!({"returnImmediately": true}),
            ),
        )
        .await;
    let id = sent["task"]["id"].as_str().unwrap().to_owned();
    let task = task_until(&gw, &id, |t| state(t) == "TASK_STATE_FAILED").await;
    assert!(
        task.to_string().contains("maximum duration of 1 s"),
        "{task}"
    );
    eventually(async || {
        let theirs = up.ok("ListTasks", json!({})).await;
        (state(&theirs["tasks"][0]) == "TASK_STATE_CANCELED").then_some(())
    })
    .await;
}

/// A send whose inline push config is past the owner's bound is refused with the quota, and
/// nothing of it is stored: the config's quota is checked in the same write as its task's, so
/// the owner holds exactly the task it had.
#[tokio::test]
async fn an_inline_push_config_past_the_quota_refuses_its_send() {
    let gw = TestGateway::with_config("[limits.quotas]\npush_configs_per_owner = 1").await;
    let first = gw.send_text("one").await["id"].as_str().unwrap().to_owned();
    let cfg = json!({"taskId": first, "url": "https://hooks.example.com/1"});
    gw.ok("CreateTaskPushNotificationConfig", cfg).await;
    let params = json!({"message": user_message("two"), "configuration": {
        "taskPushNotificationConfig": {"url": "https://hooks.example.com/2"}}});
    let error = refused(&gw, "SendMessage", params).await;
    assert_quota_error(&error, "push_configs_per_owner", 1);
    let tasks = gw.ok("ListTasks", json!({})).await;
    let ids: Vec<&str> = tasks["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["id"].as_str())
        .collect();
    assert_eq!(ids, [first.as_str()], "{tasks}");
}

/// A client that goes away gives its places back: a dropped stream (its task still running)
/// and an abandoned blocking send.
#[tokio::test]
async fn a_client_disconnect_frees_its_stream_and_its_blocking_send() {
    let gw = TestGateway::with_config(
        "[limits.quotas]\nstreams_per_owner = 1\nblocking_sends_per_owner = 1",
    )
    .await;
    let mut open = gw.stream("SendStreamingMessage", hang()).await;
    open.next().await.expect("the Task");
    let error = refused(&gw, "SendStreamingMessage", hang()).await;
    assert_quota_error(&error, "streams_per_owner", 1);
    drop(open);
    let mut again = eventually(async || {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage",
                          "params": hang()});
        let resp = gw.post_raw(body.to_string()).await;
        let sse = resp.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream");
        sse.then_some(SseStream::new(resp))
    })
    .await;
    assert!(again.next().await.is_some());

    // A blocking send on a hanging task, given up by its client.
    let client = reqwest::Client::new();
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": hang()});
    let waiting = tokio::spawn(
        client
            .post(gw.url("/a2a/jsonrpc"))
            .header("content-type", "application/json")
            .header("a2a-version", "1.0")
            .body(body.to_string())
            .send(),
    );
    eventually(async || {
        let resp = gw
            .rpc("SendMessage", json!({"message": user_message("b")}))
            .await;
        (resp["error"]["code"] == -32090).then_some(())
    })
    .await;
    waiting.abort();
    drop(client);
    eventually(async || {
        let resp = gw
            .rpc("SendMessage", json!({"message": user_message("c")}))
            .await;
        resp.get("result").map(|_| ())
    })
    .await;
}
