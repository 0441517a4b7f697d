//! The SSRF guard: internal addresses are refused when a config is created, and a host name
//! that resolves to an internal address is refused when the worker connects (then the dead
//! letter can be listed and replayed with the CLI).

use std::time::Duration;

use serde_json::json;

use crate::harness::Deployment;
use crate::receiver::Receiver;

#[tokio::test]
async fn private_address_urls_are_rejected_when_a_config_is_created() {
    let env = Deployment::start("127.0.0.1").await;
    let task = env
        .scenario_task(
            json!({"end": "input-required"}),
            json!({"url": "https://hooks.example.com/x"}),
            false,
        )
        .await;
    let task_id = task["id"].as_str().unwrap();
    for url in [
        "http://10.0.0.5/hook",
        "http://192.168.1.20:8080/hook",
        "http://169.254.169.254/latest/meta-data/",
        "http://[::1]:9000/hook",
        "http://0.0.0.0/hook",
        "http://localhost:9000/hook",
        "http://224.0.0.1/hook",
    ] {
        let resp = env
            .rpc(
                "CreateTaskPushNotificationConfig",
                json!({"taskId": task_id, "url": url}),
            )
            .await;
        assert_eq!(resp["error"]["code"], -32602, "{url}: {resp}");
        let text = resp["error"].to_string();
        assert!(text.contains("url"), "{url}: names the field: {text}");
        assert!(text.contains("not allowed for webhooks"), "{url}: {text}");
    }
    // The same rule for configs registered inline with SendMessage.
    let resp = env
        .rpc(
            "SendMessage",
            json!({"message": crate::harness::script_message(json!({})),
                   "configuration": {"taskPushNotificationConfig": {"url": "http://172.16.0.1/"}}}),
        )
        .await;
    assert_eq!(resp["error"]["code"], -32602, "{resp}");
    // Public URLs and allowlisted hosts are fine.
    for url in ["https://hooks.example.com/a2a", "http://127.0.0.1:9/hook"] {
        let resp = env
            .rpc(
                "CreateTaskPushNotificationConfig",
                json!({"taskId": task_id, "url": url}),
            )
            .await;
        assert!(resp.get("error").is_none(), "{url}: {resp}");
    }
}

#[tokio::test]
async fn a_host_name_resolving_to_loopback_is_refused_at_connect_time() {
    // The gateway lets `localhost` through (as if the name had resolved to a public address
    // when the config was created); the worker allows only the literal 127.0.0.1.
    let env = Deployment::start("127.0.0.1,localhost").await;
    let receiver = Receiver::start().await;
    let _worker = env.worker(&[]);
    let url = format!("http://localhost:{}/hook", receiver.addr.port());
    let task = env
        .scenario_task(json!({"chunks": 0}), json!({"url": url}), false)
        .await;
    let task_id = task["id"].as_str().unwrap().to_owned();

    let store = env.store();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let dead = loop {
        let dead = store.dead_letters(false, 100).await.unwrap();
        if dead.len() >= 3 {
            break dead;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no dead letters: {dead:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(
        receiver.requests().is_empty(),
        "nothing reached the receiver"
    );
    assert_eq!(dead[0].task_id, task_id);
    assert_eq!(dead[0].attempts, 1, "a refused address is not retried");
    assert!(
        dead[0].last_error.contains("localhost resolves to")
            && dead[0].last_error.contains("loopback"),
        "{}",
        dead[0].last_error
    );

    // The CLI lists the dead letters and, once the host is trusted, replays them in order.
    let (ok, out, err) = env.worker_command(&["dead-letters", "list"], &[]).await;
    assert!(ok, "{err}");
    assert_eq!(out.lines().count(), 4, "a header and three letters: {out}");
    assert!(out.contains(&task_id) && out.contains("loopback"), "{out}");
    let (ok, out, err) = env
        .worker_command(
            &["dead-letters", "replay", "--all"],
            &[("A2A_PUSH_ALLOWED_HOSTS", "127.0.0.1,localhost")],
        )
        .await;
    assert!(ok, "{err}");
    assert_eq!(out.matches("delivered").count(), 3, "{out}");
    let got = receiver.requests();
    assert_eq!(got.len(), 3);
    assert!(got[0].json.get("task").is_some());
    let (_, out, _) = env.worker_command(&["dead-letters", "list"], &[]).await;
    assert_eq!(out.lines().count(), 1, "nothing left to replay: {out}");
}

/// A dead letter remembers its webhook's dialect: replayed, a 0.3 webhook gets what the
/// delivery would have sent it, the Task as it was after the event in the 0.3 shape.
#[tokio::test]
async fn a_0_3_dead_letter_is_replayed_in_the_0_3_shape() {
    let env = Deployment::start("127.0.0.1,localhost").await;
    let receiver = Receiver::start().await;
    let _worker = env.worker(&[]);
    let url = format!("http://localhost:{}/hook", receiver.addr.port());
    let message = json!({"kind": "message", "messageId": uuid::Uuid::new_v4().to_string(),
        "role": "user", "metadata": {"skill": "scenario"},
        "parts": [{"kind": "text", "text": "run"}, {"kind": "data", "data": {"chunks": 0}}]});
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "message/send",
        "params": {"message": message, "configuration": {"blocking": true,
            "pushNotificationConfig": {"url": url, "token": "tok-03"}}}});
    let resp: serde_json::Value = reqwest::Client::new()
        .post(format!("{}/a2a/jsonrpc", env.gateway_url))
        .json(&body)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let task_id = resp["result"]["id"]
        .as_str()
        .expect("a 0.3 task")
        .to_owned();

    let store = env.store();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let dead = loop {
        let dead = store.dead_letters(false, 100).await.unwrap();
        if dead.iter().any(|d| {
            serde_json::to_value(&d.event).unwrap()["statusUpdate"]["status"]["state"]
                == "TASK_STATE_COMPLETED"
        }) {
            break dead;
        }
        assert!(std::time::Instant::now() < deadline, "{dead:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(dead.iter().all(|d| d.dialect == a2a_types::Dialect::V03));

    let (ok, out, err) = env
        .worker_command(
            &["dead-letters", "replay", "--all"],
            &[("A2A_PUSH_ALLOWED_HOSTS", "127.0.0.1,localhost")],
        )
        .await;
    assert!(ok, "{err}");
    assert_eq!(out.matches("delivered").count(), dead.len(), "{out}");
    let got = receiver.requests();
    assert_eq!(got.len(), dead.len());
    for r in &got {
        assert_eq!(r.json["kind"], "task", "a 0.3 payload: {}", r.json);
        assert_eq!(r.json["id"], task_id.as_str());
    }
    assert_eq!(
        got[0].json["status"]["state"], "submitted",
        "{}",
        got[0].json
    );
    assert_eq!(got.last().unwrap().json["status"]["state"], "completed");
}
