//! The admin API for upstream agents (`/admin/v1/agents` on the admin listener): authz (401
//! without the token, 404 without any configured), create → routed to → replaced under
//! `If-Match` → deleted, file agents read-only, a card that cannot be fetched refused.

use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::auth::config as auth_config;
use crate::harness::TestGateway;
use crate::issuer::Issuer;
use crate::metrics::Scrape;
use crate::upstream::{agent, script, upstream};
use jsonwebtoken::Algorithm;

const TOKEN: &str = "s3cret-admin-token";

fn sha256_hex(s: &str) -> String {
    Sha256::digest(s.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

async fn admin_gateway(toml: &str) -> TestGateway {
    TestGateway::with_env(
        toml,
        &[
            ("A2A_ADMIN_LISTEN", "127.0.0.1:0".to_owned()),
            (
                "A2A_ADMIN_TOKEN_SHA256",
                format!("{},{}", "0".repeat(64), sha256_hex(TOKEN)),
            ),
        ],
    )
    .await
}

fn admin_url(gw: &TestGateway, path: &str) -> String {
    format!("http://{}{path}", gw.admin.unwrap())
}

async fn call(
    gw: &TestGateway,
    method: reqwest::Method,
    path: &str,
    token: Option<&str>,
    headers: &[(&str, &str)],
    body: Option<Value>,
) -> (StatusCode, String, Value) {
    let mut req = gw.client.request(method, admin_url(gw, path));
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    if let Some(b) = body {
        req = req.json(&b);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status();
    let etag = resp
        .headers()
        .get("etag")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    let body = serde_json::from_slice(&resp.bytes().await.unwrap()).unwrap_or(Value::Null);
    (status, etag, body)
}

/// An admin API `GET` of `path` with the admin token: (status, ETag, body).
async fn get(gw: &TestGateway, path: &str) -> (StatusCode, String, Value) {
    call(gw, Method::GET, path, Some(TOKEN), &[], None).await
}

/// Registers `entry` through the admin API with the admin token.
async fn post(gw: &TestGateway, entry: Value) -> (StatusCode, String, Value) {
    call(
        gw,
        Method::POST,
        "/admin/v1/agents",
        Some(TOKEN),
        &[],
        Some(entry),
    )
    .await
}

/// Replaces agent `name` with `entry`, under `If-Match: if_match` when given.
async fn put(
    gw: &TestGateway,
    name: &str,
    if_match: Option<&str>,
    entry: Value,
) -> (StatusCode, String, Value) {
    let path = format!("/admin/v1/agents/{name}");
    let headers: Vec<(&str, &str)> = if_match.map(|e| ("if-match", e)).into_iter().collect();
    call(gw, Method::PUT, &path, Some(TOKEN), &headers, Some(entry)).await
}

/// Removes agent `name`, under `If-Match: if_match` when given.
async fn delete(
    gw: &TestGateway,
    name: &str,
    if_match: Option<&str>,
) -> (StatusCode, String, Value) {
    let path = format!("/admin/v1/agents/{name}");
    let headers: Vec<(&str, &str)> = if_match.map(|e| ("if-match", e)).into_iter().collect();
    call(gw, Method::DELETE, &path, Some(TOKEN), &headers, None).await
}

/// Sends to agent `billing` through `gw` until the answer has `outcome` (`result` or `error`),
/// failing with `what` after 2 s: how long a change on one replica may take to reach another.
async fn within_2s(gw: &TestGateway, outcome: &str, what: &str) {
    let start = std::time::Instant::now();
    loop {
        let resp = gw
            .rpc(
                "SendMessage",
                script("billing", json!({"chunks": 1}), json!({})),
            )
            .await;
        if resp.get(outcome).is_some() {
            return;
        }
        assert!(start.elapsed() < Duration::from_secs(2), "{what}: {resp}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn agents_are_created_routed_to_replaced_and_deleted_at_run_time() {
    let up = upstream("").await;
    let other = upstream("").await;
    let fixed = upstream("").await;
    let gw = admin_gateway(&agent("fixed", &fixed.url(""), "")).await;

    // Unauthenticated or a wrong token: 401 with a Bearer challenge.
    for token in [None, Some("wrong")] {
        let (status, _, body) = call(&gw, Method::GET, "/admin/v1/agents", token, &[], None).await;
        assert_eq!(status, 401, "{body}");
    }
    // The public listener has no admin API.
    let public = gw
        .client
        .get(gw.url("/admin/v1/agents"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_ne!(public.status(), 200);

    // Not routable before it is registered.
    let before = gw
        .rpc(
            "SendMessage",
            script("billing", json!({"reply": "x"}), json!({})),
        )
        .await;
    assert!(before.get("error").is_some(), "{before}");

    // Create: 201, an ETag, the card fetched, then routed to.
    let (status, etag, body) = post(
        &gw,
        json!({"name": "billing", "card_url": up.url(""), "health_interval_secs": 1}),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    assert!(etag.starts_with('"'), "{etag}");
    assert_eq!(body["source"], "api");
    let sent = gw
        .ok(
            "SendMessage",
            script("billing", json!({"chunks": 1}), json!({})),
        )
        .await;
    assert!(sent.get("task").is_some(), "{sent}");
    let before_up = up.task_count().await;
    assert!(before_up >= 1, "the registered upstream ran the turn");
    // Listed in the AI Catalog and the admin list (the file agent read-only).
    let catalog: Value = gw
        .client
        .get(gw.url("/.well-known/ai-catalog.json"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(
        catalog
            .to_string()
            .contains("/agents/billing/.well-known/agent-card.json"),
        "{catalog}"
    );
    let (_, _, list) = get(&gw, "/admin/v1/agents").await;
    let names: Vec<(&str, &str)> = list["agents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| (a["name"].as_str().unwrap(), a["source"].as_str().unwrap()))
        .collect();
    assert!(names.contains(&("fixed", "file")), "{list}");
    assert!(names.contains(&("billing", "api")), "{list}");

    // Creating it again: 409. A file agent cannot be changed: 409.
    let (status, _, _) = post(&gw, json!({"name": "billing", "card_url": up.url("")})).await;
    assert_eq!(status, 409);
    for method in [Method::PUT, Method::DELETE] {
        let (status, _, body) = call(
            &gw,
            method,
            "/admin/v1/agents/fixed",
            Some(TOKEN),
            &[],
            Some(json!({"card_url": up.url("")})),
        )
        .await;
        assert_eq!(status, 409, "{body}");
    }
    // Invalid entries: 422 with the [[agents]] validation's message.
    let (status, _, body) = post(&gw, json!({"name": "bad name", "card_url": up.url("")})).await;
    assert_eq!(status, 422, "{body}");
    // A card nobody serves: refused, nothing registered.
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let silent_url = format!("http://{}", silent.local_addr().unwrap());
    drop(silent);
    let (status, _, body) = post(&gw, json!({"name": "ghost", "card_url": silent_url})).await;
    assert_eq!(status, 422, "{body}");
    let (status, _, _) = get(&gw, "/admin/v1/agents/ghost").await;
    assert_eq!(status, 404);

    // Replace with a stale ETag: 412; with the current one: moved to the other upstream.
    let replacement = json!({"card_url": other.url(""), "health_interval_secs": 1});
    let (status, _, _) = put(&gw, "billing", Some("\"stale\""), replacement.clone()).await;
    assert_eq!(status, 412);
    let (status, new_etag, body) = put(&gw, "billing", Some(&etag), replacement).await;
    assert_eq!(status, 200, "{body}");
    assert_ne!(new_etag, etag);
    let before_other = other.task_count().await;
    gw.ok(
        "SendMessage",
        script("billing", json!({"chunks": 1}), json!({})),
    )
    .await;
    assert_eq!(
        other.task_count().await,
        before_other + 1,
        "routed to the new upstream"
    );
    assert_eq!(up.task_count().await, before_up, "not to the old one");

    // Delete with the old ETag: 412; with the new one: 204, and no longer routed to.
    let (status, _, _) = delete(&gw, "billing", Some(&etag)).await;
    assert_eq!(status, 412);
    let (status, _, _) = delete(&gw, "billing", Some(&new_etag)).await;
    assert_eq!(status, 204);
    tokio::time::sleep(Duration::from_millis(50)).await;
    let after = gw
        .rpc(
            "SendMessage",
            script("billing", json!({"reply": "x"}), json!({})),
        )
        .await;
    assert!(after.get("error").is_some(), "{after}");
    assert_eq!(other.task_count().await, before_other + 1);
    let (status, _, _) = get(&gw, "/admin/v1/agents/billing").await;
    assert_eq!(status, 404);
}

#[tokio::test]
async fn without_an_admin_token_the_admin_api_does_not_exist() {
    let gw = TestGateway::with_admin("").await;
    let (status, _, _) = get(&gw, "/admin/v1/agents").await;
    assert_eq!(status, 404);
    // The rest of the admin listener still answers (a scrape is a 200).
    Scrape::take(&gw).await;
}

#[tokio::test]
async fn the_agents_command_drives_the_admin_api() {
    let up = upstream("").await;
    let gw = admin_gateway("").await;
    let admin = gw.admin.unwrap().to_string();
    // The command line as the binary parses it.
    let parse = |args: &[&str]| {
        use clap::Parser;
        let line = ["a2a-gateway", "agents"].iter().chain(args);
        match a2a_gateway::cli::Cli::try_parse_from(line).map(|c| c.chosen()) {
            Ok(a2a_gateway::cli::Command::Agents(command)) => Ok(command),
            other => Err(format!("{other:?}")),
        }
    };
    let cli = |args: &[&str]| {
        let command = parse(args).unwrap();
        let admin = admin.clone();
        async move { a2a_gateway::admin::cli(&admin, TOKEN, &command).await }
    };
    let entry = json!({"name": "billing", "card_url": up.url("")}).to_string();
    let out = cli(&["add", &entry]).await.unwrap();
    assert!(out.contains("\"source\":\"api\""), "{out}");
    let etag = out.rsplit("ETag: ").next().unwrap().trim().to_owned();
    let out = cli(&["list"]).await.unwrap();
    assert!(out.contains("billing"), "{out}");
    let err = cli(&["remove", "billing", "--if-match", "\"stale\""])
        .await
        .unwrap_err();
    assert!(err.starts_with("412"), "{err}");
    assert_eq!(
        cli(&["remove", "billing", "--if-match", &etag])
            .await
            .unwrap(),
        "removed"
    );
    let err = cli(&["get", "billing"]).await.unwrap_err();
    assert!(err.starts_with("404"), "{err}");
    // A wrong token is refused.
    let err = a2a_gateway::admin::cli(&admin, "wrong", &parse(&["list"]).unwrap())
        .await
        .unwrap_err();
    assert!(err.starts_with("401"), "{err}");
    assert!(parse(&["frobnicate"]).is_err());
}

/// Two replicas on one PostgreSQL and Redis: an agent registered on A is routed to through B
/// within 2 s, a removal on B is seen by A, and concurrent updates are ordered by `If-Match`.
#[tokio::test]
async fn replicas_share_the_api_agents_through_postgres() {
    let db = a2a_testing::TestDatabase::create().await;
    let redis = a2a_testing::TestRedis::create().await;
    let up = upstream("").await;
    let env = [
        ("A2A_ADMIN_LISTEN", "127.0.0.1:0".to_owned()),
        ("A2A_ADMIN_TOKEN_SHA256", sha256_hex(TOKEN)),
    ];
    let a = TestGateway::replica_with_env("", db.url(), &redis, &env).await;
    let b = TestGateway::replica_with_env("", db.url(), &redis, &env).await;

    let (status, etag, body) = post(
        &a,
        json!({"name": "billing", "card_url": up.url(""), "health_interval_secs": 1}),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    // Routed through B within 2 s of the registration on A.
    within_2s(&b, "result", "not routed on B within 2 s").await;
    // B sees the same entry and ETag.
    let (status, b_etag, _) = get(&b, "/admin/v1/agents/billing").await;
    assert_eq!(status, 200);
    assert_eq!(b_etag, etag);

    // Concurrent updates with the same If-Match: one wins, the other gets 412.
    let update = |gw: &'static str| json!({"card_url": up.url(""), "health_interval_secs": 1, "weight": if gw == "a" { 2.0 } else { 3.0 }});
    let (ra, rb) = tokio::join!(
        put(&a, "billing", Some(&etag), update("a")),
        put(&b, "billing", Some(&etag), update("b")),
    );
    let mut statuses = [ra.0.as_u16(), rb.0.as_u16()];
    statuses.sort();
    assert_eq!(statuses, [200, 412], "{ra:?} {rb:?}");
    let winner = if ra.0 == 200 { ra.1 } else { rb.1 };

    // Removed on B: refused on A within 2 s.
    let (status, _, body) = delete(&b, "billing", Some(&winner)).await;
    assert_eq!(status, 204, "{body}");
    within_2s(&a, "error", "still routed on A 2 s after the removal").await;
    // Each change is in the audit table.
    let pool = sqlx::PgPool::connect(db.url()).await.unwrap();
    let actions: Vec<String> = sqlx::query_scalar("SELECT action FROM admin_audit ORDER BY id")
        .fetch_all(&pool)
        .await
        .unwrap();
    assert_eq!(actions, ["create", "replace", "delete"]);
}

/// An upstream (default agent `scenario`) that takes one of `auth_config`'s API keys
/// (`bob-secret`) or an issuer token.
async fn guarded_upstream(issuer: &Issuer) -> TestGateway {
    let auth = auth_config(issuer.url(), 10, 600);
    TestGateway::with_config(&format!("default_agent = \"scenario\"\n{auth}")).await
}

/// The admin API takes credentials by reference only: an inline secret is refused with a 400
/// naming the field, a referenced one is read by the gateway (the guarded upstream is reached
/// with it), and no answer ever holds the secret.
#[tokio::test]
async fn the_admin_api_takes_credentials_by_reference_only() {
    let issuer = Issuer::start().await;
    let up = guarded_upstream(&issuer).await;
    let gw = admin_gateway("").await;
    for (creds, field) in [
        (json!({"api_key": "bob-secret"}), "credentials.api_key"),
        (
            json!({"client_id": "robot", "client_secret": "robot-secret"}),
            "credentials.client_secret",
        ),
    ] {
        let entry = json!({"name": "billing", "card_url": up.url(""), "credentials": creds,
                           "allow_insecure_credentials": true});
        let (status, _, body) = post(&gw, entry).await;
        assert_eq!(status, 400, "{body}");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.starts_with(field), "{message}");
        assert!(
            !message.contains("-secret"),
            "the value is never echoed: {message}"
        );
    }
    // A reference that cannot be read: 422, and nothing is registered.
    let missing = json!({"name": "billing", "card_url": up.url(""),
                         "credentials": {"api_key_env": "A2A_TEST_UNSET_VARIABLE_7d1f"}});
    let (status, _, body) = post(&gw, missing).await;
    assert_eq!(status, 422, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("A2A_TEST_UNSET_VARIABLE_7d1f is not set"),
        "{body}"
    );

    // The key in a file (as a mounted Secret would be), with its trailing newline.
    let file = std::env::temp_dir().join(format!("a2a-admin-key-{}", uuid::Uuid::new_v4()));
    std::fs::write(&file, "bob-secret\n").unwrap();
    let entry = json!({"name": "billing", "card_url": up.url(""), "health_interval_secs": 1,
                       "credentials": {"api_key_file": file},
                       "allow_insecure_credentials": true});
    let (status, _, body) = post(&gw, entry).await;
    assert_eq!(status, 201, "{body}");
    let sent = gw
        .ok(
            "SendMessage",
            script("billing", json!({"chunks": 1}), json!({})),
        )
        .await;
    assert_eq!(
        crate::harness::state(&sent["task"]),
        "TASK_STATE_COMPLETED",
        "the upstream took the key read from the file: {sent}"
    );
    let (_, _, shown) = get(&gw, "/admin/v1/agents/billing").await;
    assert_eq!(shown["credentials"]["api_key_file"], json!(file), "{shown}");
    let (_, _, listed) = get(&gw, "/admin/v1/agents").await;
    for answer in [&shown, &listed] {
        assert!(!answer.to_string().contains("bob-secret"), "{answer}");
    }
    // The gauge counts it.
    let metrics = Scrape::take(&gw).await;
    assert!(
        metrics.has("a2a_registered_agents", &[("source", "admin")]),
        "{}",
        metrics.text()
    );
    let _ = std::fs::remove_file(&file);
}

/// `[admin] oidc_scheme`: a token of the identity provider carrying the admin scope
/// administers (and the audit names its subject); one without the scope is refused with 403,
/// a forged one with 401. No admin token is configured: the API exists through OIDC alone.
#[tokio::test]
async fn an_identity_provider_token_with_the_admin_scope_administers() {
    let issuer = Issuer::start().await;
    let up = upstream("").await;
    let toml = format!(
        "{}\n[admin]\noidc_scheme = \"oidc\"\nscope = \"a2a:admin\"\n",
        auth_config(issuer.url(), 10, 600)
    );
    let gw = TestGateway::with_env(&toml, &[("A2A_ADMIN_LISTEN", "127.0.0.1:0".to_owned())]).await;
    let admin_token = issuer.token(Algorithm::RS256, &issuer.claims("ops-alice", "a2a:admin"));
    let user_token = issuer.token(Algorithm::RS256, &issuer.claims("bob", "a2a:write"));

    let (status, _, body) = call(
        &gw,
        Method::GET,
        "/admin/v1/agents",
        Some(&user_token),
        &[],
        None,
    )
    .await;
    assert_eq!(status, 403, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("a2a:admin"),
        "{body}"
    );
    let (status, _, _) = call(
        &gw,
        Method::GET,
        "/admin/v1/agents",
        Some("not.a.jwt"),
        &[],
        None,
    )
    .await;
    assert_eq!(status, 401);
    let (status, _, _) = get(&gw, "/admin/v1/agents").await;
    assert_eq!(status, 401, "no admin token is configured");

    let (status, _, body) = call(
        &gw,
        Method::POST,
        "/admin/v1/agents",
        Some(&admin_token),
        &[],
        Some(json!({"name": "billing", "card_url": up.url("")})),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let (status, _, audit) = call(
        &gw,
        Method::GET,
        "/admin/v1/audit",
        Some(&admin_token),
        &[],
        None,
    )
    .await;
    assert_eq!(status, 200, "{audit}");
    let record = &audit["records"][0];
    assert_eq!(
        record["who"],
        format!("oidc:{}|ops-alice", issuer.url()),
        "{audit}"
    );
    assert_eq!(record["action"], "create");
    assert_eq!(record["agent"], "billing");
    assert!(record["at"].as_str().is_some(), "{audit}");
}
