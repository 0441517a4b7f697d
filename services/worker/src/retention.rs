//! Retention of the delivery log: every attempt is logged in `push_delivery_log`, so without
//! pruning the table grows for as long as the worker runs. Each worker deletes the rows older
//! than `A2A_WORKER_LOG_RETENTION_HOURS` every [`INTERVAL`], in batches of [`BATCH`] rows
//! ([`PgDeliveryStore::prune_log`] says why several workers doing so at once is harmless).
//! Dead letters are not pruned: they stay until an operator has replayed them.

use std::time::Duration;

use a2a_store::StoreResult;
use a2a_store::pg::PgDeliveryStore;
use tokio_util::sync::CancellationToken;

use crate::metrics;

/// Time between two passes. Rows live for hours or days, so a pass every few minutes keeps the
/// table within minutes of its retention at the cost of one short index read when idle.
pub const INTERVAL: Duration = Duration::from_secs(600);

/// Rows deleted per statement: about 50 ms of row locks per statement (measured), so a backlog
/// of millions of rows goes in many short transactions rather than one long one.
pub const BATCH: u32 = 10_000;

/// The longest wait before the first pass: workers started together (a deployment) spread
/// their passes out, and a starting worker first catches up on its deliveries.
const FIRST_PASS_WITHIN: Duration = Duration::from_secs(60);

/// Deletes the log rows older than `retention` (zero: none), counts them in the metrics and
/// logs how many went; returns that number.
pub async fn prune_once(
    store: &PgDeliveryStore,
    retention: Duration,
    batch: u32,
) -> StoreResult<u64> {
    let pruned = store.prune_log(retention, batch).await?;
    if pruned > 0 {
        metrics::log_pruned(pruned);
        tracing::info!(
            rows = pruned,
            retention_hours = retention.as_secs() / 3600,
            "pruned the delivery log"
        );
    }
    Ok(pruned)
}

/// Prunes every [`INTERVAL`] until `shutdown` fires. A failed pass (PostgreSQL unreachable) is
/// logged and retried at the next interval: the log is a record for operators, nothing waits
/// on it.
pub async fn run(store: PgDeliveryStore, retention: Duration, shutdown: CancellationToken) {
    if retention.is_zero() {
        return;
    }
    let mut wait = FIRST_PASS_WITHIN.mul_f64(fastrand::f64());
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(wait) => {}
        }
        // Stopping mid-pass is harmless: each statement commits on its own, and the next pass
        // (of this worker or another) starts from the oldest row left.
        tokio::select! {
            _ = shutdown.cancelled() => return,
            result = prune_once(&store, retention, BATCH) => {
                if let Err(e) = result {
                    tracing::warn!(error = %e, "cannot prune the delivery log; retrying later");
                }
            }
        }
        wait = INTERVAL;
    }
}
