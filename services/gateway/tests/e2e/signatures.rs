//! Signed agent cards: every card the gateway serves (root, per agent, extended; over the
//! well-known paths and GetExtendedAgentCard on JSON-RPC, HTTP+JSON and gRPC; in both shapes,
//! the strict 1.0 card and the combined 0.3 one) verifies with an
//! independent JOSE implementation (`interop/python/verify_card.py`: jwcrypto over the
//! `rfc8785` package's canonical form, keys from the JWKS the `jku` names); a tampered card does
//! not; old signatures keep verifying while their key is published; and toward upstreams,
//! `verify_signature` accepts a card signed by a trusted key and refuses any other.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use a2a_types::v1::GetExtendedAgentCardRequest;
use a2a_types::v1::a2a_service_client::A2aServiceClient;
use serde_json::{Value, json};

use crate::harness::TestGateway;
use crate::metrics::Scrape;
use crate::upstream::{agent, error, script, upstream};

/// A directory of key files, removed when dropped.
struct Keys {
    dir: PathBuf,
}

impl Keys {
    fn new() -> Self {
        let dir = std::env::temp_dir().join(format!("a2a-card-keys-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        Self { dir }
    }

    /// A new ES256 signing key `kid` (PKCS#8 PEM); returns its path.
    fn signing(&self, kid: &str) -> PathBuf {
        let path = self.dir.join(format!("{kid}.pem"));
        std::fs::write(&path, a2a_push::es256_pem().unwrap()).unwrap();
        path
    }

    /// The public half of the signing key at `private`, as a PEM file.
    fn public(&self, private: &Path) -> PathBuf {
        use aws_lc_rs::encoding::{AsDer, PublicKeyX509Der};
        use aws_lc_rs::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair};
        use base64::Engine;
        let pem = std::fs::read_to_string(private).unwrap();
        let b64: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
        let der = base64::engine::general_purpose::STANDARD
            .decode(b64)
            .unwrap();
        let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &der).unwrap();
        let spki: PublicKeyX509Der = pair.public_key().as_der().unwrap();
        let b64 = base64::engine::general_purpose::STANDARD.encode(spki.as_ref());
        let path = private.with_extension("pub.pem");
        std::fs::write(
            &path,
            format!("-----BEGIN PUBLIC KEY-----\n{b64}\n-----END PUBLIC KEY-----\n"),
        )
        .unwrap();
        path
    }

    /// `[push] signing_keys` naming `keys` (`kid=path`, the first signs).
    fn config(keys: &[(&str, &Path)]) -> String {
        let list: Vec<String> = keys
            .iter()
            .map(|(kid, p)| format!("\"{kid}={}\"", p.display()))
            .collect();
        format!("[push]\nsigning_keys = [{}]\n", list.join(", "))
    }
}

impl Drop for Keys {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The verdict of `interop/python/verify_card.py` on `card`, trusting keys under `trusted`
/// (or the JWKS at `jwks`): `Ok(kid)` or `Err(why)`. It fetches the JWKS from the gateway of
/// this test, so it runs off the test's runtime thread.
async fn python_verify(card: &Value, trusted: &str, jwks: Option<&str>) -> Result<String, String> {
    let (card, trusted, jwks) = (card.clone(), trusted.to_owned(), jwks.map(str::to_owned));
    tokio::task::spawn_blocking(move || run_verifier(&card, &trusted, jwks.as_deref()))
        .await
        .unwrap()
}

fn run_verifier(card: &Value, trusted: &str, jwks: Option<&str>) -> Result<String, String> {
    let venv = std::env::var("A2A_VENV")
        .unwrap_or_else(|_| format!("{}/.cache/a2a-gateway-venv", std::env::var("HOME").unwrap()));
    let python = format!("{venv}/bin/python");
    assert!(
        Path::new(&python).exists(),
        "no Python venv at {venv}: run scripts/venv (it installs \
         interop/python/requirements.txt, jwcrypto and rfc8785 included), or set A2A_VENV"
    );
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../interop/python/verify_card.py"
    );
    let mut child = Command::new(python)
        .arg(script)
        .arg(trusted)
        .args(jwks)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the verifier starts");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(card.to_string().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    match (out.status.code(), stdout.strip_prefix("verified ")) {
        (Some(0), Some(kid)) => Ok(kid.to_owned()),
        (Some(3), _) => Err(stdout),
        _ => panic!("the verifier failed: {stdout} {stderr}"),
    }
}

async fn get_json(gw: &TestGateway, path: &str) -> Value {
    get_as(gw, path, Some("1.0")).await
}

/// `path` with `A2A-Version: version` (none: no header), and the key of `KEY_AUTH`.
async fn get_as(gw: &TestGateway, path: &str, version: Option<&str>) -> Value {
    let mut req = gw.client.get(gw.url(path)).header("x-api-key", "the-key");
    if let Some(v) = version {
        req = req.header("a2a-version", v);
    }
    let resp = req.send().await.unwrap();
    assert_eq!(resp.status(), 200, "GET {path}");
    resp.json().await.unwrap()
}

