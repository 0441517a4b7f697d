//! Assembling and running the gateway: the store and bus the configuration asks for, the
//! service, the router with its layers, and `serve` until a shutdown token fires. `main`, the
//! tests and the benchmarks all start the gateway through [`build`] and [`serve`].

use std::sync::Arc;
use std::time::Duration;

use a2a_bus::{EventBus, LocalEventBus, RedisEventBus};
use a2a_store::{MemoryTaskStore, PgOptions, PgTaskStore, TaskStore};
use axum::Router;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::{get, post};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::agents::AgentRegistry;
use crate::auth::KeyDirectory;
use crate::bindings::{card, catalogue, jsonrpc, rest};
use crate::config::{Config, FileConfig};
use crate::gateway::{Gateway, Parts};
use crate::tls::ServerTls;
use crate::upstream::UpstreamAgent;

/// Builds the service for `config`: the PostgreSQL store when `A2A_DATABASE_URL` is set (its
/// connections open on first use, so a database that is down makes the gateway unready, not
/// dead), else the in-memory one; the Redis Streams bus when `A2A_REDIS_URL` is set (also
/// connected on first use: while Redis is down, followers poll the event log), else the
/// in-process bus. Push notifications are delivered by `a2a-worker` on PostgreSQL with Redis,
/// in this process with the in-memory store ([`embedded_push`]), and not at all (so not
/// declared) on PostgreSQL without Redis. Terminal tasks are deleted by the retention sweep
/// (and, in memory, beyond `[retention] max_tasks`). Must run inside a tokio runtime.
pub fn build(config: &Config, shutdown: CancellationToken) -> Result<Gateway, String> {
    let mut file = config.file.clone();
    // With PostgreSQL, API keys may also live in its `api_keys` table (`a2a-gateway keys`).
    let (store, keys, in_memory): StoreParts = match &config.database_url {
        Some(url) => {
            let pg = PgTaskStore::connect_lazy(url, &pg_options(config))
                .map_err(|e| format!("A2A_DATABASE_URL: {e}"))?;
            let keys = Arc::new(pg.api_keys());
            (Arc::new(pg), Some(keys), None)
        }
        None => {
            let memory = Arc::new(MemoryTaskStore::with_max_tasks(
                config.file.retention.max_tasks,
            ));
            (memory.clone(), None, Some(memory))
        }
    };
    let mut bus: Arc<dyn EventBus> = match config.redis_target()? {
        Some(target) => Arc::new(
            RedisEventBus::new(target, &config.redis_prefix)
                .map_err(|e| format!("Redis: {e}"))?
                .with_partitions(config.redis_partitions)
                .with_inline_max(config.outbox.inline_max),
        ),
        None => Arc::new(LocalEventBus::new()),
    };
    if in_memory.is_some() && file.push.keys.is_empty() {
        file.push.keys = ephemeral_key()?;
    } else if file.push.keys.is_empty() {
        tracing::info!(
            "agent cards are served unsigned: no signing keys ({}); with PostgreSQL every \
             replica must sign with keys the JWKS of every replica publishes, so none is made \
             at start",
            a2a_push::SIGNING_KEYS_VAR
        );
    }
    if file.card.push_notifications {
        match in_memory {
            Some(tasks) => bus = embedded_push(config, &mut file, tasks, bus, &shutdown)?,
            // The worker reads the Redis stream; without it nothing would deliver.
            None if !config.has_redis() => {
                tracing::info!(
                    "push notifications are not offered: with PostgreSQL and no Redis \
                     (A2A_REDIS_URL) no a2a-worker can deliver them"
                );
                file.card.push_notifications = false;
            }
            None => {}
        }
    }
    let mut agents = AgentRegistry::with_builtins(&config.builtin_agents());
    let upstream = upstream_agents(config, &agents)?;
    for agent in &upstream {
        agents.add(agent.clone());
    }
    match &config.file.default_agent {
        Some(name) => agents.set_default(name)?,
        // Without echo there is no default to fall back on.
        None if agents.get("echo").is_none() => {
            return Err(
                "builtin_agents leaves out echo, the default agent: set default_agent \
                        to an agent this gateway routes to"
                    .into(),
            );
        }
        None => {}
    }
    // Every store operation is timed (`a2a_store_operation_duration_seconds`). With traces on,
    // each PostgreSQL operation is also a span (in memory, one takes microseconds: a span
    // would cost more than the operation).
    let traced = a2a_process::telemetry::enabled() && config.database_url.is_some();
    let store: Arc<dyn TaskStore> = Arc::new(a2a_store::Metered::new(store).traced(traced));
    // Before the agents start: the cards' rebuild must see their first card change.
    let gw = Gateway::start(Parts {
        store,
        bus,
        agents,
        config: file,
        public_url: config.public_url.clone(),
        shutdown: shutdown.clone(),
        keys,
    });
    for agent in &upstream {
        agent.start(shutdown.clone());
    }
    let svc = gw.service();
    svc.start_expiry(config.file.retention.sweep_interval, shutdown.clone());
    svc.start_outbox(config.outbox, shutdown.clone());
    crate::retention::start(svc.store().clone(), &config.file.retention, shutdown);
    Ok(gw)
}

