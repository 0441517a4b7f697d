//! A webhook receiver: records every request (headers, body, arrival), answers as scripted, and
//! can go down (its port refuses connections) and come back on the same port. The push tests of
//! the worker and of the embedded gateway share it, and [`verify`] checks a delivery's signature
//! the way a receiver would.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use a2a_push::DeliveryClaims;
use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{DecodingKey, Validation};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

#[derive(Debug, Clone)]
pub struct Received {
    pub headers: HeaderMap,
    pub body: Bytes,
    pub json: Value,
    pub status: u16,
}

#[derive(Default)]
struct Shared {
    requests: Mutex<Vec<Received>>,
    /// Answer 500 to this many requests first.
    fail_first: AtomicUsize,
    seen: AtomicUsize,
}

pub struct Receiver {
    pub addr: SocketAddr,
    shared: Arc<Shared>,
    stop: Option<CancellationToken>,
}

impl Receiver {
    pub async fn start() -> Self {
        Self::start_failing(0).await
    }

    /// Answers 500 to the first `n` requests, then 200.
    pub async fn start_failing(n: usize) -> Self {
        let shared = Arc::new(Shared::default());
        shared.fail_first.store(n, Ordering::SeqCst);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let mut r = Self {
            addr,
            shared,
            stop: None,
        };
        r.serve(listener);
        r
    }

    fn serve(&mut self, listener: tokio::net::TcpListener) {
        let stop = CancellationToken::new();
        let app = Router::new()
            .route("/{*path}", post(record))
            .with_state(self.shared.clone());
        let token = stop.clone();
        tokio::spawn(async move {
            axum::serve(listener, app)
                .with_graceful_shutdown(async move { token.cancelled().await })
                .await
                .unwrap();
        });
        self.stop = Some(stop);
    }

    /// The receiver's URL for `path` (on 127.0.0.1).
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Stops listening: connections are refused until [`up`](Self::up).
    pub async fn down(&mut self) {
        if let Some(stop) = self.stop.take() {
            stop.cancel();
        }
        // Wait until the port refuses.
        for _ in 0..100 {
            if tokio::net::TcpStream::connect(self.addr).await.is_err() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("the receiver did not go down");
    }

    /// Listens again on the same port.
    pub async fn up(&mut self) {
        let listener = tokio::net::TcpListener::bind(self.addr).await.unwrap();
        self.serve(listener);
    }

    pub fn requests(&self) -> Vec<Received> {
        self.shared.requests.lock().unwrap().clone()
    }

    /// Waits until `done` holds for the requests, up to `patience`.
    pub async fn wait_for(&self, patience: Duration, done: impl Fn(&[Received]) -> bool) {
        let deadline = Instant::now() + patience;
        loop {
            if done(&self.requests()) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the receiver did not get what it expected in {patience:?}; it has {} requests: {:?}",
                self.requests().len(),
                self.requests()
                    .iter()
                    .map(|r| r.json.to_string())
                    .collect::<Vec<_>>()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

async fn record(State(shared): State<Arc<Shared>>, headers: HeaderMap, body: Bytes) -> StatusCode {
    let n = shared.seen.fetch_add(1, Ordering::SeqCst);
    let status = if n < shared.fail_first.load(Ordering::SeqCst) {
        StatusCode::INTERNAL_SERVER_ERROR
    } else {
        StatusCode::OK
    };
    let json = serde_json::from_slice(&body).unwrap_or(Value::Null);
    shared.requests.lock().unwrap().push(Received {
        headers,
        body,
        json,
        status: status.as_u16(),
    });
    status
}

/// Verifies a delivery's signature header against the gateway's JWKS (fetched from
/// `gateway_url`) the way a receiver would: key by `kid`, audience = the webhook `url`, issuer =
/// the gateway, body hash; returns the claims. Panics when anything does not hold.
pub async fn verify(gateway_url: &str, jwt: &str, url: &str, body: &[u8]) -> DeliveryClaims {
    let header = jsonwebtoken::decode_header(jwt).unwrap();
    let jwks: JwkSet = reqwest::get(format!("{gateway_url}{}", a2a_push::JWKS_PATH))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let jwk = jwks
        .find(header.kid.as_deref().expect("a kid"))
        .expect("the kid is in the JWKS");
    let mut validation = Validation::new(header.alg);
    validation.set_audience(&[url]);
    validation.set_issuer(&[gateway_url]);
    validation.set_required_spec_claims(&["exp", "iat", "iss", "aud"]);
    let claims: DeliveryClaims =
        jsonwebtoken::decode(jwt, &DecodingKey::from_jwk(jwk).unwrap(), &validation)
            .expect("the signature verifies")
            .claims;
    assert_eq!(claims.body_sha256, a2a_push::body_sha256(body));
    claims
}

/// What a StreamResponse body is, for comparing sequences: kind plus state or chunk text.
pub fn describe(body: &Value) -> String {
    if let Some(task) = body.get("task") {
        return format!("task {}", task["status"]["state"].as_str().unwrap_or("?"));
    }
    if let Some(s) = body.get("statusUpdate") {
        return format!("status {}", s["status"]["state"].as_str().unwrap_or("?"));
    }
    if let Some(a) = body.get("artifactUpdate") {
        return format!(
            "chunk {}",
            a["artifact"]["parts"][0]["text"].as_str().unwrap_or("?")
        );
    }
    format!("other {body}")
}

/// The task id a StreamResponse body is about.
pub fn task_id_of(body: &Value) -> &str {
    body["task"]["id"]
        .as_str()
        .or(body["statusUpdate"]["taskId"].as_str())
        .or(body["artifactUpdate"]["taskId"].as_str())
        .unwrap_or_default()
}
