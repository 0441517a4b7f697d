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

// The handlers' helpers return the answer itself as their error: a refusal is rare and
// answered at once, so its size does not matter.
#![allow(clippy::result_large_err)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde::Deserialize;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tokio_util::sync::CancellationToken;

use a2a_store::{
    AgentRegistryStore, MemoryAgentRegistry, PgAgentRegistry, RegisteredAgent, RegistryChange,
};

use crate::agents::AgentRegistry;
use crate::cli::AgentsCommand;
use crate::service::A2aService;
use crate::upstream::UpstreamAgent;
use crate::upstream::config::{AgentConfig, INLINE_SECRETS};

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

/// `[admin]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AdminConfig {
    /// SHA-256 (lowercase or uppercase hex) of each accepted bearer token.
    pub token_sha256: Vec<String>,
    /// An `[auth]` scheme (bearer, oauth2 or openIdConnect) whose tokens are also accepted,
    /// when they carry `scope`: operators log in with their identity provider, and the audit
    /// names them (`oidc:<issuer>|<subject>`).
    pub oidc_scheme: Option<String>,
    /// The scope such a token must carry.
    pub scope: String,
}

impl Default for AdminConfig {
    fn default() -> Self {
        Self {
            token_sha256: Vec::new(),
            oidc_scheme: None,
            scope: "a2a:admin".into(),
        }
    }
}

impl AdminConfig {
    pub fn validate(&self, auth: Option<&crate::auth::AuthConfig>) -> Result<(), String> {
        for t in &self.token_sha256 {
            if t.len() != 64 || !t.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(format!(
                    "admin.token_sha256 (A2A_ADMIN_TOKEN_SHA256): {:?} is not a SHA-256 in hex \
                     (64 hex digits; e.g. `printf %s \"$TOKEN\" | sha256sum`)",
                    t.chars().take(80).collect::<String>()
                ));
            }
        }
        if let Some(name) = &self.oidc_scheme {
            let auth = auth.ok_or_else(|| {
                format!("admin.oidc_scheme = {name:?} needs that scheme in [auth.schemes]")
            })?;
            crate::auth::token_verifier(auth, name)
                .map_err(|e| format!("admin.oidc_scheme = {name:?}: {e}"))?;
            if self.scope.trim().is_empty() {
                return Err("admin.scope must name the scope an admin token carries".into());
            }
        }
        Ok(())
    }

    fn digests(&self) -> Vec<[u8; 32]> {
        self.token_sha256
            .iter()
            .filter_map(|t| {
                let mut out = [0u8; 32];
                for (i, byte) in out.iter_mut().enumerate() {
                    *byte = u8::from_str_radix(t.get(2 * i..2 * i + 2)?, 16).ok()?;
                }
                Some(out)
            })
            .collect()
    }
}

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
    tokens: Vec<[u8; 32]>,
    /// `[admin] oidc_scheme`'s verifier and the scope its tokens must carry.
    oidc: Option<(crate::auth::jwt::JwtVerifier, String)>,
    state: Arc<AdminState>,
}

/// With PostgreSQL: the agents registered through the API live in the shared registry
/// ([`PgAgentRegistry`]), and every replica applies a change within about a second. A 1 s poll
/// of the registry's version (a one-row read) is the notification: cheaper to reason about
/// than a Redis channel (nothing to miss across a reconnect, no Redis needed) and bounded at
/// one tiny query per replica per second; when it moved the registry is read again (at most
/// [`MAX_AGENTS`] entries).
pub async fn share(svc: &A2aService, database_url: &str) {
    let registry = match PgAgentRegistry::connect_lazy(database_url) {
        Ok(r) => r,
        Err(e) => {
            tracing::error!(error = %e, "admin API: the database URL is unusable; API agents stay local");
            return;
        }
    };
    let state = svc.admin_state().clone();
    let _ = state.shared.set(Arc::new(registry));
    sync(svc, &state).await;
    let svc = svc.clone();
    let shutdown = svc.shutdown_token().clone();
    tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(Duration::from_secs(1)) => {}
            }
            sync(&svc, &state).await;
        }
    });
}

