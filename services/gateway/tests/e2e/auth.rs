//! Authentication and isolation over all three bindings, against a real OIDC issuer
//! ([`crate::issuer`]) and a real gateway whose `[auth]` declares an API key scheme and an
//! OpenID Connect scheme.

use a2a_client::{A2aClient, Binding, BindingKind, ClientError};
use a2a_types::A2aError;
use a2a_types::v1::{GetExtendedAgentCardRequest, SendMessageRequest, SendMessageResponse};
use jsonwebtoken::Algorithm;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::harness::{TestGateway, user_message};
use crate::issuer::{AUDIENCE, CLIENT_ID, CLIENT_SECRET, Issuer, SigningKey};

pub const BINDINGS: [BindingKind; 3] = [
    BindingKind::JsonRpc,
    BindingKind::HttpJson,
    BindingKind::Grpc,
];

pub const WRITE: &str = "a2a:write";

/// Alice's key is stored hashed, Bob's in clear (both forms are accepted).
pub fn config(issuer: &str, min_refresh: u64, ttl: u64) -> String {
    let alice_hash = sha256_hex("alice-secret");
    format!(
        r#"
[auth]
requirements = [{{ oidc = ["{WRITE}"] }}, {{ key = [] }}]

[auth.schemes.key]
scheme = {{ apiKeySecurityScheme = {{ location = "header", name = "X-API-Key" }} }}
keys = [{{ id = "alice", sha256 = "{alice_hash}" }}, {{ id = "bob", key = "bob-secret" }}]

[auth.schemes.oidc]
scheme = {{ openIdConnectSecurityScheme = {{ openIdConnectUrl = "{issuer}/.well-known/openid-configuration" }} }}
issuer = "{issuer}"
audiences = ["{AUDIENCE}"]
jwks_min_refresh_secs = {min_refresh}
jwks_ttl_secs = {ttl}

[extended_card]
description = "the extended card"
"#
    )
}

fn sha256_hex(s: &str) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(s.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

pub async fn setup(min_refresh: u64) -> (Issuer, TestGateway) {
    setup_with_ttl(min_refresh, 600).await
}

async fn setup_with_ttl(min_refresh: u64, ttl: u64) -> (Issuer, TestGateway) {
    let issuer = Issuer::start().await;
    let gw = TestGateway::with_config(&config(issuer.url(), min_refresh, ttl)).await;
    (issuer, gw)
}

pub fn client(gw: &TestGateway, kind: BindingKind, header: Option<(&str, &str)>) -> A2aClient {
    let binding = match kind {
        BindingKind::JsonRpc => Binding::JsonRpc {
            url: gw.url("/a2a/jsonrpc"),
        },
        BindingKind::HttpJson => Binding::Rest {
            url: gw.url("/a2a/rest"),
        },
        BindingKind::Grpc => Binding::Grpc {
            endpoint: gw.addr.to_string(),
        },
    };
    let c = A2aClient::new(binding).unwrap();
    match header {
        Some((name, value)) => c.with_header(name, value).unwrap(),
        None => c,
    }
}

pub fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}

pub fn wire<T: DeserializeOwned>(v: Value) -> T {
    serde_json::from_value(v).expect("valid ProtoJSON")
}

pub async fn send(c: &A2aClient) -> Result<SendMessageResponse, ClientError> {
    c.send_message(wire(json!({"message": user_message("hi")})))
        .await
}

/// `a` and `b` are different owners: a task `a` creates is missing for `b` (GetTask, and not
/// in `b`'s ListTasks), and the other way round.
pub async fn assert_separate_owners(a: &A2aClient, b: &A2aClient, who: &str) {
    use a2a_types::v1::{GetTaskRequest, ListTasksRequest, send_message_response::Payload};
    for (x, y) in [(a, b), (b, a)] {
        let Some(Payload::Task(task)) = send(x).await.unwrap().payload else {
            panic!("{who}: expected a task");
        };
        let got = x.get_task(GetTaskRequest {
            id: task.id.clone(),
            ..Default::default()
        });
        assert_eq!(got.await.unwrap().id, task.id, "{who}: the owner reads it");
        let err = y
            .get_task(GetTaskRequest {
                id: task.id.clone(),
                ..Default::default()
            })
            .await
            .unwrap_err();
        assert!(
            matches!(a2a(err), A2aError::TaskNotFound { .. }),
            "{who}: another owner's task is missing"
        );
        let listed = y.list_tasks(ListTasksRequest::default()).await.unwrap();
        assert!(
            listed.tasks.iter().all(|t| t.id != task.id),
            "{who}: another owner's task is not listed"
        );
    }
}

