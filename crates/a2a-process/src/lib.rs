//! Process plumbing shared by the binaries (`a2a-gateway`, `a2a-worker`).

#[cfg(feature = "export")]
pub mod cli;
#[cfg(feature = "export")]
pub mod healthcheck;
pub mod metrics;
pub mod telemetry;

use tokio_util::sync::CancellationToken;

/// Cancels `shutdown` on SIGINT or SIGTERM, logging `what` the process does before it exits.
pub async fn shutdown_on_signal(shutdown: CancellationToken, what: &str) {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("a SIGTERM handler");
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
    tracing::info!("shutting down: {what}");
    shutdown.cancel();
}
