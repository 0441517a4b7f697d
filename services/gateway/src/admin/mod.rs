//! The admin API for upstream agents (README, *Upstream agents*), on the admin listener only:
//! `GET`/`POST /admin/v1/agents`, `GET`/`PUT`/`DELETE /admin/v1/agents/{name}`,
//! `GET /admin/v1/audit`. Bodies are an `[[agents]]` entry as JSON (the same field names and
//! validation), with credentials by reference only (an inline secret is a 400: the entry is
//! stored). Authenticated by a bearer token whose SHA-256 (hex) is in `[admin] token_sha256` /
//! `A2A_ADMIN_TOKEN_SHA256`, compared in constant time, or by a token of `[admin] oidc_scheme`
//! carrying `[admin] scope`; without either configured the routes do not exist (404).
//!
//! The handlers are thin: the record of the API's agents is an
//! [`a2a_store::AgentRegistryStore`] (in memory embedded; with PostgreSQL shared, and every
//! replica applies a change within about a second: [`share`]); this module turns entries
//! into routed agents. The file's `[[agents]]` and the built-in agents are listed read-only
//! (409 on a change). Each agent has a strong `ETag` (the SHA-256 of its entry); `PUT` and
//! `DELETE` honour `If-Match` (412 when another change came first). A new or replaced agent's
//! card is fetched (and its signature verified, when asked) before it is routed to: an agent
//! whose card cannot be had is refused (422) and nothing changes. A removed agent gets no new
//! turn; turns already running hold their own reference and finish. Every change is audited
//! in the store and logged (`target: a2a_gateway::audit`).
//!
//! Here: the state and the routes. `config.rs` is `[admin]`, `caller.rs` who is calling,
//! `entry.rs` an entry turned into a running agent, `handlers.rs` the routes' handlers,
//! `share.rs` the registry shared by replicas, `cli.rs` the `a2a-gateway agents` command.

// The handlers' helpers return the answer itself as their error: a refusal is rare and
// answered at once, so its size does not matter.
#![allow(clippy::result_large_err)]

mod caller;
mod cli;
mod config;
mod entry;
mod handlers;
mod share;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use a2a_store::{AgentRegistryStore, MemoryAgentRegistry};

use crate::service::A2aService;
use handlers::{audit_records, create, list, read, remove, replace};

/// The collection's path.
pub const AGENTS_PATH: &str = "/admin/v1/agents";
/// One agent's path.
pub const AGENT_PATH: &str = "/admin/v1/agents/{name}";
/// The most recent changes, newest first.
pub const AUDIT_PATH: &str = "/admin/v1/audit";
/// How many audit records `GET /admin/v1/audit` answers.
const AUDIT_SHOWN: usize = 100;
/// The largest entry accepted (an inline card included).
const MAX_BODY: usize = 256 * 1024;
/// How long a new agent's first card fetch may take before it is refused.
const FIRST_FETCH: Duration = Duration::from_secs(10);
/// The most agents the admin API registers (each holds a queue and a heartbeat).
const MAX_AGENTS: usize = 1024;

pub use cli::cli;
pub use config::AdminConfig;
pub use share::share;

/// One agent registered through the API.
struct Registered {
    /// The entry as given, with credential values redacted (what `GET` shows).
    shown: Value,
    etag: String,
    /// Stops its card refresh and heartbeat.
    stop: CancellationToken,
}

/// The agents registered through the API in this process, and the registry store that records
/// them: in memory (embedded), or shared through PostgreSQL ([`share`]).
pub struct AdminState {
    http: reqwest::Client,
    /// Held across a whole change (card fetch included): changes are serialised.
    registered: tokio::sync::Mutex<BTreeMap<String, Registered>>,
    /// The record in embedded mode.
    local: MemoryAgentRegistry,
    /// With PostgreSQL: the record every replica shares (then `local` is unused).
    shared: std::sync::OnceLock<Arc<dyn AgentRegistryStore>>,
    /// The registry version this process last applied.
    applied: std::sync::atomic::AtomicI64,
    /// The last read failed (logged once at warn until one succeeds again).
    failing: std::sync::atomic::AtomicBool,
    /// How many agents `registered` holds, for the scrape (which cannot wait for its lock).
    registered_count: std::sync::atomic::AtomicUsize,
}

