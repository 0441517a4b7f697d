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
//!   `Idempotency-Key` when the upstream declares [`crate::upstream::IDEMPOTENCY_EXTENSION`]
//!   (it answers from the first send if that one arrived), else it ends FAILED, saying that the
//!   outcome upstream is unknown.
//!
//! The store's dispatch marks (`a2a_store::DispatchMarks`) tell these apart: the runner records
//! a queued turn's priority and, just before it sends a turn upstream, which turn it sends.

use std::time::Duration;

use a2a_store::{StoreError, TaskRecord};
use a2a_types::v1::Role;
use tokio_util::sync::CancellationToken;

use super::A2aService;
use super::runner::{Resume, Turn, turns_of};
use crate::agents::{Agent, AgentRequest};
use crate::upstream::queue::Priority;

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
        let orphans = self.inner.store.take_over(replica, lease, batch).await?;
        let mut records = Vec::with_capacity(orphans.len());
        for orphan in orphans {
            if let Some(rec) = self
                .inner
                .store
                .get(&orphan.owner, &orphan.task_id, None)
                .await?
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
                    hops: 0,
                },
                continues: Some(rec.seq),
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