/// One round of the replica sync: when the registry's version moved, its entries are read and
/// applied (new or changed entries built, their cards fetched, then routed to; missing ones
/// removed). A failure leaves the version unapplied, so the next round tries again.
async fn sync(svc: &A2aService, state: &AdminState) {
    let version = match state.store().version().await {
        Ok(v) => {
            state
                .failing
                .store(false, std::sync::atomic::Ordering::Relaxed);
            v
        }
        Err(e) => {
            // Once per outage (a database not migrated to 0014 yet, or down), not every second.
            if !state
                .failing
                .swap(true, std::sync::atomic::Ordering::Relaxed)
            {
                tracing::warn!(error = %e, "admin API: cannot read the shared agents' version");
            }
            return;
        }
    };
    if version == state.applied.load(std::sync::atomic::Ordering::Acquire) {
        return;
    }
    let mut registered = state.registered.lock().await;
    if apply(svc, state, &mut registered).await {
        state
            .applied
            .store(version, std::sync::atomic::Ordering::Release);
    }
}

/// Makes this process's API agents those of the registry; whether all of them could be.
async fn apply(
    svc: &A2aService,
    state: &AdminState,
    registered: &mut BTreeMap<String, Registered>,
) -> bool {
    let rows = match state.store().list(MAX_AGENTS).await {
        Ok(rows) => rows,
        Err(e) => {
            tracing::warn!(error = %e, "admin API: cannot read the shared agents");
            return false;
        }
    };
    let mut complete = true;
    for RegisteredAgent { name, entry, etag } in &rows {
        if registered.get(name).is_some_and(|r| &r.etag == etag) {
            continue;
        }
        match build(svc, state, entry.as_bytes(), None).await {
            Ok((config, shown_entry, agent, stop)) if &config.name == name => {
                svc.agent_registry().insert(agent);
                let new = Registered {
                    shown: shown_entry,
                    etag: etag.clone(),
                    stop,
                };
                if let Some(old) = registered.insert(name.clone(), new) {
                    old.stop.cancel();
                }
                tracing::info!(agent = %name, "admin API: applied a shared agent");
            }
            Ok((_, _, _, stop)) => stop.cancel(),
            Err(_) => {
                tracing::warn!(agent = %name, "admin API: a shared agent's card cannot be had yet");
                complete = false;
            }
        }
    }
    let gone: Vec<String> = registered
        .keys()
        .filter(|n| !rows.iter().any(|r| &r.name == *n))
        .cloned()
        .collect();
    for name in gone {
        svc.agent_registry().remove(&name);
        if let Some(old) = registered.remove(&name) {
            old.stop.cancel();
        }
        tracing::info!(agent = %name, "admin API: removed a shared agent");
    }
    state.count(registered);
    complete
}

/// Records one change (with its audit record and the version bump) in the registry: the
/// answer when it could not be, `None` when it was. `Create` refused: the name was taken on
/// another replica meanwhile (409); `Replace`/`Delete` refused: the ETag moved (412).
async fn persist(state: &AdminState, change: RegistryChange<'_>, who: &str) -> Option<Response> {
    let name = change.name();
    match state.store().change(change, who).await {
        Ok(true) => None,
        Ok(false) if matches!(change, RegistryChange::Create { .. }) => Some(error(
            StatusCode::CONFLICT,
            format!("agent {name:?} was created on another replica meanwhile"),
        )),
        Ok(false) => Some(error(
            StatusCode::PRECONDITION_FAILED,
            format!("agent {name:?} changed on another replica meanwhile: read it again"),
        )),
        Err(e) => {
            tracing::error!(error = %e, agent = name, "admin API: cannot write the shared agents");
            Some(error(
                StatusCode::SERVICE_UNAVAILABLE,
                "the database is unavailable; nothing was changed",
            ))
        }
    }
}

