//! Webhooks of the tarpit scenario, each its own destination (host:port): a healthy one that
//! records when each delivery arrived (its latency is arrival minus the event's status
//! timestamp, stamped by the gateway or the upstream when the event was made), and a tarpit
//! that answers 429 with `Retry-After: 600` or stalls 30 s before answering.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::Value;

/// How a webhook answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Behaviour {
    /// 200 at once.
    Healthy,
    /// Every other request 429 with `Retry-After: 600`, the rest stall 30 s, then 200.
    Tarpit,
}

/// One delivery as it arrived.
#[derive(Debug, Clone)]
pub struct Arrival {
    pub at: SystemTime,
    pub json: Value,
}

struct Shared {
    behaviour: Behaviour,
    seen: AtomicUsize,
    arrivals: Mutex<Vec<Arrival>>,
}

pub struct Webhook {
    pub addr: SocketAddr,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl Webhook {
    pub async fn start(behaviour: Behaviour) -> Self {
        let shared = Arc::new(Shared {
            behaviour,
            seen: AtomicUsize::new(0),
            arrivals: Mutex::new(Vec::new()),
        });
        let app = Router::new()
            .route("/{*path}", post(answer))
            .with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a webhook port");
        let addr = listener.local_addr().expect("a bound address");
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self { addr, shared, task }
    }

    /// A push config URL on this webhook.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Requests received (answered or not yet).
    pub fn seen(&self) -> usize {
        self.shared.seen.load(Ordering::SeqCst)
    }

    pub fn arrivals(&self) -> Vec<Arrival> {
        self.shared
            .arrivals
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

impl Drop for Webhook {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn answer(State(shared): State<Arc<Shared>>, body: Bytes) -> Response {
    let at = SystemTime::now();
    let n = shared.seen.fetch_add(1, Ordering::SeqCst);
    match shared.behaviour {
        Behaviour::Healthy => {
            let json = serde_json::from_slice(&body).unwrap_or(Value::Null);
            shared
                .arrivals
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(Arrival { at, json });
            StatusCode::OK.into_response()
        }
        Behaviour::Tarpit if n % 2 == 0 => {
            let mut r = StatusCode::TOO_MANY_REQUESTS.into_response();
            r.headers_mut()
                .insert("retry-after", HeaderValue::from_static("600"));
            r
        }
        Behaviour::Tarpit => {
            tokio::time::sleep(Duration::from_secs(30)).await;
            StatusCode::OK.into_response()
        }
    }
}

/// The latency of a delivery: arrival minus the status timestamp of the event it carries (a
/// task snapshot's or a status update's); `None` for events without one (artifact chunks).
pub fn latency(a: &Arrival) -> Option<Duration> {
    let stamp = a.json["task"]["status"]["timestamp"]
        .as_str()
        .or(a.json["statusUpdate"]["status"]["timestamp"].as_str())?;
    let made = chrono::DateTime::parse_from_rfc3339(stamp).ok()?;
    let made = SystemTime::UNIX_EPOCH
        + Duration::from_nanos(u64::try_from(made.timestamp_nanos_opt()?).ok()?);
    Some(a.at.duration_since(made).unwrap_or_default())
}

/// The `q` quantile (0..=1) of `samples`; zero when there are none.
pub fn quantile(samples: &[Duration], q: f64) -> Duration {
    if samples.is_empty() {
        return Duration::ZERO;
    }
    let mut sorted = samples.to_vec();
    sorted.sort_unstable();
    let rank = ((sorted.len() as f64) * q).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}
