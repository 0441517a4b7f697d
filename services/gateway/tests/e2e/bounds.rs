//! Per-owner bounds (issue 26 item 5) against a real gateway: interrupted tasks count against
//! `open_tasks_per_owner` and expire after `interrupted_task_ttl` (CANCELED, seen by a
//! follower); `stored_bytes_per_owner` refuses a message past it; each refusal is the binding's
//! resource-exhausted error naming the quota. And bearer requests are not queued behind JWKS
//! refetches while the issuer hangs.

use std::time::{Duration, Instant};

use a2a_client::BindingKind;
use a2a_types::v1::a2a_service_client::A2aServiceClient;
use jsonwebtoken::Algorithm;
use serde_json::{Value, json};
use tonic_types::StatusExt;

use crate::auth::{WRITE, bearer, client, config as auth_config, send};
use crate::harness::*;
use crate::issuer::Issuer;
use crate::quotas::{assert_quota_error, assert_rest_quota, counter, grpc_hang, refused, rest};

fn ask() -> Value {
    json!({"tenant": "scenario", "message": script_message(json!({"end": "input-required"}))})
}

/// The gRPC refusal of a send, checked: RESOURCE_EXHAUSTED naming `quota`.
async fn grpc_refused(gw: &TestGateway, quota: &str, request: a2a_types::v1::SendMessageRequest) {
    let channel = tonic::transport::Channel::from_shared(format!("http://{}", gw.addr))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut grpc = A2aServiceClient::new(channel);
    let mut request = tonic::Request::new(request);
    request
        .metadata_mut()
        .insert("a2a-version", "1.0".parse().unwrap());
    let status = grpc.send_message(request).await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::ResourceExhausted, "{status:?}");
    let info = status.get_error_details().error_info().cloned().unwrap();
    assert_eq!(info.reason, "QUOTA_EXCEEDED");
    assert_eq!(info.metadata["quota"], quota);
}

/// Tasks waiting for input hold their owner's places: past `open_tasks_per_owner` a new task is
/// refused on all three bindings (the old per-turn quota stopped counting them); answering one
/// of them is not a new task; another owner is not affected; a canceled one frees its place.
#[tokio::test]
async fn interrupted_tasks_count_against_open_tasks_per_owner() {
    let gw = TestGateway::with_admin("[limits.quotas]\nopen_tasks_per_owner = 2").await;
    let series = r#"a2a_quota_refusals_total{quota="open_tasks_per_owner"}"#;
    let refusals = counter(&gw, series).await;
    let a = gw.ok("SendMessage", ask()).await["task"].clone();
    assert_eq!(state(&a), "TASK_STATE_INPUT_REQUIRED", "{a}");
    let b = gw.ok("SendMessage", ask()).await["task"].clone();
    assert_eq!(state(&b), "TASK_STATE_INPUT_REQUIRED", "{b}");

    let error = refused(&gw, "SendMessage", ask()).await;
    assert_quota_error(&error, "open_tasks_per_owner", 2);
    let error = refused(&gw, "SendMessage", json!({"message": user_message("hi")})).await;
    assert_quota_error(&error, "open_tasks_per_owner", 2);
    let (status, body) = rest(&gw, "/message:send", json!({"message": user_message("hi")})).await;
    assert_rest_quota(status, &body, "open_tasks_per_owner");
    grpc_refused(&gw, "open_tasks_per_owner", grpc_hang()).await;
    assert!(counter(&gw, series).await >= refusals + 4.0);

    // Answering a task that waits is not a new task.
    let mut answer = script_message(json!({"end": "input-required"}));
    answer["taskId"] = a["id"].clone();
    let again = gw
        .ok(
            "SendMessage",
            json!({"tenant": "scenario", "message": answer}),
        )
        .await;
    assert_eq!(again["task"]["id"], a["id"], "{again}");

    // A canceled task gives its place back.
    gw.ok("CancelTask", json!({"id": b["id"]})).await;
    let c = gw
        .ok("SendMessage", json!({"message": user_message("hi")}))
        .await;
    assert_eq!(state(&c["task"]), "TASK_STATE_COMPLETED", "{c}");
}