pub fn a2a(e: ClientError) -> A2aError {
    match e {
        ClientError::A2a(e) => e,
        other => panic!("expected an A2A error, got {other}"),
    }
}

#[tokio::test]
async fn no_credentials_are_unauthenticated_on_every_binding() {
    let (_issuer, gw) = setup(10).await;
    for kind in BINDINGS {
        let err = a2a(send(&client(&gw, kind, None)).await.unwrap_err());
        assert!(
            matches!(err, A2aError::Unauthenticated(_)),
            "{kind:?}: {err}"
        );
    }
    // HTTP level: 401 with both challenges, on REST and on JSON-RPC (JSON-RPC error body).
    let rest = gw
        .client
        .post(gw.url("/a2a/rest/message:send"))
        .json(&json!({"message": user_message("hi")}))
        .send()
        .await
        .unwrap();
    assert_eq!(rest.status(), 401);
    let challenge = rest.headers()["www-authenticate"].to_str().unwrap();
    assert!(
        challenge.starts_with(r#"Bearer realm="a2a-gateway""#),
        "{challenge}"
    );
    assert!(challenge.contains(r#"ApiKey realm="a2a-gateway", in="header", name="x-api-key""#));
    let rpc = gw
        .post_raw(
            json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
                   "params": {"message": user_message("hi")}})
            .to_string(),
        )
        .await;
    assert_eq!(rpc.status(), 401);
    assert!(rpc.headers().contains_key("www-authenticate"));
    let body: Value = rpc.json().await.unwrap();
    assert_eq!(body["error"]["code"], -31401);
    assert_eq!(body["id"], 1);
}

#[tokio::test]
async fn bad_credentials_are_rejected_on_every_binding() {
    let (issuer, gw) = setup(0).await;
    let now = chrono::Utc::now().timestamp();
    let mut expired = issuer.claims("alice", WRITE);
    expired["exp"] = json!(now - 600);
    expired["nbf"] = json!(now - 900);
    let mut wrong_iss = issuer.claims("alice", WRITE);
    wrong_iss["iss"] = json!("https://evil.example.com");
    let mut wrong_aud = issuer.claims("alice", WRITE);
    wrong_aud["aud"] = json!("someone-else");
    let mut not_yet = issuer.claims("alice", WRITE);
    not_yet["nbf"] = json!(now + 600);
    let b64 = |v: Value| {
        use base64::Engine;
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string())
    };
    let alg_none = format!(
        "{}.{}.",
        b64(json!({"alg": "none", "typ": "JWT", "kid": "rsa-1"})),
        b64(issuer.claims("alice", WRITE))
    );
    let stranger = SigningKey::rsa("rsa-1"); // a published kid, but not the issuer's key
    let unknown = SigningKey::ec("ec-unknown");
    let cases: Vec<(&str, String, String)> = vec![
        ("wrong API key", "x-api-key".into(), "not-a-key".into()),
        (
            "expired",
            "authorization".into(),
            bearer(&issuer.token(Algorithm::RS256, &expired)),
        ),
        (
            "not yet valid",
            "authorization".into(),
            bearer(&issuer.token(Algorithm::ES256, &not_yet)),
        ),
        (
            "wrong issuer",
            "authorization".into(),
            bearer(&issuer.token(Algorithm::RS256, &wrong_iss)),
        ),
        (
            "wrong audience",
            "authorization".into(),
            bearer(&issuer.token(Algorithm::ES256, &wrong_aud)),
        ),
        ("alg none", "authorization".into(), bearer(&alg_none)),
        (
            "forged signature",
            "authorization".into(),
            bearer(&stranger.sign(&issuer.claims("alice", WRITE))),
        ),
        (
            "unknown key",
            "authorization".into(),
            bearer(&unknown.sign(&issuer.claims("alice", WRITE))),
        ),
        ("garbage", "authorization".into(), bearer("not.a.jwt")),
    ];
    for kind in BINDINGS {
        for (case, name, value) in &cases {
            let err = a2a(send(&client(&gw, kind, Some((name, value))))
                .await
                .unwrap_err());
            let A2aError::Unauthenticated(msg) = &err else {
                panic!("{kind:?} {case}: expected Unauthenticated, got {err}");
            };
            // The reason is given, the credential is not echoed.
            let secret = value.trim_start_matches("Bearer ");
            assert!(!msg.contains(secret), "{kind:?} {case}: {msg}");
            assert!(!msg.is_empty());
        }
    }
}

