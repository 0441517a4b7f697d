//! Credentials toward an upstream that authenticates its callers: the front presents an OAuth2
//! client-credentials token (from a real issuer) or an API key, where the upstream's card says;
//! and never over plain http unless the agent allows it (`allow_insecure_credentials`): these
//! upstreams are all on `http://127.0.0.1`, so the tests that send credentials allow it.

use serde_json::json;

use super::{error, front, script};
use crate::auth::{WRITE, config as auth_config};
use crate::harness::{TestGateway, state};
use crate::issuer::{CLIENT_ID, CLIENT_SECRET, Issuer};

/// An upstream (default agent `scenario`) that requires an issuer token with `a2a:write`, or
/// one of the API keys of `auth_config`.
async fn guarded_upstream(issuer: &Issuer) -> TestGateway {
    let auth = auth_config(issuer.url(), 10, 600);
    TestGateway::with_config(&format!("default_agent = \"scenario\"\n{auth}")).await
}

async fn completes_through(gw: &TestGateway) {
    let resp = gw
        .ok("SendMessage", script("up", json!({"chunks": 2}), json!({})))
        .await;
    assert_eq!(state(&resp["task"]), "TASK_STATE_COMPLETED", "{resp}");
}

#[tokio::test]
async fn an_oauth2_client_credentials_token_reaches_a_guarded_upstream() {
    let issuer = Issuer::start().await;
    let up = guarded_upstream(&issuer).await;
    let creds = format!(
        "credentials = {{ client_id = \"{CLIENT_ID}\", client_secret = \"{CLIENT_SECRET}\", \
         token_url = \"{}/token\", scopes = [\"{WRITE}\"] }}\nallow_insecure_credentials = true",
        issuer.url()
    );
    let gw = front(&up, &creds).await;
    completes_through(&gw).await;
    // A second send reuses the cached token (it would work either way; this one must too).
    completes_through(&gw).await;
}

#[tokio::test]
async fn an_api_key_reaches_a_guarded_upstream_where_its_card_says() {
    let issuer = Issuer::start().await;
    let up = guarded_upstream(&issuer).await;
    let gw = front(
        &up,
        "credentials = { api_key = \"bob-secret\" }\nallow_insecure_credentials = true",
    )
    .await;
    completes_through(&gw).await;
}

/// `[[agents]] credentials` may name the key instead of holding it: an environment variable
/// (read through the configuration's lookup, as `A2A_*` are) or a file.
#[tokio::test]
async fn an_api_key_named_by_reference_reaches_a_guarded_upstream() {
    let issuer = Issuer::start().await;
    let up = guarded_upstream(&issuer).await;
    let entry = |creds: &str| {
        super::agent(
            "up",
            &up.url(""),
            &format!("credentials = {creds}\nallow_insecure_credentials = true"),
        )
    };
    let by_env = TestGateway::with_env(
        &entry("{ api_key_env = \"UPSTREAM_KEY\" }"),
        &[("UPSTREAM_KEY", "bob-secret".to_owned())],
    )
    .await;
    completes_through(&by_env).await;
    let file = std::env::temp_dir().join(format!("a2a-upstream-key-{}", uuid::Uuid::new_v4()));
    std::fs::write(&file, "bob-secret\n").unwrap();
    let by_file = TestGateway::with_config(&entry(&format!(
        "{{ api_key_file = {:?} }}",
        file.display().to_string()
    )))
    .await;
    completes_through(&by_file).await;
    let _ = std::fs::remove_file(&file);
}

#[tokio::test]
async fn without_credentials_a_guarded_upstream_refuses_and_the_caller_is_told() {
    let issuer = Issuer::start().await;
    let up = guarded_upstream(&issuer).await;
    let gw = front(&up, "").await;
    let err = error(
        &gw,
        "SendMessage",
        script("up", json!({"chunks": 1}), json!({})),
    )
    .await;
    assert!(err["code"].is_i64(), "{err}");
    let wrong = front(
        &up,
        "credentials = { api_key = \"not-a-key\" }\nallow_insecure_credentials = true",
    )
    .await;
    let err = error(
        &wrong,
        "SendMessage",
        script("up", json!({"chunks": 1}), json!({})),
    )
    .await;
    assert!(
        !err.to_string().contains("not-a-key"),
        "the secret never appears in an error: {err}"
    );
}

/// What the plain-http upstream of [`Plain`] received.
#[derive(Default)]
struct Seen {
    /// `POST /a2a/jsonrpc` requests, and whether each carried the API key.
    calls: Vec<bool>,
    /// `POST /token` requests (each would carry the client secret).
    token_posts: usize,
}