/// `stored_bytes_per_owner`: a message that would take the owner's stored messages and
/// artifacts past the cap is refused on every binding, and nothing is stored for it.
#[tokio::test]
async fn stored_bytes_per_owner_refuses_a_message_past_it() {
    let gw = TestGateway::with_admin("[limits.quotas]\nstored_bytes_per_owner = 20000").await;
    let series = r#"a2a_quota_refusals_total{quota="stored_bytes_per_owner"}"#;
    let refusals = counter(&gw, series).await;
    let text = "x".repeat(8_000);
    // 8 kB in, 8 kB echoed back as an artifact: about 16 kB stored.
    let first = gw
        .ok("SendMessage", json!({"message": user_message(&text)}))
        .await;
    assert_eq!(state(&first["task"]), "TASK_STATE_COMPLETED", "{first}");
    let before = gw.task_count().await;
    let second = gw
        .ok("SendMessage", json!({"message": user_message("small")}))
        .await;
    assert_eq!(state(&second["task"]), "TASK_STATE_COMPLETED", "{second}");

    let error = refused(&gw, "SendMessage", json!({"message": user_message(&text)})).await;
    assert_quota_error(&error, "stored_bytes_per_owner", 20_000);
    let (status, body) = rest(
        &gw,
        "/message:send",
        json!({"message": user_message(&text)}),
    )
    .await;
    assert_rest_quota(status, &body, "stored_bytes_per_owner");
    let mut big = grpc_hang();
    big.message.as_mut().unwrap().parts[0].content =
        Some(a2a_types::v1::part::Content::Text(text.clone()));
    grpc_refused(&gw, "stored_bytes_per_owner", big).await;
    assert_eq!(
        gw.task_count().await,
        before + 1,
        "refused sends store nothing"
    );
    assert!(counter(&gw, series).await >= refusals + 3.0);
}

/// A task that waits for input longer than `interrupted_task_ttl` is CANCELED by the gateway,
/// its status message saying why, and a client following it sees the event; a task that does
/// not wait is left alone.
#[tokio::test]
async fn an_interrupted_task_expires_and_its_follower_sees_it() {
    let gw = TestGateway::with_admin(
        "[limits.quotas]\ninterrupted_task_ttl = \"1s\"\n\
         [retention]\nsweep_interval = \"200ms\"",
    )
    .await;
    let asked = gw.ok("SendMessage", ask()).await["task"].clone();
    assert_eq!(state(&asked), "TASK_STATE_INPUT_REQUIRED", "{asked}");
    let id = asked["id"].as_str().unwrap().to_owned();
    let done = gw
        .ok("SendMessage", json!({"message": user_message("hi")}))
        .await["task"]
        .clone();
    let mut follow = gw.stream("SubscribeToTask", json!({"id": id})).await;
    let started = Instant::now();
    let mut canceled = None;
    while let Ok(Some(event)) = tokio::time::timeout(Duration::from_secs(10), follow.next()).await {
        let result = &event.data["result"];
        let status = result["statusUpdate"]["status"]
            .as_object()
            .or(result["task"]["status"].as_object());
        if status.is_some_and(|s| s["state"] == "TASK_STATE_CANCELED") {
            canceled = Some(event.data.clone());
            break;
        }
    }
    let canceled = canceled.expect("the follower sees the task expire");
    assert!(started.elapsed() < Duration::from_secs(10));
    let text = canceled.to_string();
    assert!(text.contains("expired"), "{text}");
    let task = gw.ok("GetTask", json!({"id": id})).await;
    assert_eq!(state(&task), "TASK_STATE_CANCELED", "{task}");
    assert!(
        task["status"]["message"]["parts"][0]["text"]
            .as_str()
            .unwrap()
            .contains("interrupted_task_ttl"),
        "{task}"
    );
    let other = gw.ok("GetTask", json!({"id": done["id"]})).await;
    assert_eq!(state(&other), "TASK_STATE_COMPLETED");
    assert!(counter(&gw, "a2a_expired_tasks_total").await >= 1.0);
}