type StoreParts = (
    Arc<dyn TaskStore>,
    Option<Arc<dyn KeyDirectory>>,
    Option<Arc<MemoryTaskStore>>,
);

/// The signing key of an embedded gateway run without configured keys: it signs push
/// deliveries and agent cards, and is published in the JWKS like any other (clients see a new
/// `kid` after a restart). One process serves everything, so one key made here is enough.
fn ephemeral_key() -> Result<a2a_push::SigningKeys, String> {
    let pem = a2a_push::es256_pem()?;
    let kid = format!(
        "ephemeral-{}",
        &uuid::Uuid::new_v4().simple().to_string()[..8]
    );
    a2a_push::SigningKeys::from_pems(vec![(kid, pem.into_bytes())])
        .map_err(|e| format!("the signing key of this run: {e}"))
}

/// Starts push delivery in this process, for the in-memory store: the worker's pipeline
/// (`a2a-delivery`) fed by a tap of `bus`, which it returns to be used in its place. It signs
/// with the configured keys, or the key [`build`] made for this run.
fn embedded_push(
    config: &Config,
    file: &mut FileConfig,
    tasks: Arc<MemoryTaskStore>,
    bus: Arc<dyn EventBus>,
    shutdown: &CancellationToken,
) -> Result<Arc<dyn EventBus>, String> {
    let push = &mut file.push;
    let policy = a2a_push::AddressPolicy::from_entries(&push.allowed_hosts)
        .map_err(|e| format!("push.allowed_hosts: {e}"))?;
    let settings = a2a_delivery::embedded::Settings {
        policy,
        keys: push.keys.clone(),
        issuer: config.public_url.clone(),
        retry: a2a_delivery::RetryPolicy {
            max_attempts: push.max_attempts,
            base: Duration::from_millis(push.backoff_base_ms),
            max: Duration::from_millis(push.backoff_max_ms),
            ..a2a_delivery::RetryPolicy::default()
        },
        attempt_timeout: Duration::from_millis(push.attempt_timeout_ms),
        token_ttl: Duration::from_secs(push.token_ttl_secs),
        concurrency: push.concurrency,
    };
    let (bus, feed) = a2a_bus::tapped(bus);
    a2a_delivery::embedded::start(tasks, feed, settings, shutdown.clone())?;
    tracing::debug!("push notifications are delivered by this process (in-memory store)");
    Ok(bus)
}

