//! A small real A2A upstream (JSON-RPC, no streaming) that records every SendMessage with its
//! `Idempotency-Key` header, so tests can see what a gateway sent and how often. Its behaviour
//! is driven by the message text: `hold` answers with a WORKING task that stays WORKING (GetTask)
//! until [`Recorder::release`]; `hang` is never answered the first time it arrives, and answered
//! with a COMPLETED task when it comes again (what an upstream that honours the key would do).
//!
//! [`Recorder::forwarding`] records the same way in front of a real A2A server instead: every
//! request goes through with its headers and its answer streams back, except the answer to the
//! first send of a `hang` message, which the upstream gets and runs but the sender never hears
//! (as when the sender dies between its send and the answer).

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::extract::{Request, State};
use axum::http::{HeaderMap, header};
use axum::response::Response;
use axum::routing::{get, post};
use futures::StreamExt;
use serde_json::{Value, json};

use a2a_gateway::upstream::IDEMPOTENCY_EXTENSION;

/// One SendMessage as received.
#[derive(Debug, Clone)]
pub struct Sent {
    pub message_id: String,
    pub text: String,
    pub idempotency_key: Option<String>,
}

#[derive(Default)]
struct Shared {
    sent: Mutex<Vec<Sent>>,
    released: std::sync::atomic::AtomicBool,
}

pub struct Recorder {
    pub addr: SocketAddr,
    shared: Arc<Shared>,
    server: tokio::task::JoinHandle<()>,
}

