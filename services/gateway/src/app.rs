//! Assembling and running the gateway: the store and bus the configuration asks for, the
//! service, the router with its layers, and `serve` until a shutdown token fires. `main`, the
//! tests and the benchmarks all start the gateway through [`build`] and [`serve`].

use std::sync::Arc;

use a2a_bus::{EventBus, LocalEventBus};
use a2a_store::{MemoryTaskStore, TaskStore};
use axum::Router;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::{get, post};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::agents::AgentRegistry;
use crate::bindings::{card, jsonrpc, rest};
use crate::config::Config;
use crate::service::A2aService;

/// Builds the service for `config`. Only the embedded store and bus exist in this build, so a
/// configured database or Redis is refused rather than silently ignored.
pub fn build(config: &Config, shutdown: CancellationToken) -> Result<A2aService, String> {
    if config.database_url.is_some() {
        return Err("A2A_DATABASE_URL is set, but this build only has the in-memory store".into());
    }
    if config.redis_url.is_some() {
        return Err("A2A_REDIS_URL is set, but this build only has the in-process bus".into());
    }
    let store: Arc<dyn TaskStore> = Arc::new(MemoryTaskStore::new());
    let bus: Arc<dyn EventBus> = Arc::new(LocalEventBus::new());
    let mut agents = AgentRegistry::builtin();
    if let Some(name) = &config.file.default_agent {
        agents.set_default(name)?;
    }
    Ok(A2aService::new(
        store,
        bus,
        agents,
        config.file.clone(),
        &config.public_url,
        shutdown,
    ))
}

/// Every route, with the body limit the configuration sets.
pub fn router(svc: A2aService) -> Router {
    let limit = svc.max_body_bytes();
    // gRPC shares the listener: its paths (`/lf.a2a.v1.A2AService/*`, health, reflection) never
    // collide with the HTTP ones, and tonic enforces its own message limit.
    let grpc = crate::bindings::grpc::router(svc.clone());
    Router::new()
        .route(card::WELL_KNOWN_PATH, get(card::agent_card))
        .route(jsonrpc::PATH, post(jsonrpc::handle))
        .route(&format!("{}/", jsonrpc::PATH), post(jsonrpc::handle))
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .merge(rest::routes())
        .layer(DefaultBodyLimit::max(limit))
        .with_state(svc)
        .merge(grpc)
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

/// Serves HTTP/1.1 and h2c on `listener` until `shutdown` fires; open streams end, in-flight
/// requests finish, then this returns.
pub async fn serve(
    listener: TcpListener,
    svc: A2aService,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    axum::serve(listener, router(svc))
        .with_graceful_shutdown(async move { shutdown.cancelled().await })
        .await
}