/// The `[[agents]]` of the configuration (their cards are fetched once they start).
fn upstream_agents(
    config: &Config,
    registry: &AgentRegistry,
) -> Result<Vec<Arc<UpstreamAgent>>, String> {
    if config.file.agents.is_empty() {
        return Ok(Vec::new());
    }
    let builder = || {
        reqwest::Client::builder()
            .connect_timeout(std::time::Duration::from_secs(5))
            .pool_idle_timeout(std::time::Duration::from_secs(60))
    };
    let build = |b: reqwest::ClientBuilder| {
        b.build()
            .map_err(|e| format!("the upstream HTTP client: {e}"))
    };
    let shared = build(builder())?;
    config
        .file
        .agents
        .iter()
        .map(|a| {
            let mut a = a.clone();
            // An agent with TLS files of its own gets a client of its own (its CA and
            // certificate must not reach the other agents).
            let http = match &a.tls {
                Some(tls) => {
                    a.client_tls = tls.load(&a.name)?;
                    let b = a
                        .client_tls
                        .configure(builder())
                        .map_err(|e| format!("agents.{}: {e}", a.name))?;
                    build(b)?
                }
                None => shared.clone(),
            };
            UpstreamAgent::new(a, http, registry.change_sender())
        })
        .collect()
}

/// What `main` and the tests do after [`build`]: wait (bounded) for the first card fetch of
/// every upstream agent, and with PostgreSQL take the dispatch lease (taking over the tasks of
/// replicas that died).
pub async fn start(config: &Config, gw: &Gateway) {
    let svc = gw.service();
    svc.wait_for_upstreams(std::time::Duration::from_secs(10))
        .await;
    if let Some(url) = &config.database_url {
        crate::admin::share(svc, gw.admin_state().clone(), url).await;
    }
    if config.database_url.is_some() {
        // The schema gate, said once at start: `/readyz` answers 503 until it passes.
        match svc.store().ping().await {
            Ok(()) => tracing::info!("the database schema matches this binary's migrations"),
            Err(e) if is_schema_mismatch(&e) => tracing::error!(
                "{e}; /readyz answers 503 (`database schema mismatch`) until it matches"
            ),
            Err(e) => tracing::warn!(
                error = %e,
                "cannot check the database schema yet; /readyz answers 503 until it can"
            ),
        }
        let lease = std::time::Duration::from_millis(config.file.dispatch.lease_ms);
        svc.start_dispatch_lease(config.replica.clone(), lease)
            .await;
    }
}

fn pg_options(config: &Config) -> PgOptions {
    PgOptions {
        pool_size: config.database.pool_size,
        acquire_timeout: std::time::Duration::from_millis(config.database.acquire_timeout_ms),
        replica: Some(config.replica.clone()),
        ..PgOptions::default()
    }
}

/// Whether the gateway may start on `addr`: beyond loopback without `[auth]` every caller is
/// `anonymous`, one owner, so anyone who reaches the port sees and changes every task. That is
/// refused (`Err`, naming the fixes) unless the operator opted in (`A2A_ALLOW_UNAUTHENTICATED`,
/// `allow_unauthenticated`), in which case `Ok(Some(warning))` is the warning to log.
pub fn open_access_check(
    config: &Config,
    addr: std::net::SocketAddr,
) -> Result<Option<String>, String> {
    if config.file.auth.is_some() || addr.ip().is_loopback() {
        return Ok(None);
    }
    if !config.allow_unauthenticated {
        return Err(format!(
            "refusing to listen on {addr}, beyond loopback, with no [auth]: every caller would \
             be `anonymous` and share one owner, so anyone who can reach this address would \
             read, continue and cancel every task. Declare [auth] schemes (README, \
             Authentication), listen on 127.0.0.1, or accept open access explicitly with \
             A2A_ALLOW_UNAUTHENTICATED=true (allow_unauthenticated = true in the file)"
        ));
    }
    Ok(Some(format!(
        "listening on {addr}, beyond loopback, with no [auth] (A2A_ALLOW_UNAUTHENTICATED): every \
         caller is `anonymous` and shares one owner, so anyone who can reach this address reads, \
         continues and cancels every task"
    )))
}