#[tokio::test]
async fn valid_credentials_are_accepted_on_every_binding() {
    let (issuer, gw) = setup(10).await;
    // A client-credentials token from the issuer's token endpoint.
    let issued: Value = gw
        .client
        .post(format!("{}/token", issuer.url()))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!(
            "grant_type=client_credentials&client_id={CLIENT_ID}&client_secret={CLIENT_SECRET}&scope=a2a%3Awrite"
        ))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let cc = issued["access_token"].as_str().unwrap().to_owned();
    let creds = [
        ("x-api-key", "alice-secret".to_owned()),
        ("x-api-key", "bob-secret".to_owned()),
        (
            "authorization",
            bearer(&issuer.token(Algorithm::RS256, &issuer.claims("carol", WRITE))),
        ),
        (
            "authorization",
            bearer(&issuer.token(Algorithm::ES256, &issuer.claims("dave", "openid a2a:write"))),
        ),
        ("authorization", bearer(&cc)),
    ];
    for kind in BINDINGS {
        for (name, value) in &creds {
            let c = client(&gw, kind, Some((name, value)));
            send(&c)
                .await
                .unwrap_or_else(|e| panic!("{kind:?} {name}: {e}"));
            c.get_extended_agent_card(GetExtendedAgentCardRequest::default())
                .await
                .unwrap_or_else(|e| panic!("{kind:?} extended card: {e}"));
        }
        let err = client(&gw, kind, None)
            .get_extended_agent_card(GetExtendedAgentCardRequest::default())
            .await
            .unwrap_err();
        assert!(matches!(a2a(err), A2aError::Unauthenticated(_)));
    }
    // The JWKS was fetched once and then served from the cache.
    assert_eq!(issuer.jwks_fetches(), 1);
}

