//! A small, real OIDC issuer for the auth tests: an axum server on port 0 serving discovery,
//! a JWKS with an RS256 and an ES256 key, a client-credentials token endpoint, and key rotation.
//! Keys are generated at start (aws-lc-rs), so no key material lives in the repository.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use aws_lc_rs::encoding::AsDer;
use aws_lc_rs::rsa::{KeyPair as RsaKeyPair, KeySize};
use aws_lc_rs::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair};
use axum::Router;
use axum::extract::State;
use axum::routing::{get, post};
use base64::Engine;
use jsonwebtoken::jwk::{Jwk, JwkSet};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Value, json};

pub const AUDIENCE: &str = "a2a-gateway";
pub const CLIENT_ID: &str = "robot";
pub const CLIENT_SECRET: &str = "robot-secret";

pub struct SigningKey {
    pub kid: String,
    pub alg: Algorithm,
    pub key: EncodingKey,
    jwk: Jwk,
}

impl SigningKey {
    pub fn rsa(kid: &str) -> Self {
        let pair = RsaKeyPair::generate(KeySize::Rsa2048).unwrap();
        let der = AsDer::<aws_lc_rs::encoding::Pkcs8V1Der>::as_der(&pair).unwrap();
        // jsonwebtoken takes RSA keys as PKCS#1 DER or as PEM (which may be PKCS#8).
        let pem = format!(
            "-----BEGIN PRIVATE KEY-----\n{}\n-----END PRIVATE KEY-----\n",
            base64::engine::general_purpose::STANDARD.encode(der.as_ref())
        );
        Self::new(
            kid,
            Algorithm::RS256,
            EncodingKey::from_rsa_pem(pem.as_bytes()).unwrap(),
        )
    }

    pub fn ec(kid: &str) -> Self {
        let pair = EcdsaKeyPair::generate(&ECDSA_P256_SHA256_FIXED_SIGNING).unwrap();
        let der = pair.to_pkcs8v1().unwrap();
        Self::new(
            kid,
            Algorithm::ES256,
            EncodingKey::from_ec_der(der.as_ref()),
        )
    }

    fn new(kid: &str, alg: Algorithm, key: EncodingKey) -> Self {
        let mut jwk = Jwk::from_encoding_key(&key, alg).unwrap();
        jwk.common.key_id = Some(kid.into());
        Self {
            kid: kid.into(),
            alg,
            key,
            jwk,
        }
    }

    pub fn sign(&self, claims: &Value) -> String {
        let mut header = Header::new(self.alg);
        header.kid = Some(self.kid.clone());
        jsonwebtoken::encode(&header, claims, &self.key).unwrap()
    }
}

struct Keys {
    /// Published in the JWKS; the first of each algorithm signs.
    published: Vec<Arc<SigningKey>>,
}

#[derive(Clone)]
struct Shared {
    url: String,
    keys: Arc<Mutex<Keys>>,
    jwks_fetches: Arc<AtomicUsize>,
    /// The `issuer` the discovery document names, when it is not `url` (a misconfigured or
    /// hostile document).
    discovered_issuer: Arc<Mutex<Option<String>>>,
    /// Discovery requests hang (an issuer that accepts connections and never answers).
    hang: Arc<AtomicBool>,
    /// Discovery requests received.
    discoveries: Arc<AtomicUsize>,
}

pub struct Issuer {
    shared: Shared,
    server: tokio::task::JoinHandle<()>,
}

