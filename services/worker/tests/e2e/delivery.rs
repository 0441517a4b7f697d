//! Deliveries arrive in order, with the config's Authorization and token and a signature that
//! verifies against the gateway's JWKS; a failing receiver gets the event on a later attempt.

use std::time::Duration;

use serde_json::{Value, json};

use crate::harness::{Deployment, metric};
use crate::receiver::{Receiver, describe};

#[tokio::test]
async fn every_event_of_a_streaming_task_arrives_in_order_signed_and_authorized() {
    let env = Deployment::start("127.0.0.1").await;
    let receiver = Receiver::start().await;
    let worker = env.worker(&[]);
    let url = receiver.url("/hooks/a2a?tenant=t1");
    let push = json!({"url": url, "token": "tok-123",
                      "authentication": {"scheme": "Bearer", "credentials": "s3cret"}});
    // A streaming task: SendStreamingMessage to the scenario agent, 5 chunks; the whole stream
    // is read, so the task has ended when this returns.
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage",
        "params": {"tenant": "scenario",
                   "message": crate::harness::script_message(json!({"chunks": 5, "delayMs": 5})),
                   "configuration": {"taskPushNotificationConfig": push}}});
    let sse = reqwest::Client::new()
        .post(format!("{}/a2a/jsonrpc", env.gateway_url))
        .header("a2a-version", "1.0")
        .json(&body)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let streamed = sse.matches("data:").count();
    assert_eq!(streamed, 8, "task, working, 5 chunks, completed: {sse}");

    receiver
        .wait_for(Duration::from_secs(20), |r| r.len() >= 8)
        .await;
    let got = receiver.requests();
    let seen: Vec<String> = got.iter().map(|r| describe(&r.json)).collect();
    let mut expected = vec![
        "task TASK_STATE_SUBMITTED".to_owned(),
        "status TASK_STATE_WORKING".to_owned(),
    ];
    expected.extend((0..5).map(|i| format!("chunk chunk {i}")));
    expected.push("status TASK_STATE_COMPLETED".to_owned());
    assert_eq!(seen, expected, "every event once, in order");

    let task_id = got[0].json["task"]["id"].as_str().unwrap().to_owned();
    for r in &got {
        let h = |name: &str| r.headers.get(name).map(|v| v.to_str().unwrap().to_owned());
        assert_eq!(h("authorization").as_deref(), Some("Bearer s3cret"));
        assert_eq!(h("x-a2a-notification-token").as_deref(), Some("tok-123"));
        assert_eq!(h("content-type").as_deref(), Some("application/a2a+json"));
        let jwt = h("x-a2a-push-signature").expect("a signature header");
        let claims = env.verify(&jwt, &url, &r.body).await;
        assert_eq!(claims.task_id, task_id);
        assert!(claims.exp > claims.iat);
    }
    let jtis: std::collections::HashSet<String> = got
        .iter()
        .map(|r| {
            let jwt = r.headers["x-a2a-push-signature"].to_str().unwrap();
            let payload = jwt.split('.').nth(1).unwrap();
            use base64::Engine;
            let claims: Value = serde_json::from_slice(
                &base64::engine::general_purpose::URL_SAFE_NO_PAD
                    .decode(payload)
                    .unwrap(),
            )
            .unwrap();
            claims["jti"].as_str().unwrap().to_owned()
        })
        .collect();
    assert_eq!(jtis.len(), got.len(), "a fresh jti per delivery");

    // The card advertises the JWKS.
    let card: Value = reqwest::get(format!("{}/.well-known/agent-card.json", env.gateway_url))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let ext = card["capabilities"]["extensions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["uri"] == a2a_push::SIGNATURE_EXTENSION_URI)
        .expect("the push signature extension");
    assert_eq!(
        ext["params"]["jwksUri"],
        format!("{}/.well-known/jwks.json", env.gateway_url)
    );

    // The delivery log and the metrics agree.
    let log = env.store().logged_attempts(&task_id).await.unwrap();
    assert_eq!(log.len(), 8);
    assert!(
        log.iter()
            .all(|a| a.outcome == "delivered" && a.attempt == 1)
    );
    assert_eq!(
        log.iter().map(|a| a.seq).collect::<Vec<_>>(),
        (1..=8).collect::<Vec<_>>()
    );
    let m = worker.metrics().await;
    assert_eq!(
        metric(&m, "a2a_worker_deliveries_total{outcome=\"delivered\"}"),
        8.0
    );
    assert!(m.contains("a2a_worker_attempt_duration_seconds_count 8"));
    assert!(m.contains("a2a_worker_consumer_lag"));
    assert!(m.contains("a2a_build_info{binary=\"a2a-worker\""), "{m}");
    assert!(m.contains("\nprocess_resident_memory_bytes "), "{m}");
}

