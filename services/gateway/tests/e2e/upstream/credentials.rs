//! Credentials toward an upstream that authenticates its callers: the front presents an OAuth2
//! client-credentials token (from a real issuer) or an API key, where the upstream's card says.

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
         token_url = \"{}/token\", scopes = [\"{WRITE}\"] }}",
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
    let gw = front(&up, "credentials = { api_key = \"bob-secret\" }").await;
    completes_through(&gw).await;
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
    let wrong = front(&up, "credentials = { api_key = \"not-a-key\" }").await;
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
