//! `GET /agents`: built-in and upstream agents with their cards at this gateway, skills,
//! health and protocol; `ETag` and `If-None-Match` → 304 (and a new tag once health changes);
//! with `[auth]`, only for authenticated callers, each seeing the agents it may reach.

use std::time::Duration;

use serde_json::{Value, json};

use crate::harness::TestGateway;
use crate::upstream::{agent, upstream};

/// `GET /agents` with `headers`: the status, the ETag and the body (null on 304).
async fn catalogue(gw: &TestGateway, headers: &[(&str, &str)]) -> (u16, String, Value) {
    let mut req = gw.client.get(gw.url("/agents"));
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    let etag = resp
        .headers()
        .get("etag")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    let body = if status == 304 {
        Value::Null
    } else {
        serde_json::from_slice(&resp.bytes().await.unwrap()).unwrap_or(Value::Null)
    };
    (status, etag, body)
}

fn entry<'a>(doc: &'a Value, name: &str) -> &'a Value {
    doc["agents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["name"] == name)
        .unwrap_or_else(|| panic!("no agent {name} in {doc}"))
}

fn names(doc: &Value) -> Vec<&str> {
    doc["agents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["name"].as_str().unwrap())
        .collect()
}

#[tokio::test]
async fn lists_built_in_and_upstream_agents_with_health_and_an_etag() {
    let up = upstream("").await;
    // A 0.3 agent nobody answers for: listed, unhealthy.
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let silent_url = format!("http://{}", silent.local_addr().unwrap());
    drop(silent);
    let gw = TestGateway::with_config(&format!(
        "{}{}",
        agent("up", &up.url(""), ""),
        agent("old", &silent_url, "protocol = \"0.3\"\ntimeout_secs = 1"),
    ))
    .await;

    let (status, etag, doc) = catalogue(&gw, &[]).await;
    assert_eq!(status, 200, "{doc}");
    assert_eq!(names(&doc), ["echo", "scenario", "up", "old"]);
    let echo = entry(&doc, "echo");
    assert_eq!(echo["cardUrl"], gw.url("/.well-known/agent-card.json"));
    assert_eq!(echo["default"], true);
    assert_eq!(echo["health"], "healthy");
    assert_eq!(echo["protocol"], "1.0");
    assert_eq!(echo["tenant"], "echo");
    assert_eq!(echo["bindings"], json!(["JSONRPC", "HTTP+JSON", "GRPC"]));
    assert_eq!(echo["skills"][0]["id"], "echo");

    let upstream_card: Value = gw
        .client
        .get(up.url("/.well-known/agent-card.json"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let listed = entry(&doc, "up");
    assert_eq!(
        listed["cardUrl"],
        gw.url("/agents/up/.well-known/agent-card.json")
    );
    assert_eq!(listed["default"], false);
    assert_eq!(listed["health"], "healthy");
    assert_eq!(listed["protocol"], "1.0");
    assert_eq!(listed["description"], upstream_card["description"]);
    assert_eq!(listed["skills"], upstream_card["skills"]);
    // The card URL it names is served.
    let card = gw
        .client
        .get(listed["cardUrl"].as_str().unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(card.status(), 200);

    let old = entry(&doc, "old");
    assert_eq!(old["health"], "unhealthy");
    assert_eq!(old["protocol"], "0.3");
    assert_eq!(old["skills"], json!([]));
    assert_eq!(
        old["cardUrl"],
        gw.url("/agents/old/.well-known/agent-card.json")
    );

    // Conditional requests: the same tag is answered with 304, and the tag is the same for
    // the same content.
    assert!(etag.starts_with('"'), "{etag}");
    let (status, again, body) = catalogue(&gw, &[("if-none-match", &etag)]).await;
    assert_eq!((status, &again, body), (304, &etag, Value::Null));
    let (status, _, _) = catalogue(&gw, &[("if-none-match", "\"other\"")]).await;
    assert_eq!(status, 200);

    // Health is part of the content: once the upstream is gone, a new tag.
    up.stop().await;
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    let (status, changed, doc) = loop {
        let (status, tag, doc) = catalogue(&gw, &[("if-none-match", &etag)]).await;
        if status == 200 {
            break (status, tag, doc);
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the catalogue never changed"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(status, 200);
    assert_ne!(changed, etag);
    assert_eq!(entry(&doc, "up")["health"], "unhealthy", "{doc}");
}

const AUTH: &str = r#"
[auth]
requirements = [{ key = [] }, { admin = [] }]

[auth.skill_requirements]
scenario = [{ admin = [] }]

[auth.schemes.key]
scheme = { apiKeySecurityScheme = { location = "header", name = "X-API-Key" } }
keys = [{ id = "user", key = "user-key" }]

[auth.schemes.admin]
scheme = { apiKeySecurityScheme = { location = "header", name = "X-Admin-Key" } }
keys = [{ id = "admin", key = "admin-key" }]
"#;

#[tokio::test]
async fn with_auth_each_caller_sees_the_agents_it_may_reach() {
    let gw = TestGateway::with_config(AUTH).await;

    // Unauthenticated, or with a wrong key: refused like any other call, as an HTTP+JSON error.
    for headers in [vec![], vec![("x-api-key", "wrong")]] {
        let (status, _, body) = catalogue(&gw, &headers).await;
        assert_eq!(status, 401, "{body}");
        assert_eq!(body["error"]["status"], "UNAUTHENTICATED", "{body}");
    }

    // The scenario skill requires the admin scheme: a user does not see its agent.
    let (status, user_tag, user) = catalogue(&gw, &[("x-api-key", "user-key")]).await;
    assert_eq!(status, 200);
    assert_eq!(names(&user), ["echo"]);
    let (status, admin_tag, admin) = catalogue(&gw, &[("x-admin-key", "admin-key")]).await;
    assert_eq!(status, 200);
    assert_eq!(names(&admin), ["echo", "scenario"]);
    // Its skill shows the requirement, as the card does.
    assert_eq!(
        entry(&admin, "scenario")["skills"][0]["securityRequirements"],
        json!([{"schemes": {"admin": {}}}])
    );
    assert_ne!(user_tag, admin_tag, "what a caller sees is its own");
    let resp = gw
        .client
        .get(gw.url("/agents"))
        .header("x-api-key", "user-key")
        .header("if-none-match", &user_tag)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 304);
    assert_eq!(resp.headers()["cache-control"], "private, no-cache");
    // Another caller's tag does not match.
    let (status, _, _) = catalogue(
        &gw,
        &[("x-api-key", "user-key"), ("if-none-match", &admin_tag)],
    )
    .await;
    assert_eq!(status, 200);
}

/// `GET /.well-known/ai-catalog.json` with `headers`: status, content type, ETag and body.
async fn ai_catalog(gw: &TestGateway, headers: &[(&str, &str)]) -> (u16, String, String, Value) {
    let mut req = gw.client.get(gw.url("/.well-known/ai-catalog.json"));
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    let header = |name: &str| {
        resp.headers()
            .get(name)
            .map(|v| v.to_str().unwrap().to_owned())
            .unwrap_or_default()
    };
    let (media, etag) = (header("content-type"), header("etag"));
    let body = serde_json::from_slice(&resp.bytes().await.unwrap()).unwrap_or(Value::Null);
    (status, media, etag, body)
}

fn identifiers(doc: &Value) -> Vec<&str> {
    doc["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["displayName"].as_str().unwrap())
        .collect()
}

#[tokio::test]
async fn the_ai_catalog_lists_each_agent_with_its_card() {
    let up = upstream("").await;
    let gw = TestGateway::with_config(&agent("up", &up.url(""), "")).await;
    let (status, media, etag, doc) = ai_catalog(&gw, &[]).await;
    assert_eq!(status, 200, "{doc}");
    assert_eq!(media, "application/ai-catalog+json");
    assert!(
        etag.starts_with('"') && !etag.starts_with("W/"),
        "strong: {etag}"
    );
    assert_eq!(doc["specVersion"], "1.0", "{doc}");
    assert!(doc["host"]["displayName"].is_string(), "{doc}");
    assert_eq!(identifiers(&doc), ["echo", "scenario", "up"]);
    for entry in doc["entries"].as_array().unwrap() {
        assert_eq!(entry["type"], "application/a2a-agent-card+json", "{entry}");
        assert_eq!(entry["identifier"], entry["url"], "{entry}");
        // Each url serves the agent's card.
        let url = entry["url"].as_str().unwrap();
        let card: Value = gw
            .client
            .get(url)
            .header("A2A-Version", "1.0")
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert!(card["name"].is_string(), "{url}: {card}");
    }
    let up_entry = &doc["entries"][2];
    assert_eq!(
        up_entry["url"],
        gw.url("/agents/up/.well-known/agent-card.json")
    );
    // A matching If-None-Match: 304.
    let (status, _, _, _) = ai_catalog(&gw, &[("if-none-match", &etag)]).await;
    assert_eq!(status, 304);
    // The root card (both shapes) links to it by the draft's `ai-catalog` relation.
    for version in ["1.0", ""] {
        let resp = gw
            .client
            .get(gw.url("/.well-known/agent-card.json"))
            .header("A2A-Version", version)
            .send()
            .await
            .unwrap();
        let link = resp.headers()["link"].to_str().unwrap();
        assert!(
            link.starts_with("</.well-known/ai-catalog.json>; rel=\"ai-catalog\""),
            "{link}"
        );
    }
}

#[tokio::test]
async fn with_auth_the_ai_catalog_lists_what_each_caller_may_reach() {
    let gw = TestGateway::with_config(AUTH).await;
    let (status, _, _, body) = ai_catalog(&gw, &[]).await;
    assert_eq!(status, 401, "{body}");
    let (status, _, user_tag, user) = ai_catalog(&gw, &[("x-api-key", "user-key")]).await;
    assert_eq!(status, 200);
    assert_eq!(identifiers(&user), ["echo"]);
    let (status, _, admin_tag, admin) = ai_catalog(&gw, &[("x-admin-key", "admin-key")]).await;
    assert_eq!(status, 200);
    assert_eq!(identifiers(&admin), ["echo", "scenario"]);
    assert_ne!(user_tag, admin_tag);
}