impl Recorder {
    /// Serves on a free loopback port; `idempotent`: the card declares the extension.
    pub async fn start(idempotent: bool) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let extensions = if idempotent {
            json!([{"uri": IDEMPOTENCY_EXTENSION, "required": false}])
        } else {
            json!([])
        };
        let card = json!({
            "name": "recorder",
            "description": "records what it is sent",
            "version": "1.0.0",
            "supportedInterfaces": [{"url": format!("http://{addr}/rpc"),
                "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}],
            "capabilities": {"streaming": false, "extensions": extensions},
            "defaultInputModes": ["text/plain"],
            "defaultOutputModes": ["text/plain"],
            "skills": []
        });
        let shared = Arc::new(Shared::default());
        let app = axum::Router::new()
            .route(
                "/.well-known/agent-card.json",
                get(move || async move { axum::Json(card) }),
            )
            .route("/rpc", post(rpc))
            .with_state(shared.clone());
        let server = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        Self {
            addr,
            shared,
            server,
        }
    }

    /// Serves on `listener` in front of the A2A server at `target` (JSON-RPC and cards; no gRPC).
    pub async fn forwarding(listener: tokio::net::TcpListener, target: SocketAddr) -> Self {
        let addr = listener.local_addr().unwrap();
        let shared = Arc::new(Shared::default());
        let proxy = Arc::new(Proxy {
            shared: shared.clone(),
            target,
            client: reqwest::Client::new(),
        });
        let app = axum::Router::new().fallback(forward).with_state(proxy);
        let server = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        Self {
            addr,
            shared,
            server,
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every SendMessage received so far, in order.
    pub fn sent(&self) -> Vec<Sent> {
        self.shared.sent.lock().unwrap().clone()
    }

    /// `hold` tasks complete from now on.
    pub fn release(&self) {
        self.shared
            .released
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// Waits until `n` sends whose text is `text` have arrived (at most 20 s).
    pub async fn wait_sent(&self, text: &str, n: usize) -> Vec<Sent> {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        loop {
            let sent: Vec<Sent> = self.sent().into_iter().filter(|s| s.text == text).collect();
            if sent.len() >= n {
                return sent;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{n} sends of {text:?} never arrived: {:?}",
                self.sent()
            );
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        self.server.abort();
    }
}

fn task(id: &str, state: &str) -> Value {
    let mut t = json!({"id": id, "contextId": format!("ctx-{id}"), "status": {"state": state}});
    if state == "TASK_STATE_COMPLETED" {
        t["artifacts"] = json!([{"artifactId": "a", "parts": [{"text": "done"}]}]);
    }
    t
}

/// Records `message` sent with `headers`; how many sends of that message came before.
fn record(shared: &Shared, message: &Value, headers: &HeaderMap) -> usize {
    let sent = Sent {
        message_id: message["messageId"].as_str().unwrap_or_default().to_owned(),
        text: message["parts"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
        idempotency_key: headers
            .get("idempotency-key")
            .map(|v| v.to_str().unwrap().to_owned()),
    };
    let mut all = shared.sent.lock().unwrap();
    let before = all
        .iter()
        .filter(|s| s.message_id == sent.message_id)
        .count();
    all.push(sent);
    before
}

struct Proxy {
    shared: Arc<Shared>,
    target: SocketAddr,
    client: reqwest::Client,
}

/// Headers of one hop, not forwarded.
fn hop_by_hop(name: &header::HeaderName) -> bool {
    [
        header::HOST,
        header::CONNECTION,
        header::CONTENT_LENGTH,
        header::TRANSFER_ENCODING,
    ]
    .contains(name)
}

async fn forward(State(proxy): State<Arc<Proxy>>, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    let body = axum::body::to_bytes(body, usize::MAX).await.unwrap();
    let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let mut out = proxy
        .client
        .request(parts.method, format!("http://{}{path}", proxy.target))
        .body(body.clone());
    for (name, value) in parts.headers.iter().filter(|(n, _)| !hop_by_hop(n)) {
        out = out.header(name, value);
    }
    let rpc: Value = serde_json::from_slice(&body).unwrap_or_default();
    let message = &rpc["params"]["message"];
    let swallow = matches!(
        rpc["method"].as_str(),
        Some("SendMessage" | "SendStreamingMessage")
    ) && record(&proxy.shared, message, &parts.headers) == 0
        && message["parts"][0]["text"] == "hang";
    let answer = out.send().await.unwrap();
    if swallow {
        // Read to its end, so the upstream sees a client that stays, and never passed on.
        tokio::spawn(answer.bytes_stream().for_each(|_| async {}));
        return std::future::pending().await;
    }
    let mut back = Response::builder().status(answer.status());
    for (name, value) in answer.headers().iter().filter(|(n, _)| !hop_by_hop(n)) {
        back = back.header(name, value);
    }
    back.body(axum::body::Body::from_stream(answer.bytes_stream()))
        .unwrap()
}

async fn rpc(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    axum::Json(req): axum::Json<Value>,
) -> axum::Json<Value> {
    let id = req["id"].clone();
    let ok = |result: Value| axum::Json(json!({"jsonrpc": "2.0", "id": id, "result": result}));
    match req["method"].as_str().unwrap_or_default() {
        "SendMessage" => {
            let message = &req["params"]["message"];
            let before = record(&shared, message, &headers);
            let upstream_id = format!("up-{}", message["messageId"].as_str().unwrap_or_default());
            match message["parts"][0]["text"].as_str().unwrap_or_default() {
                "hold" => ok(json!({"task": task(&upstream_id, "TASK_STATE_WORKING")})),
                "hang" if before == 0 => std::future::pending().await,
                _ => ok(json!({"task": task(&upstream_id, "TASK_STATE_COMPLETED")})),
            }
        }
        "GetTask" => {
            let id = req["params"]["id"].as_str().unwrap_or_default();
            if !id.starts_with("up-") {
                return axum::Json(json!({"jsonrpc": "2.0", "id": req["id"],
                    "error": {"code": -32001, "message": format!("task {id} not found")}}));
            }
            let released = shared.released.load(std::sync::atomic::Ordering::SeqCst);
            let state = if released {
                "TASK_STATE_COMPLETED"
            } else {
                "TASK_STATE_WORKING"
            };
            ok(task(id, state))
        }
        other => axum::Json(json!({"jsonrpc": "2.0", "id": req["id"],
            "error": {"code": -32601, "message": format!("no method {other}")}})),
    }
}