/// A real upstream on plain http: its card names a JSON-RPC interface, an apiKey scheme and an
/// OAuth2 clientCredentials flow whose token URL is its own `/token`, all `http://`. It answers
/// a send with a completed task, and records what reached it.
struct Plain {
    url: String,
    seen: std::sync::Arc<std::sync::Mutex<Seen>>,
}

impl Plain {
    async fn start() -> Self {
        use axum::routing::{get, post};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Seen::default()));
        let card = json!({
            "name": "plain", "description": "plain http", "version": "1",
            "supportedInterfaces": [{"url": format!("{url}/a2a/jsonrpc"),
                "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}],
            "capabilities": {}, "defaultInputModes": ["text/plain"],
            "defaultOutputModes": ["text/plain"], "skills": [],
            "securitySchemes": {
                "key": {"apiKeySecurityScheme": {"location": "header", "name": "X-API-Key"}},
                "oauth": {"oauth2SecurityScheme": {"flows": {"clientCredentials": {
                    "tokenUrl": format!("{url}/token"), "scopes": {}}}}}},
        });
        let (rpc, token) = (seen.clone(), seen.clone());
        let app = axum::Router::new()
            .route(
                "/.well-known/agent-card.json",
                get(move || {
                    let card = card.clone();
                    async move { axum::Json(card) }
                }),
            )
            .route(
                "/a2a/jsonrpc",
                post(
                    move |headers: axum::http::HeaderMap, body: axum::body::Bytes| {
                        let seen = rpc.clone();
                        async move {
                            seen.lock()
                                .unwrap()
                                .calls
                                .push(headers.contains_key("x-api-key"));
                            let req: serde_json::Value =
                                serde_json::from_slice(&body).unwrap_or_default();
                            axum::Json(
                                json!({"jsonrpc": "2.0", "id": req["id"], "result": {"task": {
                            "id": "up-1", "contextId": "ctx-1",
                            "status": {"state": "TASK_STATE_COMPLETED"}}}}),
                            )
                        }
                    },
                ),
            )
            .route(
                "/token",
                post(move || {
                    let seen = token.clone();
                    async move {
                        seen.lock().unwrap().token_posts += 1;
                        axum::Json(json!({"access_token": "t", "expires_in": 600}))
                    }
                }),
            );
        tokio::spawn(async move { axum::serve(listener, app).await });
        Self { url, seen }
    }
}

/// M9: an upstream whose card (fetched over http) names http URLs never gets the API key or the
/// client secret: the agent is refused with a reason, and sends fail as unavailable. With
/// `allow_insecure_credentials` the same agent is used (the control).
#[tokio::test]
async fn credentials_never_go_over_plain_http_unless_the_agent_allows_it() {
    let plain = Plain::start().await;
    let agent = |extra: &str| {
        format!(
            "[[agents]]\nname = \"up\"\ncard_url = \"{}\"\nhealth_interval_secs = 1\n{extra}\n",
            plain.url
        )
    };
    for creds in [
        "credentials = { api_key = \"the-key\" }",
        // The token URL from the card, http.
        "credentials = { client_id = \"gw\", client_secret = \"the-secret\" }",
    ] {
        let gw = TestGateway::with_config(&agent(creds)).await;
        let err = error(&gw, "SendMessage", script("up", json!({}), json!({}))).await;
        assert!(err["code"].is_i64(), "{creds}: {err}");
        assert!(!err.to_string().contains("the-key"), "{err}");
        let catalogue: serde_json::Value = gw
            .client
            .get(gw.url("/agents"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert!(
            catalogue.to_string().contains("unhealthy"),
            "{creds}: the agent is not in use: {catalogue}"
        );
        gw.stop().await;
    }
    {
        let seen = plain.seen.lock().unwrap();
        assert!(
            seen.calls.is_empty(),
            "no call reached it: {:?}",
            seen.calls
        );
        assert_eq!(seen.token_posts, 0, "the client secret was never posted");
    }
    // The control: allowed, the key goes with the call.
    let gw = TestGateway::with_config(&agent(
        "credentials = { api_key = \"the-key\" }\nallow_insecure_credentials = true",
    ))
    .await;
    let done = gw
        .ok("SendMessage", script("up", json!({}), json!({})))
        .await;
    assert_eq!(state(&done["task"]), "TASK_STATE_COMPLETED", "{done}");
    assert_eq!(plain.seen.lock().unwrap().calls, [true]);
    gw.stop().await;
}