#[tokio::test]
async fn insufficient_scope_is_permission_denied_on_every_binding() {
    let (issuer, gw) = setup(10).await;
    let read_only = bearer(&issuer.token(Algorithm::RS256, &issuer.claims("erin", "a2a:read")));
    let mut scp = issuer.claims("erin", "");
    scp["scp"] = json!(["a2a:write"]);
    let scp_array = bearer(&issuer.token(Algorithm::ES256, &scp));
    for kind in BINDINGS {
        let err = a2a(
            send(&client(&gw, kind, Some(("authorization", &read_only))))
                .await
                .unwrap_err(),
        );
        assert!(
            matches!(err, A2aError::PermissionDenied(_)),
            "{kind:?}: {err}"
        );
        // `scp` as an array counts too.
        send(&client(&gw, kind, Some(("authorization", &scp_array))))
            .await
            .unwrap();
    }
    let resp = gw
        .client
        .post(gw.url("/a2a/rest/message:send"))
        .header("authorization", &read_only)
        .json(&json!({"message": user_message("hi")}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 403);
    let challenge = resp.headers()["www-authenticate"].to_str().unwrap();
    assert!(
        challenge.contains(r#"error="insufficient_scope""#),
        "{challenge}"
    );
}

#[tokio::test]
async fn a_rotated_issuer_key_is_accepted_after_a_refresh() {
    let (issuer, gw) = setup(0).await;
    let c = |token: String| {
        client(
            &gw,
            BindingKind::HttpJson,
            Some(("authorization", &bearer(&token))),
        )
    };
    send(&c(
        issuer.token(Algorithm::RS256, &issuer.claims("frank", WRITE))
    ))
    .await
    .unwrap();
    assert_eq!(issuer.jwks_fetches(), 1);
    issuer.rotate_rsa("rsa-2");
    send(&c(
        issuer.token(Algorithm::RS256, &issuer.claims("frank", WRITE))
    ))
    .await
    .unwrap();
    assert_eq!(
        issuer.jwks_fetches(),
        2,
        "an unknown kid refetches the JWKS"
    );
}

/// With the issuer down and the cache expired, the keys last fetched are still trusted; a key
/// never seen is not.
#[tokio::test]
async fn an_issuer_outage_keeps_the_last_keys() {
    let (issuer, gw) = setup_with_ttl(0, 0).await;
    let c = |token: &str| {
        client(
            &gw,
            BindingKind::Grpc,
            Some(("authorization", &bearer(token))),
        )
    };
    let token = issuer.token(Algorithm::RS256, &issuer.claims("hal", WRITE));
    send(&c(&token)).await.unwrap();
    let claims = issuer.claims("hal", WRITE);
    drop(issuer);
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    send(&c(&token)).await.unwrap();
    let stranger = SigningKey::ec("never-published").sign(&claims);
    let err = a2a(send(&c(&stranger)).await.unwrap_err());
    assert!(
        matches!(&err, A2aError::Unauthenticated(m) if m.contains("unavailable")),
        "{err}"
    );
}

/// A discovery document that names another issuer makes the scheme unusable, and the refusal
/// says why; once the document is right again, tokens are accepted.
#[tokio::test]
async fn a_discovery_document_for_another_issuer_is_not_trusted() {
    let (issuer, gw) = setup(0).await;
    issuer.set_discovered_issuer(Some("https://elsewhere.example.com"));
    let token = bearer(&issuer.token(Algorithm::RS256, &issuer.claims("alice", WRITE)));
    for kind in BINDINGS {
        let err = send(&client(&gw, kind, Some(("authorization", &token))))
            .await
            .unwrap_err();
        match a2a(err) {
            A2aError::Unauthenticated(m) => assert!(
                m.contains("names issuer \"https://elsewhere.example.com\""),
                "{kind:?}: {m}"
            ),
            other => panic!("{kind:?}: {other:?}"),
        }
    }
    assert_eq!(issuer.jwks_fetches(), 0, "no keys were fetched from it");
    issuer.set_discovered_issuer(None);
    send(&client(
        &gw,
        BindingKind::JsonRpc,
        Some(("authorization", &token)),
    ))
    .await
    .unwrap();
}

/// The keys of an https issuer must come from an https `jwks_uri`.
#[tokio::test]
async fn an_https_issuer_with_an_http_jwks_uri_is_not_trusted() {
    let issuer = Issuer::start().await;
    let configured = "https://issuer.example.com";
    issuer.set_discovered_issuer(Some(configured));
    let gw = TestGateway::with_config(&format!(
        r#"
[auth.schemes.oidc]
scheme = {{ httpAuthSecurityScheme = {{ scheme = "Bearer" }} }}
issuer = "{configured}"
metadata_url = "{}/.well-known/openid-configuration"
audiences = ["{AUDIENCE}"]
"#,
        issuer.url()
    ))
    .await;
    let mut claims = issuer.claims("alice", WRITE);
    claims["iss"] = configured.into();
    let token = bearer(&issuer.token(Algorithm::RS256, &claims));
    let err = send(&client(
        &gw,
        BindingKind::HttpJson,
        Some(("authorization", &token)),
    ))
    .await
    .unwrap_err();
    match a2a(err) {
        A2aError::Unauthenticated(m) => assert!(m.contains("is not https"), "{m}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(issuer.jwks_fetches(), 0);
}

#[tokio::test]
async fn unknown_key_ids_do_not_hammer_the_issuer() {
    let (issuer, gw) = setup(60).await;
    let c = |token: String| {
        client(
            &gw,
            BindingKind::JsonRpc,
            Some(("authorization", &bearer(&token))),
        )
    };
    send(&c(
        issuer.token(Algorithm::ES256, &issuer.claims("gina", WRITE))
    ))
    .await
    .unwrap();
    for i in 0..5 {
        let key = SigningKey::ec(&format!("made-up-{i}"));
        send(&c(key.sign(&issuer.claims("gina", WRITE))))
            .await
            .unwrap_err();
    }
    assert!(
        issuer.jwks_fetches() <= 2,
        "fetches: {}",
        issuer.jwks_fetches()
    );
}

#[tokio::test]
async fn the_public_card_lists_the_declared_schemes_without_credentials() {
    let (issuer, gw) = setup(10).await;
    let card = gw.card().await;
    assert_eq!(
        card["securitySchemes"],
        json!({
            // Each scheme also in its 0.3 (OpenAPI) form, for 0.3 clients of the same card.
            "key": {"apiKeySecurityScheme": {"location": "header", "name": "X-API-Key"},
                    "type": "apiKey", "in": "header", "name": "X-API-Key"},
            "oidc": {"openIdConnectSecurityScheme": {
                "openIdConnectUrl": format!("{}/.well-known/openid-configuration", issuer.url())},
                "type": "openIdConnect",
                "openIdConnectUrl": format!("{}/.well-known/openid-configuration", issuer.url())},
        })
    );
    assert_eq!(card["security"], json!([{"oidc": [WRITE]}, {"key": []}]));
    assert_eq!(
        card["securityRequirements"],
        json!([{"schemes": {"oidc": {"list": [WRITE]}}}, {"schemes": {"key": {}}}])
    );
    assert_eq!(card["capabilities"]["extendedAgentCard"], true);
    for path in ["/healthz", "/readyz"] {
        let status = gw.client.get(gw.url(path)).send().await.unwrap().status();
        assert!(status.is_success(), "{path}: {status}");
    }
}

/// The scenario agent's skill needs `a2a:scenario` on top of the card-wide requirements.
const SCENARIO: &str = "a2a:scenario";

#[tokio::test]
async fn a_skill_with_its_own_requirements_is_enforced_on_every_binding() {
    let issuer = Issuer::start().await;
    let config = config(issuer.url(), 10, 600).replace(
        "[auth.schemes.key]",
        &format!("[auth.skill_requirements]\nscenario = [{{ oidc = [\"{SCENARIO}\"] }}]\n\n[auth.schemes.key]"),
    );
    let gw = TestGateway::with_config(&config).await;
    let writer = bearer(&issuer.token(Algorithm::RS256, &issuer.claims("frank", WRITE)));
    let both = issuer.claims("grace", &format!("{WRITE} {SCENARIO}"));
    let scenario_too = bearer(&issuer.token(Algorithm::ES256, &both));
    let to_scenario = || -> SendMessageRequest {
        wire(json!({"tenant": "scenario", "message": user_message("hi")}))
    };
    for kind in BINDINGS {
        let frank = client(&gw, kind, Some(("authorization", &writer)));
        // The echo skill has no requirements of its own.
        send(&frank).await.unwrap();
        let err = a2a(frank.send_message(to_scenario()).await.unwrap_err());
        assert!(
            matches!(&err, A2aError::PermissionDenied(m) if m.contains("skill scenario requires oidc [a2a:scenario]")),
            "{kind:?}: {err}"
        );
        // An API key carries no scopes: it cannot meet the skill's requirement either.
        let alice = client(&gw, kind, Some(("x-api-key", "alice-secret")));
        let err = a2a(alice.send_message(to_scenario()).await.unwrap_err());
        assert!(
            matches!(err, A2aError::PermissionDenied(_)),
            "{kind:?}: {err}"
        );
        let grace = client(&gw, kind, Some(("authorization", &scenario_too)));
        grace.send_message(to_scenario()).await.unwrap();
    }
    // The card publishes the skill's requirements on the skill.
    let card = gw.card().await;
    let skill = |id: &str| {
        card["skills"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["id"] == id)
            .cloned()
            .unwrap()
    };
    assert_eq!(
        skill("scenario")["securityRequirements"],
        json!([{"schemes": {"oidc": {"list": [SCENARIO]}}}])
    );
    assert!(skill("echo").get("securityRequirements").is_none());
}
