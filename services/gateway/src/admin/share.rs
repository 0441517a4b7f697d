//! The registry of API agents shared by replicas (PostgreSQL): the 1 s version poll, applying
//! the registry's entries to this process, and recording a change.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use axum::response::Response;

use a2a_store::{PgAgentRegistry, RegisteredAgent, RegistryChange};

use super::entry::build;
use super::{AdminState, MAX_AGENTS, Registered, error};
use crate::service::A2aService;

/// With PostgreSQL: the agents registered through the API live in the shared registry
/// ([`PgAgentRegistry`]), and every replica applies a change within about a second. A 1 s poll
/// of the registry's version (a one-row read) is the notification: cheaper to reason about
/// than a Redis channel (nothing to miss across a reconnect, no Redis needed) and bounded at
/// one tiny query per replica per second; when it moved the registry is read again (at most
/// [`MAX_AGENTS`] entries).
pub async fn share(svc: &A2aService, state: Arc<AdminState>, database_url: &str) {
    let registry = match PgAgentRegistry::connect_lazy(database_url) {
        Ok(r) => r,
        Err(e) => {
            tracing::error!(error = %e, "admin API: the database URL is unusable; API agents stay local");
            return;
        }
    };
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
pub(super) async fn apply(
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
            Ok(built) if &built.config.name == name => {
                built.register(svc.agent_registry(), registered, etag.clone());
                tracing::info!(agent = %name, "admin API: applied a shared agent");
            }
            Ok(built) => built.stop.cancel(),
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
pub(super) async fn persist(
    state: &AdminState,
    change: RegistryChange<'_>,
    who: &str,
) -> Option<Response> {
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
