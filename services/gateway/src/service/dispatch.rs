//! Crash-safe dispatch: idempotent sends and takeover.
//!
//! - **Idempotent SendMessage.** Before a turn is dispatched, its `(owner, messageId)` is claimed
//!   in the store for the task it starts or continues. A retried send finds the claim and follows
//!   that task instead of dispatching again, so it gets the same answer (a blocking send: the
//!   settled task; a streaming send: the task, then its events). A send that created no task
//!   (refused, or answered by a direct message) frees its claim.
//! - **Takeover.** Each replica renews its dispatch lease in the store every third of its term
//!   and, in the same round, claims the running tasks of replicas whose lease expired. A claimed
//!   task is resumed here: an upstream agent re-attaches to its upstream task; a built-in agent's
//!   turn died with its process, so the task ends FAILED. No task stays WORKING because a process
//!   died; it is taken over within about one lease term plus one round.

use std::time::Duration;

use a2a_store::{MessageClaim, StoreError};
use a2a_types::A2aError;
use a2a_types::state::{is_settled, state_of, trim_history};
use a2a_types::v1::{Message, Role, SendMessageResponse, send_message_response};
use futures::StreamExt;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use super::follow::{Follow, settle};
use super::runner::{First, SendOptions, Turn};
use super::{A2aService, EventStream, RequestContext, SeqEvent, store_error};
use crate::agents::AgentRequest;
use crate::upstream::queue::Priority;

/// How long a retried send waits for the task of the first send to appear.
const DUPLICATE_WAIT: Duration = Duration::from_secs(10);
/// Orphans claimed per round.
const TAKEOVER_BATCH: usize = 64;

impl A2aService {
    /// Claims the message id for `message.task_id`; the task it already names, if any.
    /// `continues`: the message continues the task named by its `taskId`.
    pub(super) async fn claim(
        &self,
        ctx: &RequestContext,
        message: &Message,
        continues: bool,
    ) -> Result<Option<String>, A2aError> {
        let store = &self.inner.store;
        for _ in 0..3 {
            match store
                .claim_message(&ctx.owner, &message.message_id, &message.task_id)
                .await
            {
                Ok(MessageClaim::Claimed) => return Ok(None),
                Ok(MessageClaim::Existing(task_id)) => {
                    // A new task's id is minted per send, so only a continuation can name
                    // another task than the first send did.
                    if continues && message.task_id != task_id {
                        return Err(A2aError::invalid_params(
                            "message.messageId",
                            "was already sent for another task",
                        ));
                    }
                    return Ok(Some(task_id));
                }
                // Released between the insert and the read: claim again.
                Err(StoreError::Conflict { .. }) => continue,
                Err(e) => return Err(store_error(&message.task_id, e)),
            }
        }
        Err(A2aError::Unavailable(
            "the message id kept changing hands; retry".into(),
        ))
    }

    /// Frees the claim when the turn created no task, and passes the first answer on.
    pub(super) async fn unclaim_unless_task(
        &self,
        owner: &str,
        message_id: &str,
        first: Result<Result<First, A2aError>, oneshot::error::RecvError>,
    ) -> Result<First, A2aError> {
        let first = first.unwrap_or_else(|_| {
            Err(A2aError::Internal(
                "the task runner stopped before answering".into(),
            ))
        });
        if !matches!(first, Ok(First::Task { .. }))
            && let Err(e) = self.inner.store.release_message(owner, message_id).await
        {
            tracing::warn!(error = %e, "cannot release a message claim");
        }
        first
    }

    /// The record of the task a retried send names, once the first send has created it.
    async fn claimed_task(
        &self,
        ctx: &RequestContext,
        task_id: &str,
    ) -> Result<a2a_store::TaskRecord, A2aError> {
        let deadline = tokio::time::Instant::now() + DUPLICATE_WAIT;
        loop {
            if let Some(rec) = self
                .inner
                .store
                .get(&ctx.owner, task_id, None)
                .await
                .map_err(|e| store_error(task_id, e))?
            {
                return Ok(rec);
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(A2aError::Unavailable(
                    "this message id was sent before and its task is not there yet; retry".into(),
                ));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// A retried SendMessage: the task the first send created, settled like a blocking send.
    pub(super) async fn send_duplicate(
        &self,
        ctx: &RequestContext,
        task_id: &str,
        opts: SendOptions,
    ) -> Result<SendMessageResponse, A2aError> {
        self.claimed_task(ctx, task_id).await?;
        // Subscribe before the snapshot that the follower starts from.
        let bus = self.subscribe_bus(task_id).await?;
        let rec = self.claimed_task(ctx, task_id).await?;
        let mut task = rec.task;
        if !opts.return_immediately && !is_settled(state_of(&task)) {
            let events = self.follow(ctx, task_id, rec.seq, bus);
            let limit = Duration::from_secs(self.inner.config.limits.blocking_timeout_secs);
            if let Ok(result) = tokio::time::timeout(limit, settle(&mut task, events)).await {
                result?;
            }
        }
        trim_history(&mut task, opts.history_length);
        Ok(SendMessageResponse {
            payload: Some(send_message_response::Payload::Task(task)),
        })
    }

    /// A retried SendStreamingMessage: the task, then its events until it settles.
    pub(super) async fn stream_duplicate(
        &self,
        ctx: &RequestContext,
        task_id: &str,
    ) -> Result<EventStream, A2aError> {
        self.claimed_task(ctx, task_id).await?;
        let bus = self.subscribe_bus(task_id).await?;
        let rec = self.claimed_task(ctx, task_id).await?;
        let settled = is_settled(state_of(&rec.task));
        let head = futures::stream::once(futures::future::ready(Ok(SeqEvent::task(
            rec.seq, rec.task,
        ))));
        if settled {
            return Ok(head.boxed());
        }
        Ok(head.chain(self.follow(ctx, task_id, rec.seq, bus)).boxed())
    }

    fn follow(
        &self,
        ctx: &RequestContext,
        task_id: &str,
        after_seq: u64,
        bus: futures::stream::BoxStream<'static, a2a_bus::BusItem>,
    ) -> EventStream {
        Follow {
            store: self.inner.store.clone(),
            bus,
            owner: ctx.owner.clone(),
            task_id: task_id.to_owned(),
            after_seq,
            shutdown: self.inner.shutdown.clone(),
        }
        .into_stream()
    }

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
                cancel: CancellationToken::new(),
                resume: true,
                priority: Priority::Normal,
            };
            drop(self.start_turn(turn));
        }
        Ok(())
    }
}
