//! Crash-safe dispatch: idempotent sends and takeover.
//!
//! - **Idempotent SendMessage.** Before a turn is dispatched, its `(owner, messageId)` is claimed
//!   in the store for the task it starts or continues. A retried send finds the claim and follows
//!   that task instead of dispatching again, so it gets the same answer (a blocking send: the
//!   settled task; a streaming send: the task, then its events). A send that created no task
//!   (refused, or answered by a direct message) frees its claim.
//! - **Takeover** of a dead replica's tasks is in `takeover.rs`.

use std::time::Duration;

use a2a_store::{MessageClaim, StoreError};
use a2a_types::A2aError;
use a2a_types::state::{is_settled, state_of, trim_history};
use a2a_types::v1::{Message, SendMessageResponse, send_message_response};
use futures::StreamExt;
use tokio::sync::oneshot;

use super::follow::{Follow, settle};
use super::runner::{First, SendOptions};
use super::{A2aService, EventStream, RequestContext, SeqEvent, store_error};

/// How long a retried send waits for the task of the first send to appear.
const DUPLICATE_WAIT: Duration = Duration::from_secs(10);

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
}
