//! The reconciliation sweep (issue 27 item 2, review H5): the worker's progress per task is
//! `push_progress.delivered_seq` in PostgreSQL, and a task whose progress is behind `tasks.seq`
//! has events to deliver whatever the stream says: entries Redis trimmed (`MAXLEN`), lost (a
//! restart without persistence) or never got (published while it was unreachable), entries
//! left to the ledger by a full queue or a busy owner, and the rest of a batch a crashed worker
//! had acknowledged. Every interval each worker takes a bounded batch of such tasks
//! ([`a2a_store::pg::PgDeliveryStore::sweep`]: a range scan of a partial index of unsettled
//! rows, `FOR UPDATE SKIP LOCKED`, each row looked at once per interval by one worker) and wakes
//! them in its pipeline, which reads their missing events from the event log, in order, under
//! the task's lease.

use std::sync::Arc;
use std::time::Duration;

use a2a_delivery::DeliveryStore;
use tokio_util::sync::CancellationToken;

use crate::metrics;
use crate::pipeline::Pipeline;

/// Statements per pass at most: a large backlog is taken over several intervals, so a pass
/// stays short and the pipeline is not flooded.
const STATEMENTS_PER_PASS: usize = 8;

/// One pass: wakes the tasks found behind (as many as the pipeline has room for); returns how
/// many were found.
pub async fn sweep_once(
    pipeline: &Arc<Pipeline>,
    store: &Arc<dyn DeliveryStore>,
    batch: u32,
    interval: Duration,
) -> Result<usize, String> {
    let mut found = 0;
    for _ in 0..STATEMENTS_PER_PASS {
        let (behind, gone) = store
            .behind(batch, interval)
            .await
            .map_err(|e| e.to_string())?;
        metrics::swept(behind.len(), gone);
        found += behind.len();
        let mut full = false;
        for b in &behind {
            if !pipeline.wake(&b.task_id, b.seq) {
                full = true; // looked at again next interval
            }
        }
        if full || behind.len() < batch as usize {
            break;
        }
    }
    if found > 0 {
        tracing::info!(
            tasks = found,
            "the sweep found tasks behind their event log; delivering from it"
        );
    }
    Ok(found)
}

/// Sweeps every `interval` until `shutdown`.
pub async fn run(
    pipeline: Arc<Pipeline>,
    store: Arc<dyn DeliveryStore>,
    batch: u32,
    interval: Duration,
    shutdown: CancellationToken,
) {
    // Workers started together spread their passes over the first interval.
    let mut wait = interval.mul_f64(fastrand::f64());
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(wait) => {}
        }
        if let Err(e) = sweep_once(&pipeline, &store, batch, interval).await {
            tracing::warn!(error = %e, "the delivery sweep failed; retrying at the next interval");
        }
        wait = interval;
    }
}