/// The admin API's routes, or none when no admin token is configured (every path is then a
/// 404, as if the API did not exist).
pub fn routes(svc: A2aService) -> Router {
    let config = &svc.file_config().admin;
    let tokens = config.digests();
    let oidc = config.oidc_scheme.as_ref().and_then(|name| {
        let auth = svc.file_config().auth.as_ref()?;
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
    let state = svc.admin_state().clone();
    let admin = Arc::new(Admin {
        svc,
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

impl Admin {
    /// The caller's identity for the audit: `token:` and the first 12 hex digits of its admin
    /// token's SHA-256 (every configured digest is compared, in constant time), or
    /// `oidc:<issuer>|<subject>` for a token of `[admin] oidc_scheme` with the admin scope;
    /// else the 401 answer (403: a valid token without the scope).
    async fn authenticate(&self, headers: &HeaderMap) -> Result<String, Response> {
        let unauthorized = || {
            let mut r = error(
                StatusCode::UNAUTHORIZED,
                "the admin API needs Authorization: Bearer <admin token>",
            );
            r.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"a2a-gateway admin\""),
            );
            r
        };
        let value = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .ok_or_else(unauthorized)?;
        let token = value
            .get(..7)
            .filter(|s| s.eq_ignore_ascii_case("bearer "))
            .and_then(|_| value.get(7..))
            .map(str::trim)
            .filter(|t| !t.is_empty() && t.len() <= 4096)
            .ok_or_else(unauthorized)?;
        let digest: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        let mut matched = subtle::Choice::from(0u8);
        for known in &self.tokens {
            matched |= subtle::ConstantTimeEq::ct_eq(&digest[..], &known[..]);
        }
        if bool::from(matched) {
            return Ok(format!("token:{}", hex(&digest[..6])));
        }
        // Not an admin token: perhaps one of the identity provider's, with the admin scope.
        if let Some((verifier, scope)) = &self.oidc
            && let Ok(verified) = verifier.verify(token).await
        {
            if verified.scopes.iter().any(|s| s == scope) {
                return Ok(format!("oidc:{}", verified.principal));
            }
            let mut r = error(
                StatusCode::FORBIDDEN,
                format!("the token lacks the admin scope {scope:?}"),
            );
            if let Ok(v) = HeaderValue::from_str(&format!(
                "Bearer realm=\"a2a-gateway admin\", error=\"insufficient_scope\", scope=\"{scope}\""
            )) {
                r.headers_mut().insert(header::WWW_AUTHENTICATE, v);
            }
            return Err(r);
        }
        Err(unauthorized())
    }

    fn registry(&self) -> &AgentRegistry {
        self.svc.agent_registry()
    }

    /// Where an agent that is not the API's comes from: `file` (`[[agents]]`) or `builtin`.
    /// The current ETag of an API-registered agent that a PUT or DELETE may change: 404 when
    /// unknown, 409 for a file or built-in agent, 412 when `If-Match` names another version.
    fn changeable(
        &self,
        registered: &BTreeMap<String, Registered>,
        name: &str,
        headers: &HeaderMap,
    ) -> Result<String, Response> {
        let Some(current) = registered.get(name) else {
            return Err(match self.fixed_source(name) {
                Some(source) => read_only(name, source),
                None => error(StatusCode::NOT_FOUND, format!("no agent {name:?}")),
            });
        };
        if !if_match(headers, &current.etag) {
            return Err(precondition_failed(name, &current.etag));
        }
        Ok(current.etag.clone())
    }

    fn fixed_source(&self, name: &str) -> Option<&'static str> {
        if self.svc.file_config().agents.iter().any(|a| a.name == name) {
            Some("file")
        } else if AgentRegistry::BUILTIN.contains(&name) && self.registry().get(name).is_some() {
            Some("builtin")
        } else {
            None
        }
    }

    /// [`build`] for a change through the API, which takes no inline secret: the entry is
    /// stored (in PostgreSQL when shared), so its credentials must only name where the secret
    /// is (400 naming the field otherwise).
    async fn build(
        &self,
        body: &[u8],
        name: Option<&str>,
    ) -> Result<(AgentConfig, Value, Arc<UpstreamAgent>, CancellationToken), Response> {
        if let Ok(entry) = serde_json::from_slice::<Value>(body)
            && let Some(creds) = entry.get("credentials").and_then(Value::as_object)
            && let Some(field) = INLINE_SECRETS.iter().find(|f| creds.contains_key(**f))
        {
            return Err(error(
                StatusCode::BAD_REQUEST,
                format!(
                    "credentials.{field}: the admin API takes no inline secret (the entry is \
                     stored); name it by reference: credentials.{field}_env (an environment \
                     variable of every replica) or credentials.{field}_file (a file on every \
                     replica)"
                ),
            ));
        }
        build(&self.svc, &self.state, body, name).await
    }

    /// Brings this process up to date with the shared table before a change (PostgreSQL).
    async fn refresh(&self, registered: &mut BTreeMap<String, Registered>) {
        if self.state.shared.get().is_some() {
            apply(&self.svc, &self.state, registered).await;
        }
    }
}

/// Parses, validates and starts the agent of `body`, and waits for its first card fetch: the
/// agent, ready for traffic, or why not (422).
async fn build(
    svc: &A2aService,
    state: &AdminState,
    body: &[u8],
    name: Option<&str>,
) -> Result<(AgentConfig, Value, Arc<UpstreamAgent>, CancellationToken), Response> {
    {
        let unprocessable = |m: String| error(StatusCode::UNPROCESSABLE_ENTITY, m);
        let mut raw: Value = serde_json::from_slice(body).map_err(|e| {
            error(
                StatusCode::BAD_REQUEST,
                format!("the body is not JSON: {e}"),
            )
        })?;
        if let (Some(name), Some(obj)) = (name, raw.as_object_mut()) {
            match obj.get("name") {
                None => {
                    obj.insert("name".into(), Value::String(name.to_owned()));
                }
                Some(Value::String(n)) if n == name => {}
                Some(_) => {
                    return Err(unprocessable(format!(
                        "the entry's name must be the path's ({name:?})"
                    )));
                }
            }
        }
        let mut config: AgentConfig = serde_json::from_value(raw.clone())
            .map_err(|e| unprocessable(format!("not an [[agents]] entry: {e}")))?;
        config
            .validate(&AgentRegistry::BUILTIN)
            .map_err(unprocessable)?;
        // References are read from this process (the gateway's environment, its files): each
        // replica reads its own when it applies the entry.
        if let Some(c) = &mut config.credentials {
            c.resolve(&config.name, |k| std::env::var(k).ok())
                .map_err(unprocessable)?;
        }
        let http = match &config.tls {
            Some(tls) => {
                config.client_tls = tls.load(&config.name).map_err(unprocessable)?;
                let builder = reqwest::Client::builder()
                    .connect_timeout(Duration::from_secs(5))
                    .pool_idle_timeout(Duration::from_secs(60));
                config
                    .client_tls
                    .configure(builder)
                    .map_err(|e| unprocessable(format!("agents.{}: {e}", config.name)))?
                    .build()
                    .map_err(|e| unprocessable(format!("agents.{}: {e}", config.name)))?
            }
            None => state.http.clone(),
        };
        let agent = UpstreamAgent::new(config.clone(), http, svc.agent_registry().change_sender())
            .map_err(unprocessable)?;
        let stop = svc.shutdown_token().child_token();
        agent.start(stop.clone());
        agent.wait_checked(FIRST_FETCH).await;
        let ready = crate::agents::Agent::upstream_card(&*agent).is_some()
            && crate::agents::Agent::status(&*agent).is_none_or(|s| s.healthy);
        if !ready {
            stop.cancel();
            return Err(unprocessable(format!(
                "agents.{}: the agent's card could not be fetched or verified within {} s \
                 (the gateway's log says why); nothing was changed",
                config.name,
                FIRST_FETCH.as_secs()
            )));
        }
        Ok((config, redact(raw), agent, stop))
    }
}

/// The strong ETag of an entry: the SHA-256 of its JSON as given.
fn etag_of(body: &Value) -> String {
    let bytes = serde_json::to_vec(body).unwrap_or_default();
    format!("\"{}\"", hex(&Sha256::digest(&bytes)))
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// The entry as shown back: credential references, the client id, token URL and scopes as
/// given; anything else under `credentials` (an inline secret of an entry stored before the
/// API refused them) replaced.
fn redact(mut entry: Value) -> Value {
    if let Some(Value::Object(creds)) = entry.get_mut("credentials") {
        for (k, v) in creds.iter_mut() {
            let shown = k.ends_with("_env")
                || k.ends_with("_file")
                || matches!(k.as_str(), "client_id" | "token_url" | "scopes");
            if !shown {
                *v = Value::String("<redacted>".into());
            }
        }
    }
    entry
}

/// Whether `If-Match` (if any) lets a change to the entry tagged `current` go ahead.
fn if_match(headers: &HeaderMap, current: &str) -> bool {
    let Some(v) = headers.get(header::IF_MATCH).and_then(|v| v.to_str().ok()) else {
        return true;
    };
    v.split(',')
        .map(str::trim)
        .any(|t| t == "*" || t == current)
}

fn with_etag(mut response: Response, etag: &str) -> Response {
    if let Ok(v) = HeaderValue::from_str(etag) {
        response.headers_mut().insert(header::ETAG, v);
    }
    response
}

fn shown(entry: &Registered) -> Value {
    let mut v = entry.shown.clone();
    if let Some(obj) = v.as_object_mut() {
        obj.insert("source".into(), "api".into());
        obj.insert("read_only".into(), false.into());
        obj.insert("etag".into(), entry.etag.clone().into());
    }
    v
}

fn audit(who: &str, action: &str, name: &str, etag: Option<&str>) {
    tracing::info!(
        target: "a2a_gateway::audit",
        who,
        action,
        agent = name,
        etag = etag.unwrap_or(""),
        "admin change"
    );
}

async fn list(State(admin): State<Arc<Admin>>, headers: HeaderMap) -> Response {
    if let Err(r) = admin.authenticate(&headers).await {
        return r;
    }
    let registered = admin.state.registered.lock().await;
    let mut agents: Vec<Value> = Vec::new();
    for agent in admin.registry().iter() {
        let name = agent.name();
        if let Some(entry) = registered.get(name) {
            agents.push(shown(entry));
        } else if let Some(source) = admin.fixed_source(name) {
            agents.push(json!({"name": name, "source": source, "read_only": true}));
        }
    }
    axum::Json(json!({ "agents": agents })).into_response()
}

async fn audit_records(State(admin): State<Arc<Admin>>, headers: HeaderMap) -> Response {
    if let Err(r) = admin.authenticate(&headers).await {
        return r;
    }
    match admin.state.store().audit(AUDIT_SHOWN).await {
        Ok(records) => {
            let records: Vec<Value> = records
                .into_iter()
                .map(|r| {
                    let at = chrono::DateTime::from_timestamp_millis(r.at_ms)
                        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true));
                    json!({"at": at, "who": r.who, "action": r.action, "agent": r.agent,
                           "etag": r.etag})
                })
                .collect();
            axum::Json(json!({ "records": records })).into_response()
        }
        Err(e) => {
            tracing::error!(error = %e, "admin API: cannot read the audit records");
            error(
                StatusCode::SERVICE_UNAVAILABLE,
                "the database is unavailable",
            )
        }
    }
}

async fn read(
    State(admin): State<Arc<Admin>>,
    Path(name): Path<String>,
    headers: HeaderMap,
) -> Response {
    if let Err(r) = admin.authenticate(&headers).await {
        return r;
    }
    let registered = admin.state.registered.lock().await;
    if let Some(entry) = registered.get(&name) {
        return with_etag(axum::Json(shown(entry)).into_response(), &entry.etag);
    }
    match admin.fixed_source(&name) {
        Some(source) => {
            axum::Json(json!({"name": name, "source": source, "read_only": true})).into_response()
        }
        None => error(StatusCode::NOT_FOUND, format!("no agent {name:?}")),
    }
}

async fn create(State(admin): State<Arc<Admin>>, headers: HeaderMap, body: Bytes) -> Response {
    let who = match admin.authenticate(&headers).await {
        Ok(w) => w,
        Err(r) => return r,
    };
    let mut registered = admin.state.registered.lock().await;
    admin.refresh(&mut registered).await;
    // The name first, without building anything.
    let name = serde_json::from_slice::<Value>(&body)
        .ok()
        .and_then(|v| v.get("name").and_then(Value::as_str).map(str::to_owned));
    if let Some(name) = &name
        && (registered.contains_key(name)
            || admin.fixed_source(name).is_some()
            || admin.registry().get(name).is_some())
    {
        return error(
            StatusCode::CONFLICT,
            format!("agent {name:?} exists: PUT /admin/v1/agents/{name} replaces it"),
        );
    }
    if registered.len() >= MAX_AGENTS {
        return error(
            StatusCode::INSUFFICIENT_STORAGE,
            format!("at most {MAX_AGENTS} agents are registered through the admin API"),
        );
    }
    let (config, shown_entry, agent, stop) = match admin.build(&body, None).await {
        Ok(built) => built,
        Err(r) => return r,
    };
    let raw = serde_json::from_slice::<Value>(&body).unwrap_or_default();
    let etag = etag_of(&raw);
    let entry = raw.to_string();
    let change = RegistryChange::Create {
        name: &config.name,
        entry: &entry,
        etag: &etag,
    };
    if let Some(refused) = persist(&admin.state, change, &who).await {
        stop.cancel();
        return refused;
    }
    admin.registry().insert(agent);
    let entry = Registered {
        shown: shown_entry,
        etag: etag.clone(),
        stop,
    };
    let answer = shown(&entry);
    registered.insert(config.name.clone(), entry);
    admin.state.count(&registered);
    audit(&who, "create", &config.name, Some(&etag));
    let mut response = with_etag(
        (StatusCode::CREATED, axum::Json(answer)).into_response(),
        &etag,
    );
    if let Ok(v) = HeaderValue::from_str(&format!("{AGENTS_PATH}/{}", config.name)) {
        response.headers_mut().insert(header::LOCATION, v);
    }
    response
}

async fn replace(
    State(admin): State<Arc<Admin>>,
    Path(name): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let who = match admin.authenticate(&headers).await {
        Ok(w) => w,
        Err(r) => return r,
    };
    let mut registered = admin.state.registered.lock().await;
    admin.refresh(&mut registered).await;
    let expect = match admin.changeable(&registered, &name, &headers) {
        Ok(etag) => etag,
        Err(r) => return r,
    };
    let (config, shown_entry, agent, stop) = match admin.build(&body, Some(&name)).await {
        Ok(built) => built,
        Err(r) => return r,
    };
    let mut raw = serde_json::from_slice::<Value>(&body).unwrap_or_default();
    if let Some(obj) = raw.as_object_mut() {
        obj.entry("name")
            .or_insert_with(|| Value::String(name.clone()));
    }
    let etag = etag_of(&raw);
    let entry = raw.to_string();
    let change = RegistryChange::Replace {
        name: &name,
        entry: &entry,
        etag: &etag,
        expect: &expect,
    };
    if let Some(refused) = persist(&admin.state, change, &who).await {
        stop.cancel();
        return refused;
    }
    admin.registry().insert(agent);
    let entry = Registered {
        shown: shown_entry,
        etag: etag.clone(),
        stop,
    };
    let answer = shown(&entry);
    if let Some(old) = registered.insert(config.name.clone(), entry) {
        old.stop.cancel();
    }
    audit(&who, "replace", &name, Some(&etag));
    with_etag(axum::Json(answer).into_response(), &etag)
}

async fn remove(
    State(admin): State<Arc<Admin>>,
    Path(name): Path<String>,
    headers: HeaderMap,
) -> Response {
    let who = match admin.authenticate(&headers).await {
        Ok(w) => w,
        Err(r) => return r,
    };
    let mut registered = admin.state.registered.lock().await;
    admin.refresh(&mut registered).await;
    let expect = match admin.changeable(&registered, &name, &headers) {
        Ok(etag) => etag,
        Err(r) => return r,
    };
    if admin.registry().default_name() == name {
        return error(
            StatusCode::CONFLICT,
            format!("agent {name:?} is the default agent (default_agent)"),
        );
    }
    let change = RegistryChange::Delete {
        name: &name,
        expect: &expect,
    };
    if let Some(refused) = persist(&admin.state, change, &who).await {
        return refused;
    }
    admin.registry().remove(&name);
    if let Some(old) = registered.remove(&name) {
        old.stop.cancel();
    }
    admin.state.count(&registered);
    audit(&who, "delete", &name, None);
    StatusCode::NO_CONTENT.into_response()
}

fn read_only(name: &str, source: &str) -> Response {
    error(
        StatusCode::CONFLICT,
        format!(
            "agent {name:?} comes from the {} and is read-only here",
            if source == "file" {
                "configuration file ([[agents]])"
            } else {
                "built-in agents"
            }
        ),
    )
}

fn precondition_failed(name: &str, etag: &str) -> Response {
    with_etag(
        error(
            StatusCode::PRECONDITION_FAILED,
            format!("agent {name:?} changed since that ETag (now {etag}): read it again"),
        ),
        etag,
    )
}

/// `a2a-gateway agents list | get <name> | add <json entry> | replace <name> <json entry>
/// [--if-match <etag>] | remove <name> [--if-match <etag>]`: the admin API from the command
/// line, toward the admin listener at `admin` with the bearer `token`. Returns what to print
/// (the API's JSON answer), or the error (the API's message).
pub async fn cli(admin: &str, token: &str, command: &AgentsCommand) -> Result<String, String> {
    let base = format!("http://{admin}{AGENTS_PATH}");
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .map_err(|e| e.to_string())?;
    let body = |raw: &str| -> Result<Value, String> {
        serde_json::from_str(raw).map_err(|e| format!("the entry is not JSON: {e}"))
    };
    let path = |name: &str| format!("{base}/{}", urlencode(name));
    let (request, if_match) = match command {
        AgentsCommand::List => (http.get(&base), None),
        AgentsCommand::Get { name } => (http.get(path(name)), None),
        AgentsCommand::Add { entry } => (http.post(&base).json(&body(entry)?), None),
        AgentsCommand::Replace {
            name,
            entry,
            if_match,
        } => (http.put(path(name)).json(&body(entry)?), if_match.as_ref()),
        AgentsCommand::Remove { name, if_match } => (http.delete(path(name)), if_match.as_ref()),
    };
    let mut request = request.bearer_auth(token);
    if let Some(etag) = if_match {
        request = request.header(header::IF_MATCH, etag);
    }
    let resp = request
        .send()
        .await
        .map_err(|e| format!("the admin API at {admin}: {e}"))?;
    let status = resp.status();
    let etag = resp
        .headers()
        .get(header::ETAG)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let text = resp.text().await.unwrap_or_default();
    if status.is_success() {
        Ok(match (status, etag) {
            (StatusCode::NO_CONTENT, _) => "removed".to_owned(),
            (_, Some(etag)) => format!("{text}\nETag: {etag}"),
            _ => text,
        })
    } else {
        let message = serde_json::from_str::<Value>(&text)
            .ok()
            .and_then(|v| v["error"]["message"].as_str().map(str::to_owned))
            .unwrap_or(text);
        Err(format!("{status}: {message}"))
    }
}

/// An agent name in a URL path (names are ASCII letters, digits, `-`, `_`, `.`; anything else
/// is percent-encoded, so a bad name reaches the API and is refused there).
fn urlencode(name: &str) -> String {
    name.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}