/// M3: with the JWKS past its TTL and the issuer hanging (accepting connections, never
/// answering), bearer requests with known keys are answered from the keys we have, at once and
/// together, not one fetch timeout (5 s) after another; one refetch is in flight at a time.
#[tokio::test]
async fn a_hanging_issuer_does_not_queue_bearer_requests() {
    let issuer = Issuer::start().await;
    let gw = TestGateway::with_config(&auth_config(issuer.url(), 1, 1)).await;
    let token = |sub: &str| issuer.token(Algorithm::RS256, &issuer.claims(sub, WRITE));
    let first = token("warm");
    send(&client(
        &gw,
        BindingKind::JsonRpc,
        Some(("authorization", &bearer(&first))),
    ))
    .await
    .unwrap();
    issuer.set_hanging(true);
    tokio::time::sleep(Duration::from_millis(1_200)).await; // past the TTL
    let discoveries = issuer.discoveries();
    // Distinct tokens, so that none is answered from the token cache.
    let tokens: Vec<String> = (0..8).map(|i| token(&format!("user-{i}"))).collect();
    let started = Instant::now();
    let answers = futures::future::join_all(tokens.iter().map(|t| async {
        let c = client(
            &gw,
            BindingKind::JsonRpc,
            Some(("authorization", &bearer(t))),
        );
        send(&c).await
    }))
    .await;
    let took = started.elapsed();
    for a in answers {
        a.expect("answered with the keys we have");
    }
    assert!(
        took < Duration::from_millis(4_500),
        "bearer requests waited for the hanging issuer: {took:?}"
    );
    assert!(
        issuer.discoveries() <= discoveries + 1,
        "one refetch at a time, at most one per min_refresh"
    );
}

/// Waits (at most 10 s) for a CANCELED status on `stream`; returns the event's data.
async fn until_canceled(stream: &mut SseStream) -> Option<Value> {
    let deadline = Instant::now() + Duration::from_secs(10);
    while let Ok(Some(event)) = tokio::time::timeout(
        deadline.saturating_duration_since(Instant::now()),
        stream.next(),
    )
    .await
    {
        let result = &event.data["result"];
        let status = result["statusUpdate"]["status"]
            .as_object()
            .or(result["task"]["status"].as_object());
        if status.is_some_and(|s| s["state"] == "TASK_STATE_CANCELED") {
            return Some(event.data.clone());
        }
    }
    None
}