/// The warning to log at start when a `mutualTLS` scheme is declared but no client CA is
/// configured: no request can then present a verified certificate, so the scheme (still
/// published in the card) is never satisfied.
pub fn mutual_tls_warning(config: &Config) -> Option<String> {
    use a2a_types::v1::security_scheme::Scheme;
    let auth = config.file.auth.as_ref()?;
    let name = auth.schemes.iter().find_map(|(name, s)| {
        matches!(s.scheme.scheme, Some(Scheme::MtlsSecurityScheme(_))).then_some(name)
    })?;
    if config.tls().is_some_and(|t| t.client_ca.is_some()) {
        return None;
    }
    Some(format!(
        "auth scheme {name} is mutualTLS but no client CA is configured ([tls] client_ca, \
         A2A_TLS_CLIENT_CA): no request can satisfy it"
    ))
}

/// Applies the database migrations (`a2a-gateway migrate`, or `serve` with `A2A_MIGRATE=1`).
pub async fn migrate(config: &Config) -> Result<(), String> {
    let url = config
        .database_url
        .as_deref()
        .ok_or("A2A_DATABASE_URL is not set: there is no database to migrate")?;
    let store = PgTaskStore::connect_lazy(url, &pg_options(config))
        .map_err(|e| format!("A2A_DATABASE_URL: {e}"))?;
    store.migrate().await.map_err(|e| e.to_string())
}

/// Every route, with the body limit the configuration sets.
pub fn router(gw: Gateway) -> Router {
    let keys = gw.jwks();
    let limit = gw.max_body_bytes();
    // gRPC shares the listener: its paths (`/lf.a2a.v1.A2AService/*`, health, reflection) never
    // collide with the HTTP ones, and tonic enforces its own message limit.
    let grpc = crate::bindings::grpc::router(gw.clone());
    Router::new()
        .route(card::WELL_KNOWN_PATH, get(card::agent_card))
        .route(card::LEGACY_WELL_KNOWN_PATH, get(card::agent_card))
        .route(card::AGENT_CARD_PATH, get(card::upstream_agent_card))
        .route(catalogue::PATH, get(catalogue::list_agents))
        .route(catalogue::AI_CATALOG_PATH, get(catalogue::ai_catalog))
        .route(jsonrpc::PATH, post(jsonrpc::handle))
        .route(&format!("{}/", jsonrpc::PATH), post(jsonrpc::handle))
        .route(a2a_push::JWKS_PATH, get(move || jwks(keys.clone())))
        .merge(health_routes())
        .merge(rest::routes())
        .layer(DefaultBodyLimit::max(limit))
        .with_state(gw)
        .merge(grpc)
        // Outermost: a handler's panic is answered in its binding's format (`bindings::panic`).
        .layer(crate::bindings::panic::CatchPanicLayer)
}

/// `/healthz` (the process is up) and `/readyz` (the task store answers on its dedicated
/// connection and holds this binary's schema; not draining): on the public port
/// and on the admin listener.
fn health_routes() -> Router<Gateway> {
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
}

/// The admin listener's routes: `/metrics` (Prometheus text), `/healthz`, `/readyz`.
pub fn admin_router(gw: Gateway) -> Router {
    let handle = crate::metrics::install();
    let config = gw.config();
    let settings = crate::admin::Settings {
        admin: &config.admin,
        auth: config.auth.as_ref(),
        file_agents: config.agents.iter().map(|a| a.name.clone()).collect(),
    };
    let admin = crate::admin::routes(gw.service().clone(), gw.admin_state().clone(), settings);
    let health = health_routes().with_state(gw.clone());
    Router::new()
        .route(
            "/metrics",
            get(move || {
                let handle = handle.clone();
                let gw = gw.clone();
                async move {
                    // The gauges that are state rather than events, read now.
                    gw.record_gauges();
                    crate::metrics::exposition(&handle)
                }
            }),
        )
        .merge(health)
        .merge(admin)
}

/// Serves the admin routes on `listener` until `shutdown` fires, with the public listener's
/// connection limits and timeouts (its own counts, label `listener="admin"`). Installs the
/// process's metrics recorder (once per process): until then every metric is a no-op.
pub async fn serve_admin(
    listener: TcpListener,
    gw: Gateway,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    let policy = connection_policy("admin", &gw);
    crate::conn::serve(listener, admin_router(gw), false, None, policy, shutdown).await;
    Ok(())
}

