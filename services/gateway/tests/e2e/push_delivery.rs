//! Push that is advertised works. The embedded gateway (in-memory store) delivers push
//! notifications itself, with the worker's pipeline: every event in order, signed with a key of
//! the JWKS it serves, retried until the receiver takes it. On PostgreSQL without Redis nothing
//! can deliver them (the worker reads the Redis stream), so push is not offered there: the card
//! says so and every push operation answers PushNotificationNotSupported on every binding.

use std::time::Duration;

use a2a_testing::receiver::{Receiver, describe, task_id_of, verify};
use a2a_types::v1::a2a_service_client::A2aServiceClient;
use a2a_types::v1::{
    ListTaskPushNotificationConfigsRequest, SendMessageConfiguration, SendMessageRequest,
    TaskPushNotificationConfig,
};
use serde_json::{Value, json};
use tonic::Code;
use tonic_types::StatusExt;

use crate::harness::*;

/// Receivers run on 127.0.0.1 (internal, so allowed explicitly); short backoff for the retries.
const EMBEDDED: &str = r#"
[push]
allowed_hosts = ["127.0.0.1"]
backoff_base_ms = 50
backoff_max_ms = 200
"#;

#[tokio::test]
async fn the_embedded_gateway_delivers_every_event_in_order_signed_and_retried() {
    let gw = TestGateway::embedded(EMBEDDED).await;
    assert_eq!(gw.card().await["capabilities"]["pushNotifications"], true);
    // The receiver fails the first two attempts: the first event is retried, and the later ones
    // wait behind it (per-task order).
    let receiver = Receiver::start_failing(2).await;
    let url = receiver.url("/hooks/a2a");
    let push = json!({"url": url, "token": "tok-1",
                      "authentication": {"scheme": "Bearer", "credentials": "s3cret"}});
    let mut stream = gw
        .stream(
            "SendStreamingMessage",
            json!({"tenant": "scenario",
                   "message": script_message(json!({"chunks": 5, "delayMs": 5})),
                   "configuration": {"taskPushNotificationConfig": push}}),
        )
        .await;
    let mut streamed = 0;
    while stream.next().await.is_some() {
        streamed += 1;
    }
    assert_eq!(streamed, 8, "task, working, 5 chunks, completed");

    let delivered =
        |r: &[a2a_testing::receiver::Received]| r.iter().filter(|r| r.status == 200).count();
    receiver
        .wait_for(Duration::from_secs(20), |r| delivered(r) >= 8)
        .await;
    let got = receiver.requests();
    let seen: Vec<(String, u16)> = got.iter().map(|r| (describe(&r.json), r.status)).collect();
    let submitted = "task TASK_STATE_SUBMITTED".to_owned();
    let mut expected = vec![
        (submitted.clone(), 500),
        (submitted.clone(), 500),
        (submitted, 200),
        ("status TASK_STATE_WORKING".to_owned(), 200),
    ];
    expected.extend((0..5).map(|i| (format!("chunk chunk {i}"), 200)));
    expected.push(("status TASK_STATE_COMPLETED".to_owned(), 200));
    assert_eq!(
        seen, expected,
        "each event once delivered, in order, after two retries"
    );

    let task_id = task_id_of(&got[0].json).to_owned();
    assert!(!task_id.is_empty());
    for r in &got {
        let h = |name: &str| r.headers.get(name).map(|v| v.to_str().unwrap().to_owned());
        assert_eq!(h("authorization").as_deref(), Some("Bearer s3cret"));
        assert_eq!(h("x-a2a-notification-token").as_deref(), Some("tok-1"));
        assert_eq!(h("content-type").as_deref(), Some("application/a2a+json"));
        assert_eq!(task_id_of(&r.json), task_id);
        let jwt = h("x-a2a-push-signature").expect("a signature header");
        let claims = verify(&gw.url(""), &jwt, &url, &r.body).await;
        assert_eq!(claims.task_id, task_id);
    }
    // The card tells receivers where the keys are.
    let card = gw.card().await;
    let ext = card["capabilities"]["extensions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["uri"] == a2a_push::SIGNATURE_EXTENSION_URI)
        .expect("the push signature extension");
    assert_eq!(ext["params"]["jwksUri"], gw.url("/.well-known/jwks.json"));
}

/// A config added to a task that already exists starts at the task's current state, then
/// every later event, as on PostgreSQL.
#[tokio::test]
async fn a_config_added_later_starts_at_the_current_event() {
    let gw = TestGateway::embedded(EMBEDDED).await;
    let receiver = Receiver::start().await;
    let task = gw
        .scenario(json!({"end": "input-required"}), json!({}))
        .await["task"]
        .clone();
    let tid = task["id"].as_str().unwrap();
    assert_eq!(task["status"]["state"], "TASK_STATE_INPUT_REQUIRED");
    gw.ok(
        "CreateTaskPushNotificationConfig",
        json!({"taskId": tid, "url": receiver.url("/later")}),
    )
    .await;
    let mut answer = user_message("go on");
    answer["taskId"] = json!(tid);
    let done = gw.ok("SendMessage", json!({"message": answer})).await;
    let end = done["task"]["status"]["state"].clone();
    assert!(end.is_string(), "{done}");
    let ended = |r: &[a2a_testing::receiver::Received]| {
        r.last()
            .is_some_and(|r| r.json["statusUpdate"]["status"]["state"] == end)
    };
    receiver.wait_for(Duration::from_secs(20), ended).await;
    let seen: Vec<String> = receiver
        .requests()
        .iter()
        .map(|r| describe(&r.json))
        .collect();
    assert_eq!(
        seen.first().map(String::as_str),
        Some("status TASK_STATE_INPUT_REQUIRED"),
        "the state when the config was added comes first: {seen:?}"
    );
    assert!(seen.len() >= 2, "then the events after it: {seen:?}");
}

#[tokio::test]
async fn postgres_without_redis_offers_no_push_on_any_binding() {
    let db = a2a_testing::TestDatabase::create().await;
    let gw = TestGateway::with_database("", db.url()).await;
    assert_eq!(gw.card().await["capabilities"]["pushNotifications"], false);
    let tid = gw.send_text("x").await["id"].as_str().unwrap().to_owned();

    // JSON-RPC: -32003.
    for (method, params) in [
        (
            "CreateTaskPushNotificationConfig",
            json!({"taskId": tid, "url": "https://hooks.example.com/a"}),
        ),
        (
            "GetTaskPushNotificationConfig",
            json!({"taskId": tid, "id": "c"}),
        ),
        ("ListTaskPushNotificationConfigs", json!({"taskId": tid})),
        (
            "DeleteTaskPushNotificationConfig",
            json!({"taskId": tid, "id": "c"}),
        ),
        (
            "SendMessage",
            json!({"message": user_message("y"), "configuration":
                   {"taskPushNotificationConfig": {"url": "https://hooks.example.com/a"}}}),
        ),
    ] {
        let r = gw.rpc(method, params).await;
        assert_eq!(r["error"]["code"], -32003, "{method}: {r}");
    }

    // HTTP+JSON: 400 with the reason.
    let base = gw.url(&format!("/a2a/rest/tasks/{tid}/pushNotificationConfigs"));
    let create = json!({"url": "https://hooks.example.com/a"}).to_string();
    let send = json!({"message": user_message("y"), "configuration":
                      {"taskPushNotificationConfig": {"url": "https://hooks.example.com/a"}}})
    .to_string();
    for (method, url, body) in [
        (reqwest::Method::POST, base.clone(), Some(create)),
        (reqwest::Method::GET, base.clone(), None),
        (reqwest::Method::GET, format!("{base}/c"), None),
        (reqwest::Method::DELETE, format!("{base}/c"), None),
        (
            reqwest::Method::POST,
            gw.url("/a2a/rest/message:send"),
            Some(send),
        ),
    ] {
        let mut req = gw
            .client
            .request(method.clone(), &url)
            .header("a2a-version", "1.0");
        if let Some(body) = body {
            req = req.header("content-type", "application/json").body(body);
        }
        let resp = req.send().await.unwrap();
        assert_eq!(resp.status(), 400, "{method} {url}");
        let body: Value = resp.json().await.unwrap();
        assert_eq!(
            body["error"]["details"][0]["reason"], "PUSH_NOTIFICATION_NOT_SUPPORTED",
            "{method} {url}: {body}"
        );
    }

    // gRPC: FAILED_PRECONDITION.
    let channel = tonic::transport::Channel::from_shared(gw.url(""))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut c = A2aServiceClient::new(channel);
    let config = TaskPushNotificationConfig {
        task_id: tid.clone(),
        url: "https://hooks.example.com/a".into(),
        ..Default::default()
    };
    let statuses = [
        c.create_task_push_notification_config(versioned(config.clone()))
            .await
            .unwrap_err(),
        c.list_task_push_notification_configs(versioned(ListTaskPushNotificationConfigsRequest {
            task_id: tid.clone(),
            ..Default::default()
        }))
        .await
        .unwrap_err(),
        c.send_message(versioned(SendMessageRequest {
            message: Some(serde_json::from_value(user_message("y")).unwrap()),
            configuration: Some(SendMessageConfiguration {
                task_push_notification_config: Some(config),
                ..Default::default()
            }),
            ..Default::default()
        }))
        .await
        .unwrap_err(),
    ];
    for status in statuses {
        assert_eq!(status.code(), Code::FailedPrecondition, "{status:?}");
        let info = status.get_details_error_info().expect("an ErrorInfo");
        assert_eq!(info.reason, "PUSH_NOTIFICATION_NOT_SUPPORTED");
    }
}

/// A gRPC request with `a2a-version: 1.0`.
fn versioned<T>(message: T) -> tonic::Request<T> {
    let mut r = tonic::Request::new(message);
    r.metadata_mut()
        .insert("a2a-version", "1.0".parse().unwrap());
    r
}
