//! Crash-safe dispatch: takeover.
//!
//! Each replica renews its dispatch lease in the store every third of its term and, in the
//! same round, claims the running tasks of replicas whose lease expired. A claimed task is
//! resumed here: an upstream agent re-attaches to its upstream task; a built-in agent's turn
//! died with its process, so the task ends FAILED. No task stays WORKING because a process
//! died; it is taken over within about one lease term plus one round.

use std::time::Duration;

use a2a_store::StoreError;
use a2a_types::v1::Role;
use tokio_util::sync::CancellationToken;

use super::A2aService;
use super::runner::Turn;
use crate::agents::AgentRequest;
use crate::upstream::queue::Priority;

/// Orphans claimed per round.
const TAKEOVER_BATCH: usize = 64;

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
        for orphan in orphans {
            let Some(rec) = self
                .inner
                .store
                .get(&orphan.owner, &orphan.task_id, None)
                .await?
            else {
                continue;
            };
            tracing::info!(task_id = %orphan.task_id, agent = %rec.agent, "taking over a task of a replica that stopped");
            let Some(agent) = self.inner.agents.get(&rec.agent) else {
                tracing::error!(task_id = %orphan.task_id, agent = %rec.agent, "the task's agent is not configured here");
                continue;
            };
            let message = rec
                .task
                .history
                .iter()
                .rev()
                .find(|m| m.role == Role::User as i32)
                .cloned()
                .unwrap_or_default();
            let turn = Turn {
                agent,
                owner: rec.owner.clone(),
                // The request that started the turn is gone with the replica that ran it.
                traceparent: None,
                request: AgentRequest {
                    task_id: rec.task.id.clone(),
                    context_id: rec.task.context_id.clone(),
                    message,
                    task: Some(rec.task.clone()),
                    upstream: rec.upstream.clone(),
                },
                continues: Some(rec.seq),
                push_config: None,
                key: None,
                cancel: CancellationToken::new(),
                resume: true,
                priority: Priority::Normal,
            };
            drop(self.start_turn(turn));
        }
        Ok(())
    }
}