/// The connection policy of a listener (`[limits.connections]`, `[limits.edge]`, and how
/// `[limits.rate]` tells clients apart).
fn connection_policy(name: &'static str, gw: &Gateway) -> crate::conn::Policy {
    let (limits, addressing) = gw.connection_limits();
    crate::conn::Policy::new(name, limits, gw.edge_limits(), addressing)
}

/// The public keys that verify push deliveries (`X-A2A-Push-Signature`).
async fn jwks(keys: bytes::Bytes) -> impl IntoResponse {
    (
        [
            (axum::http::header::CONTENT_TYPE, "application/jwk-set+json"),
            (axum::http::header::CACHE_CONTROL, "public, max-age=300"),
        ],
        keys,
    )
}

fn is_schema_mismatch(e: &a2a_store::StoreError) -> bool {
    matches!(e, a2a_store::StoreError::Unavailable(m)
        if m.starts_with(a2a_store::pg::health::SCHEMA_MISMATCH))
}

async fn readyz(State(gw): State<Gateway>) -> impl IntoResponse {
    let svc = gw.service();
    // Draining: a balancer that checks on a kept-alive connection stops sending new work here.
    if svc.shutdown_token().is_cancelled() {
        return (StatusCode::SERVICE_UNAVAILABLE, "draining");
    }
    // On the store's own health connection, bounded (not through the request pool, whose
    // saturation must not make the replica unready), and gated on the schema (`pg::health`).
    match svc.store().ping().await {
        Ok(()) => (StatusCode::OK, "ready"),
        Err(e) if is_schema_mismatch(&e) => {
            tracing::warn!(error = %e, "not ready");
            (StatusCode::SERVICE_UNAVAILABLE, "database schema mismatch")
        }
        Err(e) => {
            tracing::warn!(error = %e, "not ready");
            (StatusCode::SERVICE_UNAVAILABLE, "task store unreachable")
        }
    }
}

/// What `main` runs: [`serve`] until `shutdown` fires, then a drain bounded by `drain` from
/// that moment: the requests in flight finish and the connections close, and the turns still
/// running in this process end (they run on after their requests are answered). Returns how
/// many turns still run at the bound; their tasks are left, as they are in the store, to the
/// replica that takes them over.
pub async fn serve_and_drain(
    listener: TcpListener,
    tls: Option<ServerTls>,
    gw: Gateway,
    shutdown: CancellationToken,
    drain: std::time::Duration,
) -> std::io::Result<usize> {
    let serving = async {
        match tls {
            Some(tls) => serve_tls(listener, tls, gw.clone(), shutdown.clone()).await,
            None => serve(listener, gw.clone(), shutdown.clone()).await,
        }
    };
    tokio::pin!(serving);
    // Only an error ends serving before the shutdown.
    let served = tokio::select! {
        result = &mut serving => Some(result),
        () = shutdown.cancelled() => None,
    };
    let deadline = tokio::time::Instant::now() + drain;
    match served {
        Some(result) => result?,
        None => match tokio::time::timeout_at(deadline, serving).await {
            Ok(result) => result?,
            Err(_) => tracing::warn!("connections still open at the drain bound are dropped"),
        },
    }
    let left = gw.service().drain(deadline).await;
    gw.join_background(deadline).await;
    if left > 0 {
        tracing::warn!(
            turns = left,
            "turns still running at the drain bound are left to the replica that takes them over"
        );
    }
    Ok(left)
}

/// Serves HTTP/1.1 and h2c on `listener` until `shutdown` fires; open streams end, in-flight
/// requests finish, then this returns. Turns may still be running (see [`serve_and_drain`]).
pub async fn serve(
    listener: TcpListener,
    gw: Gateway,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    // Each request carries its connection's peer address (`ConnectInfo`) only where a per-IP
    // rate limit keys on it: nothing else reads it, and it costs an extension per request.
    let connect_info = gw.rate_limiter().is_some_and(|r| r.limits_ips());
    let policy = connection_policy("public", &gw);
    crate::conn::serve(listener, router(gw), connect_info, None, policy, shutdown).await;
    Ok(())
}