#[tokio::test]
async fn a_receiver_answering_500_twice_gets_the_event_on_the_third_attempt() {
    let env = Deployment::start("127.0.0.1").await;
    let receiver = Receiver::start_failing(2).await;
    let _worker = env.worker(&[]);
    let task = env
        .scenario_task(
            json!({"chunks": 0}),
            json!({"url": receiver.url("/hook")}),
            false,
        )
        .await;
    let task_id = task["id"].as_str().unwrap().to_owned();
    receiver
        .wait_for(Duration::from_secs(20), |r| {
            r.iter().filter(|x| x.status == 200).count() >= 3
        })
        .await;
    let got = receiver.requests();
    let statuses: Vec<u16> = got.iter().take(3).map(|r| r.status).collect();
    assert_eq!(statuses, [500, 500, 200]);
    assert_eq!(
        got[0].body, got[2].body,
        "the same event, offered three times"
    );
    assert!(
        got[2].json.get("task").is_some(),
        "the first event is the Task"
    );
    // Then the rest in order, each once.
    let rest: Vec<&str> = got[3..]
        .iter()
        .filter_map(|r| r.json["statusUpdate"]["status"]["state"].as_str())
        .collect();
    assert_eq!(rest, ["TASK_STATE_WORKING", "TASK_STATE_COMPLETED"]);

    let store = env.store();
    let log = loop {
        let log = store.logged_attempts(&task_id).await.unwrap();
        if log.len() >= 5 {
            break log;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let first: Vec<(u32, &str, Option<u16>)> = log
        .iter()
        .filter(|a| a.seq == 1)
        .map(|a| (a.attempt, a.outcome.as_str(), a.status))
        .collect();
    assert_eq!(
        first,
        [
            (1, "retry", Some(500)),
            (2, "retry", Some(500)),
            (3, "delivered", Some(200))
        ]
    );
}

/// A webhook registered by a 0.3 client (`message/stream`, no version header) gets the 0.3
/// payload from the worker: the Task after each event, in the 0.3 shape (`kind`, kebab-case
/// states), with the config's token and Authorization; a 1.0 config of the same task keeps
/// getting StreamResponses.
#[tokio::test]
async fn a_0_3_config_gets_the_task_in_the_0_3_shape() {
    let env = Deployment::start("127.0.0.1").await;
    let (r03, r10) = (Receiver::start().await, Receiver::start().await);
    let worker = env.worker(&[]);
    let message = json!({"kind": "message", "messageId": uuid::Uuid::new_v4().to_string(),
        "role": "user", "metadata": {"skill": "scenario"},
        "parts": [{"kind": "text", "text": "run"},
                  {"kind": "data", "data": {"chunks": 2, "delayMs": 1000}}]});
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "message/stream",
        "params": {"message": message, "configuration": {"pushNotificationConfig": {
            "url": r03.url("/hook"), "token": "tok-03",
            "authentication": {"schemes": ["Bearer"], "credentials": "s3"}}}}});
    let resp = reqwest::Client::new()
        .post(format!("{}/a2a/jsonrpc", env.gateway_url))
        .json(&body)
        .send()
        .await
        .unwrap();
    let mut sse = resp.bytes_stream();
    use futures::StreamExt;
    // The first event names the task; a 1.0 client adds its webhook while the task runs (its
    // chunks a second apart leave time for that on a loaded machine: a config added after the
    // end would get the finished task, not the completion event this test waits for).
    let first = sse.next().await.unwrap().unwrap();
    let events = a2a_client::sse::SseParser::new(1 << 20)
        .push(&first)
        .unwrap();
    let task_id = serde_json::from_str::<Value>(&events[0].data).unwrap()["result"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let r = env
        .rpc(
            "CreateTaskPushNotificationConfig",
            json!({"taskId": task_id, "url": r10.url("/hook"), "token": "tok-10"}),
        )
        .await;
    assert!(r.get("error").is_none(), "{r}");
    while sse.next().await.is_some() {}

    let completed = |j: &Value| j["status"]["state"] == "completed";
    r03.wait_for(Duration::from_secs(20), |r| {
        r.iter().any(|x| completed(&x.json))
    })
    .await;
    r10.wait_for(Duration::from_secs(20), |r| {
        r.iter()
            .any(|x| describe(&x.json) == "status TASK_STATE_COMPLETED")
    })
    .await;
    let got = r03.requests();
    let states: Vec<&str> = got
        .iter()
        .map(|r| r.json["status"]["state"].as_str().unwrap())
        .collect();
    assert_eq!(states.first(), Some(&"submitted"), "{states:?}");
    assert_eq!(states.last(), Some(&"completed"), "{states:?}");
    for r in &got {
        assert_eq!(r.json["kind"], "task", "{}", r.json);
        assert_eq!(r.json["id"], task_id.as_str());
        let h = |name: &str| r.headers.get(name).map(|v| v.to_str().unwrap().to_owned());
        assert_eq!(h("x-a2a-notification-token").as_deref(), Some("tok-03"));
        assert_eq!(h("authorization").as_deref(), Some("Bearer s3"));
        let jwt = h("x-a2a-push-signature").expect("a signature header");
        env.verify(&jwt, &r03.url("/hook"), &r.body).await;
    }
    let last = &got.last().unwrap().json;
    assert_eq!(
        last["artifacts"][0]["parts"].as_array().unwrap().len(),
        2,
        "{last}"
    );
    assert_eq!(last["artifacts"][0]["parts"][0]["kind"], "text");
    for r in r10.requests() {
        assert!(r.json.get("kind").is_none(), "a 1.0 payload: {}", r.json);
        assert!(!describe(&r.json).starts_with("other"), "{}", r.json);
    }
    drop(worker);
}
