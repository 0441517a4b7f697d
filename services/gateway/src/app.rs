//! Assembling and running the gateway: the store and bus the configuration asks for, the
//! service, the router with its layers, and `serve` until a shutdown token fires. `main`, the
//! tests and the benchmarks all start the gateway through [`build`] and [`serve`].

use std::sync::Arc;

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
use crate::bindings::{card, jsonrpc, rest};
use crate::config::Config;
use crate::service::A2aService;
use crate::upstream::UpstreamAgent;

/// Builds the service for `config`: the PostgreSQL store when `A2A_DATABASE_URL` is set (its
/// connections open on first use, so a database that is down makes the gateway unready, not
/// dead), else the in-memory one; the Redis Streams bus when `A2A_REDIS_URL` is set (also
/// connected on first use: while Redis is down, followers poll the event log), else the
/// in-process bus. Must run inside a tokio runtime.
pub fn build(config: &Config, shutdown: CancellationToken) -> Result<A2aService, String> {
    // With PostgreSQL, API keys may also live in its `api_keys` table (`a2a-gateway keys`).
    let (store, keys): (Arc<dyn TaskStore>, Option<Arc<dyn KeyDirectory>>) =
        match &config.database_url {
            Some(url) => {
                let pg = PgTaskStore::connect_lazy(url, &pg_options(config))
                    .map_err(|e| format!("A2A_DATABASE_URL: {e}"))?;
                let keys = Arc::new(pg.api_keys());
                (Arc::new(pg), Some(keys))
            }
            None => (Arc::new(MemoryTaskStore::new()), None),
        };
    let bus: Arc<dyn EventBus> = match &config.redis_url {
        Some(url) => Arc::new(
            RedisEventBus::connect_lazy(url, &config.redis_prefix)
                .map_err(|e| format!("A2A_REDIS_URL: {e}"))?,
        ),
        None => Arc::new(LocalEventBus::new()),
    };
    let mut agents = AgentRegistry::builtin();
    let upstream = upstream_agents(config, &agents)?;
    for agent in &upstream {
        agents.add(agent.clone());
    }
    if let Some(name) = &config.file.default_agent {
        agents.set_default(name)?;
    }
    let svc = A2aService::new(
        store,
        bus,
        agents,
        config.file.clone(),
        &config.public_url,
        shutdown.clone(),
        keys,
    );
    for agent in &upstream {
        agent.start(shutdown.clone());
    }
    Ok(svc)
}

/// The `[[agents]]` of the configuration (their cards are fetched once they start).
fn upstream_agents(
    config: &Config,
    registry: &AgentRegistry,
) -> Result<Vec<Arc<UpstreamAgent>>, String> {
    if config.file.agents.is_empty() {
        return Ok(Vec::new());
    }
    let http = reqwest::Client::builder()
        .connect_timeout(std::time::Duration::from_secs(5))
        .pool_idle_timeout(std::time::Duration::from_secs(60))
        .build()
        .map_err(|e| format!("the upstream HTTP client: {e}"))?;
    config
        .file
        .agents
        .iter()
        .map(|a| UpstreamAgent::new(a.clone(), http.clone(), registry.change_sender()))
        .collect()
}

/// What `main` and the tests do after [`build`]: wait (bounded) for the first card fetch of
/// every upstream agent, and with PostgreSQL take the dispatch lease (taking over the tasks of
/// replicas that died).
pub async fn start(config: &Config, svc: &A2aService) {
    svc.wait_for_upstreams(std::time::Duration::from_secs(10))
        .await;
    if config.database_url.is_some() {
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

/// Applies the database migrations (`a2a-gateway migrate`, or `serve` with `A2A_MIGRATE=1`).
/// The warning to log at start when the gateway listens beyond loopback without `[auth]`:
/// every caller is then `anonymous`, one owner, so anyone who reaches the port sees and
/// changes every task.
pub fn open_access_warning(config: &Config, addr: std::net::SocketAddr) -> Option<String> {
    if config.file.auth.is_some() || addr.ip().is_loopback() {
        return None;
    }
    Some(format!(
        "listening on {addr}, beyond loopback, with no [auth]: every caller is `anonymous` and \
         shares one owner, so anyone who can reach this address reads, continues and cancels \
         every task; declare [auth] schemes (README, Authentication) or listen on 127.0.0.1"
    ))
}

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
pub fn router(svc: A2aService) -> Router {
    let limit = svc.max_body_bytes();
    // gRPC shares the listener: its paths (`/lf.a2a.v1.A2AService/*`, health, reflection) never
    // collide with the HTTP ones, and tonic enforces its own message limit.
    let grpc = crate::bindings::grpc::router(svc.clone());
    Router::new()
        .route(card::WELL_KNOWN_PATH, get(card::agent_card))
        .route(card::AGENT_CARD_PATH, get(card::upstream_agent_card))
        .route(jsonrpc::PATH, post(jsonrpc::handle))
        .route(&format!("{}/", jsonrpc::PATH), post(jsonrpc::handle))
        .route(a2a_push::JWKS_PATH, get(jwks))
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .merge(rest::routes())
        .layer(DefaultBodyLimit::max(limit))
        .with_state(svc)
        .merge(grpc)
}

/// The public keys that verify push deliveries (`X-A2A-Push-Signature`).
async fn jwks(State(svc): State<A2aService>) -> impl IntoResponse {
    (
        [
            (axum::http::header::CONTENT_TYPE, "application/jwk-set+json"),
            (axum::http::header::CACHE_CONTROL, "public, max-age=300"),
        ],
        svc.jwks(),
    )
}

async fn readyz(State(svc): State<A2aService>) -> impl IntoResponse {
    match svc.store().ping().await {
        Ok(()) => (StatusCode::OK, "ready"),
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
    svc: A2aService,
    shutdown: CancellationToken,
    drain: std::time::Duration,
) -> std::io::Result<usize> {
    let serving = serve(listener, svc.clone(), shutdown.clone());
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
    let left = svc.drain(deadline).await;
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
    svc: A2aService,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    axum::serve(listener, router(svc))
        .with_graceful_shutdown(async move { shutdown.cancelled().await })
        .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::FileConfig;

    #[test]
    fn open_access_is_warned_about_beyond_loopback_only() {
        let open = Config::from_parts(FileConfig::default(), |_| None).unwrap();
        let warn = |c: &Config, a: &str| open_access_warning(c, a.parse().unwrap());
        let w = warn(&open, "0.0.0.0:8080").expect("a warning");
        assert!(w.contains("shares one owner"), "{w}");
        assert!(warn(&open, "[::]:8080").is_some());
        assert!(warn(&open, "10.1.2.3:8080").is_some());
        assert!(warn(&open, "127.0.0.1:8080").is_none());
        assert!(warn(&open, "[::1]:8080").is_none());
        let auth = FileConfig::parse(
            r#"
            [auth.schemes.key]
            scheme = { apiKeySecurityScheme = { location = "header", name = "X-API-Key" } }
            keys = [{ id = "k", key = "k" }]
            "#,
        )
        .unwrap();
        let closed = Config::from_parts(auth, |_| None).unwrap();
        assert!(warn(&closed, "0.0.0.0:8080").is_none());
    }
}
