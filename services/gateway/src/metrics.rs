//! The gateway's metrics: the process recorder (`a2a_process::metrics`, shared with the
//! worker) and the gauges read at scrape time. Counters and histograms are recorded where
//! things happen (`bindings::pipeline` for requests, the service, the store and the upstream
//! agents); the README's *Metrics* table is the catalogue.

use std::collections::HashMap;
use std::sync::{LazyLock, RwLock};

use a2a_process::metrics::Cached;
use a2a_types::v1::TaskState;
use axum::http::header;
use axum::response::IntoResponse;
use metrics::{Counter, Histogram};
use metrics_exporter_prometheus::PrometheusHandle;

/// The Prometheus exposition format's media type.
const TEXT_FORMAT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Installs the recorder (once per process) and returns its handle.
pub fn install() -> PrometheusHandle {
    a2a_process::metrics::install("a2a-gateway", env!("CARGO_PKG_VERSION"))
}

/// The `GET /metrics` answer: everything recorded (the caller, `app`, first records the gauges
/// that are state rather than events; this module does not know the service).
pub fn exposition(handle: &PrometheusHandle) -> impl IntoResponse + use<> {
    (
        [(header::CONTENT_TYPE, TEXT_FORMAT)],
        a2a_process::metrics::render(handle),
    )
}

/// The handles of one agent's turn metrics, resolved once per agent: they are recorded several
/// times per task. Agents are configured, so the set is closed.
struct AgentMetrics {
    created: Counter,
    turn: Histogram,
    /// `a2a_task_transitions_total{agent,state}` by the state's number.
    transitions: [Cached<Counter>; TaskState::AuthRequired as usize + 1],
    agent: String,
}

static AGENTS: LazyLock<RwLock<HashMap<String, &'static AgentMetrics>>> =
    LazyLock::new(Default::default);

/// `agent`'s handles, or `None` while no recorder is installed (metrics are off).
fn agent_metrics(agent: &str) -> Option<&'static AgentMetrics> {
    if !a2a_process::metrics::installed() {
        return None;
    }
    if let Some(m) = AGENTS.read().unwrap_or_else(|e| e.into_inner()).get(agent) {
        return Some(m);
    }
    let mut agents = AGENTS.write().unwrap_or_else(|e| e.into_inner());
    let m = agents.entry(agent.to_owned()).or_insert_with(|| {
        // Leaked once per configured agent: the handles live as long as the process.
        Box::leak(Box::new(AgentMetrics {
            created: metrics::counter!("a2a_tasks_created_total", "agent" => agent.to_owned()),
            turn: metrics::histogram!("a2a_turn_duration_seconds", "agent" => agent.to_owned()),
            transitions: [const { Cached::new() }; TaskState::AuthRequired as usize + 1],
            agent: agent.to_owned(),
        }))
    });
    Some(m)
}

/// Counts the state changes among `events` just committed for a task of `agent`
/// (`a2a_task_transitions_total{agent,state}`; the first event of a new task is the task as
/// created, so SUBMITTED counts too); `created` also counts the task
/// (`a2a_tasks_created_total{agent}`).
pub fn committed(agent: &str, created: bool, events: &[a2a_store::StoredEvent]) {
    let Some(m) = agent_metrics(agent) else {
        return;
    };
    if created {
        m.created.increment(1);
    }
    for e in events {
        if let Some(state) = a2a_types::state::event_state(&e.event)
            && let Some(cell) = m.transitions.get(state as usize)
            && let Some(c) = cell.get(|| {
                metrics::counter!(
                    "a2a_task_transitions_total",
                    "agent" => m.agent.clone(),
                    "state" => state.as_str_name(),
                )
            })
        {
            c.increment(1);
        }
    }
}

/// Times one turn of `agent`, from its start to its end however it ends
/// (`a2a_turn_duration_seconds{agent}`).
pub struct TurnTimer {
    histogram: Option<&'static Histogram>,
    started: std::time::Instant,
}

impl TurnTimer {
    pub fn start(agent: &str) -> Self {
        Self {
            histogram: agent_metrics(agent).map(|m| &m.turn),
            started: std::time::Instant::now(),
        }
    }
}

impl Drop for TurnTimer {
    fn drop(&mut self) {
        if let Some(h) = self.histogram {
            h.record(self.started.elapsed().as_secs_f64());
        }
    }
}

/// One call to an upstream agent: `a2a_upstream_calls_total{agent,binding,method,outcome}` and
/// `a2a_upstream_call_duration_seconds{agent,binding,method}`. The heartbeat's probe is not a
/// call (it shows as `a2a_upstream_healthy`).
pub fn upstream_call(
    agent: &str,
    binding: &'static str,
    method: &'static str,
    error: Option<&a2a_types::A2aError>,
    elapsed: std::time::Duration,
) {
    let outcome = error.map_or("ok", |e| e.codes().reason);
    metrics::counter!(
        "a2a_upstream_calls_total",
        "agent" => agent.to_owned(),
        "binding" => binding,
        "method" => method,
        "outcome" => outcome,
    )
    .increment(1);
    metrics::histogram!(
        "a2a_upstream_call_duration_seconds",
        "agent" => agent.to_owned(),
        "binding" => binding,
        "method" => method,
    )
    .record(elapsed.as_secs_f64());
}

/// An upstream card refused because its signature did not verify with the keys trusted for
/// the agent (`a2a_upstream_card_rejected_total{agent,reason}`; reason: `unsigned`,
/// `malformed`, `unknown_key`, `bad_signature`, `keys_unavailable`), or because credentials
/// would go to it over plain http (`insecure_credentials`).
pub fn upstream_card_rejected(agent: &str, reason: &'static str) {
    metrics::counter!(
        "a2a_upstream_card_rejected_total",
        "agent" => agent.to_owned(),
        "reason" => reason,
    )
    .increment(1);
}