impl Issuer {
    pub async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let shared = Shared {
            url,
            keys: Arc::new(Mutex::new(Keys {
                published: vec![
                    Arc::new(SigningKey::rsa("rsa-1")),
                    Arc::new(SigningKey::ec("ec-1")),
                ],
            })),
            jwks_fetches: Arc::new(AtomicUsize::new(0)),
            discovered_issuer: Arc::new(Mutex::new(None)),
            hang: Arc::new(AtomicBool::new(false)),
            discoveries: Arc::new(AtomicUsize::new(0)),
        };
        let app = Router::new()
            .route("/.well-known/openid-configuration", get(discovery))
            .route("/jwks", get(jwks))
            .route("/token", post(token))
            .with_state(shared.clone());
        let server = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        Self { shared, server }
    }

    pub fn url(&self) -> &str {
        &self.shared.url
    }

    /// Makes the discovery document name `issuer` (`None`: its own URL again).
    pub fn set_discovered_issuer(&self, issuer: Option<&str>) {
        *self.shared.discovered_issuer.lock().unwrap() = issuer.map(str::to_owned);
    }

    /// Makes discovery requests hang (`true`) or answer again.
    pub fn set_hanging(&self, hang: bool) {
        self.shared.hang.store(hang, Ordering::SeqCst);
    }

    /// How many discovery requests arrived.
    pub fn discoveries(&self) -> usize {
        self.shared.discoveries.load(Ordering::SeqCst)
    }

    /// How many times the JWKS was fetched.
    pub fn jwks_fetches(&self) -> usize {
        self.shared.jwks_fetches.load(Ordering::SeqCst)
    }

    /// The current key for `alg`.
    pub fn key(&self, alg: Algorithm) -> Arc<SigningKey> {
        let keys = self.shared.keys.lock().unwrap();
        keys.published
            .iter()
            .find(|k| k.alg == alg)
            .unwrap()
            .clone()
    }

    /// Standard claims for `sub`, valid for five minutes.
    pub fn claims(&self, sub: &str, scope: &str) -> Value {
        let now = chrono::Utc::now().timestamp();
        json!({"iss": self.shared.url, "aud": AUDIENCE, "sub": sub, "scope": scope,
               "iat": now, "nbf": now, "exp": now + 300})
    }

    /// A token signed with the current key of `alg`.
    pub fn token(&self, alg: Algorithm, claims: &Value) -> String {
        self.key(alg).sign(claims)
    }

    /// Replaces the RSA key with a new one (the old one leaves the JWKS).
    pub fn rotate_rsa(&self, kid: &str) {
        let fresh = Arc::new(SigningKey::rsa(kid));
        let mut keys = self.shared.keys.lock().unwrap();
        keys.published.retain(|k| k.alg != Algorithm::RS256);
        keys.published.insert(0, fresh);
    }
}

impl Drop for Issuer {
    fn drop(&mut self) {
        self.server.abort();
    }
}

async fn discovery(State(s): State<Shared>) -> axum::Json<Value> {
    s.discoveries.fetch_add(1, Ordering::SeqCst);
    if s.hang.load(Ordering::SeqCst) {
        tokio::time::sleep(std::time::Duration::from_secs(60)).await;
    }
    let issuer = s.discovered_issuer.lock().unwrap().clone();
    axum::Json(json!({
        "issuer": issuer.unwrap_or_else(|| s.url.clone()),
        "jwks_uri": format!("{}/jwks", s.url),
        "token_endpoint": format!("{}/token", s.url),
        "grant_types_supported": ["client_credentials"],
        "id_token_signing_alg_values_supported": ["RS256", "ES256"],
    }))
}

async fn jwks(State(s): State<Shared>) -> axum::Json<JwkSet> {
    s.jwks_fetches.fetch_add(1, Ordering::SeqCst);
    let keys = s.keys.lock().unwrap();
    axum::Json(JwkSet {
        keys: keys.published.iter().map(|k| k.jwk.clone()).collect(),
    })
}

/// Client credentials (RFC 6749 §4.4) with the secret in the form body.
async fn token(
    State(s): State<Shared>,
    body: String,
) -> Result<axum::Json<Value>, (axum::http::StatusCode, axum::Json<Value>)> {
    let form: std::collections::HashMap<String, String> =
        url::form_urlencoded::parse(body.as_bytes())
            .into_owned()
            .collect();
    let ok = form.get("grant_type").map(String::as_str) == Some("client_credentials")
        && form.get("client_id").map(String::as_str) == Some(CLIENT_ID)
        && form.get("client_secret").map(String::as_str) == Some(CLIENT_SECRET);
    if !ok {
        return Err((
            axum::http::StatusCode::UNAUTHORIZED,
            axum::Json(json!({"error": "invalid_client"})),
        ));
    }
    let scope = form.get("scope").cloned().unwrap_or_default();
    let now = chrono::Utc::now().timestamp();
    let claims = json!({"iss": s.url, "aud": AUDIENCE, "sub": CLIENT_ID, "scope": scope,
                        "iat": now, "exp": now + 300});
    let key = {
        let keys = s.keys.lock().unwrap();
        keys.published[0].clone()
    };
    Ok(axum::Json(json!({
        "access_token": key.sign(&claims),
        "token_type": "Bearer",
        "expires_in": 300,
    })))
}
