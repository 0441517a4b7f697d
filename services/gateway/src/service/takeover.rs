//! Takeover: each replica renews its dispatch lease in the store every third of its term and, in
//! the same round, claims the running tasks of replicas whose lease expired. No task stays
//! SUBMITTED or WORKING because a process died; it is taken over within about one lease term plus
//! one round, and its turn goes on here ([`plan`]):
//!
//! - a built-in agent's turn died with its process: the task ends FAILED;
//! - an upstream agent's turn that the dead replica had not sent yet (it waited in that replica's
//!   queue) is dispatched here, with its priority and before newer work of that priority;
//! - one the upstream had named its task for is re-attached to that task;
//! - one whose sending had begun, with no upstream task known: sent again under the same
//!   `Idempotency-Key` when the upstream declares [`super::IDEMPOTENCY_EXTENSION`]
//!   (it answers from the first send if that one arrived), else it ends FAILED, saying that the
//!   outcome upstream is unknown.
//!
//! The store's dispatch marks (`a2a_store::DispatchMarks`) tell these apart: the runner records
//! a queued turn's priority and, just before it sends a turn upstream, which turn it sends.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use a2a_store::{StoreError, TaskRecord};
use a2a_types::v1::Role;
use tokio_util::sync::CancellationToken;

use super::A2aService;
use super::runner::{Resume, Turn, turns_of};
use crate::agents::queue::Priority;
use crate::agents::{Agent, AgentRequest};

/// Until when this replica's dispatch lease is known to hold: the start of the last round
/// that renewed it, plus the lease term. Turns send nothing upstream while it has lapsed
/// ([`LeaseClock::wait_live`]): a replica whose renewals fail (a partition, a stall) stops
/// dispatching as soon as its lease may have expired, without waiting for a survivor's
/// takeover to fence it (review M4).
#[derive(Debug, Default)]
pub(super) struct LeaseClock {
    /// Milliseconds after [`base`]; 0 = no lease is kept (a store only this process uses).
    valid_until_ms: AtomicU64,
    term_ms: AtomicU64,
}

fn base() -> tokio::time::Instant {
    static BASE: OnceLock<tokio::time::Instant> = OnceLock::new();
    *BASE.get_or_init(tokio::time::Instant::now)
}

fn millis_since_base(at: tokio::time::Instant) -> u64 {
    u64::try_from(at.saturating_duration_since(base()).as_millis())
        .unwrap_or(u64::MAX)
        .max(1)
}

impl LeaseClock {
    /// A lease of `lease` is kept from now on: nothing is live until a renewal succeeded.
    fn require(&self, lease: Duration) {
        self.term_ms.store(
            u64::try_from(lease.as_millis()).unwrap_or(u64::MAX).max(1),
            Ordering::Relaxed,
        );
    }

    /// A round that started at `started` renewed the lease for `lease`.
    fn renewed(&self, started: tokio::time::Instant, lease: Duration) {
        let until = millis_since_base(started + lease);
        self.require(lease);
        self.valid_until_ms.fetch_max(until, Ordering::Relaxed);
    }

    /// Whether the lease is live (always, when none is kept).
    pub(super) fn is_live(&self) -> bool {
        if self.term_ms.load(Ordering::Relaxed) == 0 {
            return true;
        }
        millis_since_base(tokio::time::Instant::now()) < self.valid_until_ms.load(Ordering::Relaxed)
    }

    /// Waits until the lease is live again (a renewal succeeded), or `cancel`; whether it is.
    pub(super) async fn wait_live(&self, cancel: &CancellationToken) -> bool {
        let mut said = false;
        while !self.is_live() {
            if !said {
                said = true;
                tracing::warn!(
                    "the dispatch lease has lapsed: no turn is sent upstream until it is renewed"
                );
                metrics::counter!("a2a_dispatch_lease_lapsed_waits_total").increment(1);
            }
            tokio::select! {
                () = cancel.cancelled() => return false,
                () = tokio::time::sleep(Duration::from_millis(50)) => {}
            }
        }
        true
    }
}

/// Orphans claimed per round.
const TAKEOVER_BATCH: usize = 64;

/// How the turn of a task taken over goes on; `turn` is the turn the task is in.
fn plan(agent: &dyn Agent, rec: &TaskRecord, turn: u32) -> Resume {
    if !agent.is_remote() {
        // Its resume fails the task: the turn ran in the process that died.
        return Resume::Reattach;
    }
    // Tasks written before the marks existed: sent if the upstream named its task.
    let sent = rec
        .dispatch
        .sent_turn
        .map_or(rec.upstream.is_some(), |t| t >= turn);
    match (sent, rec.upstream.is_some()) {
        (false, _) => Resume::Redispatch,
        (true, true) => Resume::Reattach,
        (true, false) if agent.resends_idempotently() => Resume::Redispatch,
        // The agent's resume fails it: the outcome upstream is unknown.
        (true, false) => Resume::Reattach,
    }
}