/// As [`serve`], over TLS: HTTP/1.1 and HTTP/2 (so gRPC) by ALPN on the one port. Each request
/// carries its connection's [`crate::tls::TlsPeer`] (the verified client certificate, for
/// `mutualTLS`) and its remote address as `ConnectInfo<SocketAddr>`, the type plaintext serving
/// gives, so what keys on the client's address reads it the same way over TLS.
pub async fn serve_tls(
    listener: TcpListener,
    tls: ServerTls,
    gw: Gateway,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    let policy = connection_policy("public", &gw);
    crate::conn::serve(listener, router(gw), true, Some(tls), policy, shutdown).await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::FileConfig;

    #[test]
    fn open_access_is_refused_beyond_loopback_unless_allowed() {
        let open = Config::from_parts(FileConfig::default(), |_| None).unwrap();
        let check = |c: &Config, a: &str| open_access_check(c, a.parse().unwrap());
        let e = check(&open, "0.0.0.0:8080").expect_err("refused");
        assert!(e.contains("A2A_ALLOW_UNAUTHENTICATED=true"), "{e}");
        assert!(check(&open, "[::]:8080").is_err());
        assert!(check(&open, "10.1.2.3:8080").is_err());
        assert_eq!(check(&open, "127.0.0.1:8080"), Ok(None));
        assert_eq!(check(&open, "[::1]:8080"), Ok(None));
        let allowed = Config::from_parts(
            FileConfig::default(),
            a2a_testing::env_of(&[("A2A_ALLOW_UNAUTHENTICATED", "true")]),
        )
        .unwrap();
        let w = check(&allowed, "0.0.0.0:8080").unwrap().expect("a warning");
        assert!(w.contains("shares one owner"), "{w}");
        let in_file = FileConfig::parse("allow_unauthenticated = true").unwrap();
        let allowed = Config::from_parts(in_file.clone(), |_| None).unwrap();
        assert!(check(&allowed, "0.0.0.0:8080").unwrap().is_some());
        // The environment wins over the file.
        let denied = Config::from_parts(
            in_file,
            a2a_testing::env_of(&[("A2A_ALLOW_UNAUTHENTICATED", "false")]),
        )
        .unwrap();
        assert!(check(&denied, "0.0.0.0:8080").is_err());
        assert!(
            Config::from_parts(
                FileConfig::default(),
                a2a_testing::env_of(&[("A2A_ALLOW_UNAUTHENTICATED", "maybe")])
            )
            .is_err()
        );
        let auth = FileConfig::parse(
            r#"
            [auth.schemes.key]
            scheme = { apiKeySecurityScheme = { location = "header", name = "X-API-Key" } }
            keys = [{ id = "k", key = "k" }]
            "#,
        )
        .unwrap();
        let closed = Config::from_parts(auth, |_| None).unwrap();
        assert_eq!(check(&closed, "0.0.0.0:8080"), Ok(None));
    }

    #[test]
    fn a_mutual_tls_scheme_without_a_client_ca_is_warned_about() {
        let mtls = r#"
            [auth.schemes.certs]
            scheme = { mtlsSecurityScheme = {} }
        "#;
        let config = |toml: &str, env: &[(&str, &str)]| {
            Config::from_parts(FileConfig::parse(toml).unwrap(), a2a_testing::env_of(env)).unwrap()
        };
        let w = mutual_tls_warning(&config(mtls, &[])).expect("a warning");
        assert!(w.contains("certs"), "{w}");
        let tls = [("A2A_TLS_CERT", "/c"), ("A2A_TLS_KEY", "/k")];
        assert!(mutual_tls_warning(&config(mtls, &tls)).is_some());
        let mut with_ca = tls.to_vec();
        with_ca.push(("A2A_TLS_CLIENT_CA", "/ca"));
        assert!(mutual_tls_warning(&config(mtls, &with_ca)).is_none());
        assert!(mutual_tls_warning(&config("", &[])).is_none());
    }
}