/// Three replicas on one PostgreSQL database and Redis all sweep: each expired task gets
/// exactly one CANCELED event in its log (the append's sequence guard lets one replica win),
/// and a follower on another replica than the one that created the task sees it (the event is
/// published on the bus).
#[tokio::test]
async fn replicas_expire_each_task_once_and_followers_elsewhere_see_it() {
    let db = a2a_testing::TestDatabase::create().await;
    let redis = a2a_testing::TestRedis::create().await;
    let toml = "builtin_agents = [\"echo\", \"scenario\"]\n\
                [limits.quotas]\ninterrupted_task_ttl = \"1s\"\n\
                [retention]\nsweep_interval = \"100ms\"";
    let mut replicas = Vec::new();
    for _ in 0..3 {
        replicas.push(TestGateway::with_database_and_redis(toml, db.url(), &redis).await);
    }
    let pool = sqlx::PgPool::connect(db.url()).await.unwrap();
    let events = async |id: &str| -> i64 {
        sqlx::query_scalar("SELECT count(*) FROM task_events WHERE task_id = $1")
            .bind(id)
            .fetch_one(&pool)
            .await
            .unwrap()
    };
    let mut ids = Vec::new();
    for _ in 0..5 {
        let task = replicas[0].ok("SendMessage", ask()).await["task"].clone();
        assert_eq!(state(&task), "TASK_STATE_INPUT_REQUIRED", "{task}");
        let id = task["id"].as_str().unwrap().to_owned();
        let before = events(&id).await;
        ids.push((id, before));
    }
    let mut follow = replicas[2]
        .stream("SubscribeToTask", json!({"id": ids[0].0}))
        .await;
    let seen = until_canceled(&mut follow).await;
    assert!(
        seen.is_some(),
        "the follower on another replica sees the expiry"
    );
    for (id, before) in &ids {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let task = replicas[1].ok("GetTask", json!({"id": id})).await;
            if state(&task) == "TASK_STATE_CANCELED" {
                break;
            }
            assert!(Instant::now() < deadline, "{id} did not expire: {task}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        // Several more sweeps of all three replicas: still exactly one event more.
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(events(id).await, before + 1, "one CANCELED event for {id}");
    }
}

/// The expiry is delivered by push like any other transition (embedded gateway: it delivers
/// push itself).
#[tokio::test]
async fn an_expired_task_is_pushed_to_its_webhook() {
    use a2a_testing::receiver::{Receiver, describe};
    let gw = TestGateway::embedded(
        "[push]\nallowed_hosts = [\"127.0.0.1\"]\n\
         [limits.quotas]\ninterrupted_task_ttl = \"1s\"\n\
         [retention]\nsweep_interval = \"200ms\"",
    )
    .await;
    let receiver = Receiver::start().await;
    let push = json!({"url": receiver.url("/hooks/a2a"), "token": "tok"});
    let mut params = ask();
    params["configuration"] = json!({"taskPushNotificationConfig": push});
    let task = gw.ok("SendMessage", params).await["task"].clone();
    assert_eq!(state(&task), "TASK_STATE_INPUT_REQUIRED", "{task}");
    let canceled = "status TASK_STATE_CANCELED".to_owned();
    receiver
        .wait_for(Duration::from_secs(10), |r| {
            r.iter().any(|r| describe(&r.json) == canceled)
        })
        .await;
    let got: Vec<String> = receiver
        .requests()
        .iter()
        .map(|r| describe(&r.json))
        .collect();
    assert_eq!(got.last(), Some(&canceled), "{got:?}");
    assert_eq!(got.iter().filter(|d| **d == canceled).count(), 1, "{got:?}");
}

/// M3, the other half: tokens naming keys we do not have, while the issuer hangs, wait for at
/// most the one fetch in flight; once it ends they are refused at once, not by one more 5 s
/// attempt each (the interval between attempts runs from the last one's end).
#[tokio::test]
async fn unknown_keys_wait_for_one_fetch_at_most_while_the_issuer_hangs() {
    let issuer = Issuer::start().await;
    let gw = TestGateway::with_config(&auth_config(issuer.url(), 1, 600)).await;
    let first = issuer.token(Algorithm::RS256, &issuer.claims("warm", WRITE));
    send(&client(
        &gw,
        BindingKind::JsonRpc,
        Some(("authorization", &bearer(&first))),
    ))
    .await
    .unwrap();
    issuer.set_hanging(true);
    tokio::time::sleep(Duration::from_millis(1_200)).await; // past min_refresh
    let discoveries = issuer.discoveries();
    let claims = issuer.claims("stranger", WRITE);
    let tokens: Vec<String> = (0..6)
        .map(|i| crate::issuer::SigningKey::ec(&format!("unknown-{i}")).sign(&claims))
        .collect();
    let started = Instant::now();
    let answers = futures::future::join_all(tokens.iter().map(|t| async {
        let c = client(
            &gw,
            BindingKind::JsonRpc,
            Some(("authorization", &bearer(t))),
        );
        send(&c).await
    }))
    .await;
    let took = started.elapsed();
    for a in answers {
        assert!(a.is_err(), "a token signed by an unknown key was accepted");
    }
    assert!(
        took < Duration::from_secs(12),
        "refusals queued behind one attempt each: {took:?}"
    );
    assert!(issuer.discoveries() <= discoveries + 1);
}