/// The kid and jku of a card's (only) signature.
fn signer_of(card: &Value) -> (String, String) {
    use base64::Engine;
    let sigs = card["signatures"].as_array().expect("a signed card");
    assert_eq!(sigs.len(), 1, "{card}");
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(sigs[0]["protected"].as_str().unwrap())
        .unwrap();
    let header: Value = serde_json::from_slice(&raw).unwrap();
    assert_eq!(header["typ"], "JOSE");
    assert_eq!(header["alg"], "ES256");
    (
        header["kid"].as_str().unwrap().to_owned(),
        header["jku"].as_str().unwrap().to_owned(),
    )
}

#[tokio::test]
async fn every_card_served_verifies_with_an_independent_jose_library() {
    let keys = Keys::new();
    let key = keys.signing("card-key");
    let up = upstream("").await;
    let gw = TestGateway::with_config(&format!(
        "{}{}{}[extended_card]\ndescription = \"more\"\n",
        crate::errors::KEY_AUTH,
        Keys::config(&[("card-key", &key)]),
        agent("up", &up.url(""), ""),
    ))
    .await;
    let trusted = gw.url("");

    let root = get_json(&gw, "/.well-known/agent-card.json").await;
    assert_eq!(
        signer_of(&root),
        ("card-key".into(), gw.url("/.well-known/jwks.json"))
    );
    let root03 = get_as(&gw, "/.well-known/agent-card.json", None).await;
    let per_agent = get_json(&gw, "/agents/up/.well-known/agent-card.json").await;
    let per_agent03 = get_as(&gw, "/agents/up/.well-known/agent-card.json", None).await;
    let rest = get_json(&gw, "/a2a/rest/extendedAgentCard").await;
    let rest03 = get_as(&gw, "/a2a/rest/v1/card", None).await;
    let rpc: Value = gw
        .client
        .post(gw.url("/a2a/jsonrpc"))
        .header("a2a-version", "1.0")
        .header("x-api-key", "the-key")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "GetExtendedAgentCard"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let rpc = rpc["result"].clone();
    let rpc03: Value = gw
        .client
        .post(gw.url("/a2a/jsonrpc"))
        .header("x-api-key", "the-key")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "agent/getAuthenticatedExtendedCard"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let rpc03 = rpc03["result"].clone();
    let channel = tonic::transport::Channel::from_shared(format!("http://{}", gw.addr))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut grpc = A2aServiceClient::new(channel);
    let mut request = tonic::Request::new(GetExtendedAgentCardRequest::default());
    request
        .metadata_mut()
        .insert("a2a-version", "1.0".parse().unwrap());
    request
        .metadata_mut()
        .insert("x-api-key", "the-key".parse().unwrap());
    let grpc_card = grpc
        .get_extended_agent_card(request)
        .await
        .unwrap()
        .into_inner();
    let grpc = serde_json::to_value(&grpc_card).unwrap();
    assert_eq!(rest["description"], "more");

    for (what, card) in [
        ("root", &root),
        ("root, 0.3 shape", &root03),
        ("per agent", &per_agent),
        ("per agent, 0.3 shape", &per_agent03),
        ("extended over HTTP+JSON", &rest),
        ("extended over HTTP+JSON 0.3 (/v1/card)", &rest03),
        ("extended over JSON-RPC", &rpc),
        ("extended over JSON-RPC 0.3", &rpc03),
        ("extended over gRPC", &grpc),
    ] {
        assert_eq!(
            python_verify(card, &trusted, None).await,
            Ok("card-key".into()),
            "the {what} card"
        );
        // One field changed: the signature no longer covers the card.
        let mut tampered = card.clone();
        tampered["description"] = json!(format!("{} (tampered)", card["description"]));
        let refused = python_verify(&tampered, &trusted, None).await.unwrap_err();
        assert!(
            refused.contains("card-key"),
            "the tampered {what} card: {refused}"
        );
    }
    // Each shape is signed over its own canonical form: the 1.0 card (every 1.0 binding
    // returns the same one, one signature) and the combined card (the 0.3 paths and methods),
    // whose 1.0 members are that card's.
    assert_eq!(rpc, grpc);
    assert_eq!(rest, rpc);
    assert_eq!(rest03, rpc03);
    assert_ne!(rest["signatures"], rest03["signatures"]);
    assert_ne!(root["signatures"], root03["signatures"]);
    for (key, value) in rpc.as_object().unwrap() {
        match key.as_str() {
            "signatures" => {}
            // The 0.3 card adds the OpenAPI members (`type`, `in`) beside each 1.0 scheme.
            "securitySchemes" => assert_eq!(
                rest03[key]["key"]["apiKeySecurityScheme"],
                value["key"]["apiKeySecurityScheme"]
            ),
            _ => assert_eq!(&rest03[key], value, "the extended card's {key} over 0.3"),
        }
    }
    assert_eq!(rest03["protocolVersion"], "0.3.0");
    assert!(rest.get("protocolVersion").is_none());
    // Served twice, the same bytes (the signature is cached, not made per request).
    assert_eq!(get_json(&gw, "/.well-known/agent-card.json").await, root);
    // A skill added to the per-agent card is a change the signature catches too.
    let mut grown = per_agent.clone();
    grown["skills"]
        .as_array_mut()
        .unwrap()
        .push(json!({"id": "x", "name": "x", "description": "x", "tags": ["x"]}));
    assert!(python_verify(&grown, &trusted, None).await.is_err());
}