impl A2aService {
    /// Renews this replica's lease and takes over orphaned tasks, every third of `lease`,
    /// until shutdown; after it, only renews the lease, until the turns still running here have
    /// ended (no other replica may take them over while they finish, and a stopping replica
    /// starts no new turn). The first renewal happens before this returns, so a replica never
    /// writes tasks while the others could think it dead.
    pub async fn start_dispatch_lease(&self, replica: String, lease: Duration) {
        // A replica without a lease row would see its tasks claimed at once: until the first
        // renewal succeeds, it sends no turn upstream.
        self.inner.lease.require(lease);
        if let Err(e) = self.take_over_once(&replica, lease, TAKEOVER_BATCH).await {
            tracing::warn!(error = %e, "cannot renew the dispatch lease yet");
        }
        let svc = self.clone();
        let drained = super::drained(std::sync::Arc::downgrade(&self.inner));
        tokio::spawn(async move {
            tokio::pin!(drained);
            let every = (lease / 3).max(Duration::from_millis(100));
            loop {
                tokio::select! {
                    () = &mut drained => return,
                    _ = tokio::time::sleep(every) => {}
                }
                // A round that claims no orphan only renews the lease.
                let batch = if svc.inner.shutdown.is_cancelled() {
                    0
                } else {
                    TAKEOVER_BATCH
                };
                if let Err(e) = svc.take_over_once(&replica, lease, batch).await {
                    tracing::warn!(error = %e, "dispatch lease round failed");
                }
            }
        });
    }

    async fn take_over_once(
        &self,
        replica: &str,
        lease: Duration,
        batch: usize,
    ) -> Result<(), StoreError> {
        let started = tokio::time::Instant::now();
        #[cfg(feature = "failpoints")]
        if crate::failpoints::lease_renewal_stalled() {
            return Err(StoreError::Unavailable(
                "failpoint: lease renewal stalled".into(),
            ));
        }
        let orphans = self.inner.store.take_over(replica, lease, batch).await?;
        self.inner.lease.renewed(started, lease);
        let mut records = Vec::with_capacity(orphans.len());
        for orphan in orphans {
            // Claimed again since (by a replica that took it from this one meanwhile): not ours.
            if let Some(rec) = self
                .inner
                .store
                .get(&orphan.owner, &orphan.task_id, None)
                .await?
                .filter(|rec| rec.dispatch.epoch == orphan.epoch)
            {
                records.push(rec);
            }
        }
        // Started in the order they would have run: the first free slots go to them.
        records.sort_by_key(|rec| {
            let since = rec.task.status.as_ref().and_then(|s| s.timestamp);
            (
                std::cmp::Reverse(rec.dispatch.priority.unwrap_or(Priority::Normal.rank())),
                since.map_or(0, |t| t.as_millis()),
            )
        });
        for rec in records {
            let Some(agent) = self.inner.agents.get(&rec.agent) else {
                tracing::error!(task_id = %rec.task.id, agent = %rec.agent, "the task's agent is not configured here");
                continue;
            };
            let turn = turns_of(&rec.task);
            let resume = plan(agent.as_ref(), &rec, turn);
            tracing::info!(task_id = %rec.task.id, agent = %rec.agent, turn, resume = ?resume, "taking over a task of a replica that stopped");
            let message = rec
                .task
                .history
                .iter()
                .rev()
                .find(|m| m.role == Role::User as i32)
                .cloned()
                .unwrap_or_default();
            let priority = rec
                .dispatch
                .priority
                .map_or(Priority::Normal, Priority::from_rank);
            let turn = Turn {
                agent,
                owner: rec.owner.clone(),
                // The request that started the turn is gone with the replica that ran it.
                parent: a2a_process::telemetry::TraceSpan::NONE,
                traceparent: None,
                request: AgentRequest {
                    task_id: rec.task.id.clone(),
                    context_id: rec.task.context_id.clone(),
                    message,
                    task: Some(rec.task.clone()),
                    upstream: rec.upstream.clone(),
                    turn,
                    // The key the dead replica sent under: the upstream answers from its send.
                    upstream_key: rec.upstream_key.clone(),
                    hops: 0,
                },
                continues: Some(rec.seq),
                epoch: rec.dispatch.epoch,
                push_config: None,
                // No config rides on a taken-over turn: its dialect is never read.
                dialect: a2a_types::Dialect::V1,
                // The client's key, if any, stays with the task, which exists.
                key: None,
                blocking: false,
                cancel: CancellationToken::new(),
                resume,
                priority,
                // A turn taken over is never refused, but it counts against its owner here.
                _quota: self
                    .inner
                    .quotas
                    .force(super::quota::Quota::RunningTurns, &rec.owner),
            };
            drop(self.start_turn(turn));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    /// Review M4: without a renewal within the lease term, turns wait to be sent; a renewal
    /// lets them go; a cancel ends the wait.
    #[tokio::test]
    async fn a_lapsed_lease_holds_sends_until_it_is_renewed() {
        let lease = Duration::from_millis(300);
        let clock = Arc::new(LeaseClock::default());
        assert!(clock.is_live(), "no lease kept (in-memory store)");
        clock.require(lease);
        assert!(!clock.is_live(), "none until the first renewal");
        clock.renewed(tokio::time::Instant::now(), lease);
        assert!(clock.is_live());
        tokio::time::sleep(lease + Duration::from_millis(50)).await;
        assert!(!clock.is_live(), "lapsed");

        let cancel = CancellationToken::new();
        let waiting = {
            let (clock, cancel) = (clock.clone(), cancel.clone());
            tokio::spawn(async move { clock.wait_live(&cancel).await })
        };
        tokio::time::sleep(Duration::from_millis(150)).await;
        assert!(!waiting.is_finished(), "held while lapsed");
        clock.renewed(tokio::time::Instant::now(), lease);
        assert!(waiting.await.unwrap(), "released by the renewal");

        tokio::time::sleep(lease + Duration::from_millis(50)).await;
        let held = {
            let (clock, cancel) = (clock.clone(), cancel.clone());
            tokio::spawn(async move { clock.wait_live(&cancel).await })
        };
        cancel.cancel();
        assert!(!held.await.unwrap(), "a cancel ends the wait");
    }
}