impl Default for AdminState {
    fn default() -> Self {
        Self {
            http: reqwest::Client::builder()
                .connect_timeout(Duration::from_secs(5))
                .pool_idle_timeout(Duration::from_secs(60))
                .build()
                .unwrap_or_default(),
            registered: tokio::sync::Mutex::new(BTreeMap::new()),
            local: MemoryAgentRegistry::new(),
            shared: std::sync::OnceLock::new(),
            applied: std::sync::atomic::AtomicI64::new(-1),
            failing: std::sync::atomic::AtomicBool::new(false),
            registered_count: std::sync::atomic::AtomicUsize::new(0),
        }
    }
}

impl AdminState {
    /// How many agents the admin API registered in this process
    /// (`a2a_registered_agents{source="admin"}`).
    pub fn registered_count(&self) -> usize {
        self.registered_count
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    fn count(&self, registered: &BTreeMap<String, Registered>) {
        self.registered_count
            .store(registered.len(), std::sync::atomic::Ordering::Relaxed);
    }

    /// Where changes are recorded (and, when shared, where other replicas' come from).
    fn store(&self) -> &dyn AgentRegistryStore {
        match self.shared.get() {
            Some(shared) => shared.as_ref(),
            None => &self.local,
        }
    }
}

struct Admin {
    svc: A2aService,
    /// The names of the file's `[[agents]]` (read-only here).
    file_agents: Vec<String>,
    tokens: Vec<[u8; 32]>,
    /// `[admin] oidc_scheme`'s verifier and the scope its tokens must carry.
    oidc: Option<(crate::auth::jwt::JwtVerifier, String)>,
    state: Arc<AdminState>,
}

/// The configuration the admin API reads: `[admin]`, `[auth]` (for `[admin] oidc_scheme`)
/// and the names of the file's `[[agents]]`, which it may not change.
pub struct Settings<'a> {
    pub admin: &'a AdminConfig,
    pub auth: Option<&'a crate::auth::AuthConfig>,
    pub file_agents: Vec<String>,
}

/// The admin API's routes, or none when no admin token is configured (every path is then a
/// 404, as if the API did not exist). `state` is the application context's
/// (`crate::gateway::Gateway::admin_state`).
pub fn routes(svc: A2aService, state: Arc<AdminState>, settings: Settings<'_>) -> Router {
    let config = settings.admin;
    let tokens = config.digests();
    let oidc = config.oidc_scheme.as_ref().and_then(|name| {
        let auth = settings.auth?;
        match crate::auth::token_verifier(auth, name) {
            Ok(v) => Some((v, config.scope.clone())),
            Err(e) => {
                tracing::error!(error = %e, "admin API: admin.oidc_scheme is unusable");
                None
            }
        }
    });
    if tokens.is_empty() && oidc.is_none() {
        return Router::new();
    }
    let admin = Arc::new(Admin {
        svc,
        file_agents: settings.file_agents,
        tokens,
        oidc,
        state,
    });
    Router::new()
        .route(AGENTS_PATH, get(list).post(create))
        .route(AGENT_PATH, get(read).put(replace).delete(remove))
        .route(AUDIT_PATH, get(audit_records))
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .with_state(admin)
}

/// An error answer: `{"error": {"code": status, "message": ...}}`.
fn error(status: StatusCode, message: impl Into<String>) -> Response {
    let message = message.into();
    (
        status,
        axum::Json(json!({"error": {"code": status.as_u16(), "message": message}})),
    )
        .into_response()
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}