/// Key rotation on one address: a card signed with the old key still verifies once the new key
/// signs, as long as the old one is published; dropped from the JWKS, it no longer does.
#[tokio::test]
async fn old_signatures_verify_while_their_key_is_published() {
    let keys = Keys::new();
    let (old, new) = (keys.signing("old"), keys.signing("new"));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let gw = TestGateway::on_listener(listener, &Keys::config(&[("old", &old)])).await;
    let by_old = get_json(&gw, "/.well-known/agent-card.json").await;
    let trusted = gw.url("");
    assert_eq!(
        python_verify(&by_old, &trusted, None).await,
        Ok("old".into())
    );
    gw.stop().await;

    let rebind = || async {
        loop {
            match tokio::net::TcpListener::bind(addr).await {
                Ok(l) => break l,
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        }
    };
    let both = Keys::config(&[("new", &new), ("old", &old)]);
    let gw = TestGateway::on_listener(rebind().await, &both).await;
    let by_new = get_json(&gw, "/.well-known/agent-card.json").await;
    assert_eq!(signer_of(&by_new).0, "new");
    assert_eq!(
        python_verify(&by_new, &trusted, None).await,
        Ok("new".into())
    );
    assert_eq!(
        python_verify(&by_old, &trusted, None).await,
        Ok("old".into()),
        "the card signed before the rotation"
    );
    gw.stop().await;

    let gw = TestGateway::on_listener(rebind().await, &Keys::config(&[("new", &new)])).await;
    assert!(python_verify(&by_old, &trusted, None).await.is_err());
    assert!(python_verify(&by_new, &trusted, None).await.is_ok());
    gw.stop().await;
}

#[tokio::test]
async fn upstream_cards_are_used_only_when_signed_by_a_trusted_key() {
    let keys = Keys::new();
    let up_key = keys.signing("up-key");
    let stranger = keys.signing("stranger");
    let up = upstream(&Keys::config(&[("up-key", &up_key)])).await;
    // Another signer, whose JWKS does not have the upstream's key.
    let other = upstream(&Keys::config(&[("stranger", &stranger)])).await;
    let verified = |trust: String| {
        agent(
            "up",
            &up.url(""),
            &format!("verify_signature = true\n{trust}"),
        )
    };

    // Trusted by JWKS URL, and by PEM file: accepted, and turns go through.
    for trust in [
        format!(
            "trusted_jwks_url = \"{}\"",
            up.url("/.well-known/jwks.json")
        ),
        format!("trusted_keys = [\"{}\"]", keys.public(&up_key).display()),
    ] {
        // Started once the first card fetch has finished (`app::start`).
        let front = TestGateway::with_config(&verified(trust.clone())).await;
        let sent = front
            .ok("SendMessage", script("up", json!({"chunks": 1}), json!({})))
            .await;
        assert_eq!(
            sent["task"]["status"]["state"], "TASK_STATE_COMPLETED",
            "{trust}: {sent}"
        );
    }

    // Refused: a PEM key that did not sign it, and a JWKS without its key.
    for (trust, reason) in [
        (
            format!("trusted_keys = [\"{}\"]", keys.public(&stranger).display()),
            "bad_signature",
        ),
        (
            format!(
                "trusted_jwks_url = \"{}\"",
                other.url("/.well-known/jwks.json")
            ),
            "unknown_key",
        ),
    ] {
        let front = TestGateway::with_admin(&verified(trust.clone())).await;
        let rejected = |s: &Scrape| {
            s.value(
                "a2a_upstream_card_rejected_total",
                &[("agent", "up"), ("reason", reason)],
            )
        };
        // Each front refuses on its first fetch (and again on each retry).
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while rejected(&Scrape::take(&front).await) < 1.0 {
            assert!(
                std::time::Instant::now() < deadline,
                "{trust}: no {reason} counted"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let e = error(&front, "SendMessage", script("up", json!({}), json!({}))).await;
        assert!(
            e["message"]
                .as_str()
                .unwrap_or_default()
                .contains("unavailable"),
            "{trust}: {e}"
        );
        let card = front
            .client
            .get(front.url("/agents/up/.well-known/agent-card.json"))
            .send()
            .await
            .unwrap();
        assert_eq!(card.status(), 404, "{trust}: a refused card is not served");
    }
}
