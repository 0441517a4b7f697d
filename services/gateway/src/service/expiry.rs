//! Interrupted tasks expire (`[limits.quotas] interrupted_task_ttl`): a task that has waited
//! for input (INPUT_REQUIRED, AUTH_REQUIRED) longer than that is CANCELED by the gateway, with
//! a status message that says why, and the event is published like any other: followers,
//! SubscribeToTask streams and push deliveries see it.
//!
//! CANCELED rather than FAILED: nothing went wrong in the agent; the task was given up because
//! nobody answered it, which is what a cancel is (and what a client would have done). The
//! upstream agent, if any, is not told (it keeps its own task waiting by its own rules).
//!
//! Every replica sweeps (no lock): each expiry is an append guarded by the sequence number the
//! sweep found, so of several replicas, and of a sweep racing the client's answer, exactly one
//! write wins; the others find the task moved and leave it. The winner publishes its event.

use std::time::{Duration, SystemTime};

use a2a_store::{Interrupted, StoreError, TaskChange};
use a2a_types::v1::stream_response::Payload;
use a2a_types::v1::{
    Message, Part, Role, StreamResponse, TaskState, TaskStatus, TaskStatusUpdateEvent,
    part::Content,
};
use a2a_types::wkt::Timestamp;
use tokio_util::sync::CancellationToken;

use super::A2aService;

/// Tasks expired per store read.
pub const BATCH: usize = 500;

impl A2aService {
    /// Starts the expiry sweep, every `every` until `shutdown`, when `interrupted_task_ttl` is
    /// set; expired tasks are counted as `a2a_expired_tasks_total`.
    pub fn start_expiry(&self, every: Duration, shutdown: CancellationToken) {
        let Some(ttl) = self.inner.config.quotas.interrupted_task_ttl else {
            return;
        };
        let svc = self.clone();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    _ = tokio::time::sleep(every) => {}
                }
                let n = svc.expire_interrupted(ttl, &shutdown).await;
                if n > 0 {
                    tracing::info!(tasks = n, "interrupted tasks expired");
                }
            }
        });
    }

    /// Cancels the tasks that have waited for input longer than `ttl`, a batch at a time;
    /// returns how many this process expired.
    pub async fn expire_interrupted(&self, ttl: Duration, shutdown: &CancellationToken) -> u64 {
        let before = SystemTime::now() - ttl;
        let mut total = 0;
        while !shutdown.is_cancelled() {
            let found = match self.inner.store.interrupted_before(before, BATCH).await {
                Ok(found) => found,
                Err(e) => {
                    tracing::warn!(error = %e, "cannot read the interrupted tasks to expire");
                    break;
                }
            };
            let mut expired = 0;
            for task in &found {
                if self.expire(task, ttl).await {
                    expired += 1;
                }
            }
            metrics::counter!("a2a_expired_tasks_total").increment(expired);
            total += expired;
            // A full batch of which none moved here: others (or the clients) are moving them.
            if found.len() < BATCH || expired == 0 {
                break;
            }
        }
        total
    }

    /// Appends CANCELED to one interrupted task if it has not moved since it was found.
    async fn expire(&self, task: &Interrupted, ttl: Duration) -> bool {
        let text = format!(
            "expired: the task waited for input longer than {} (interrupted_task_ttl)",
            humane(ttl)
        );
        let event = StreamResponse {
            payload: Some(Payload::StatusUpdate(TaskStatusUpdateEvent {
                task_id: task.task_id.clone(),
                context_id: task.context_id.clone(),
                status: Some(TaskStatus {
                    state: TaskState::Canceled as i32,
                    message: Some(Message {
                        message_id: uuid::Uuid::now_v7().to_string(),
                        context_id: task.context_id.clone(),
                        task_id: task.task_id.clone(),
                        role: Role::Agent as i32,
                        parts: vec![Part {
                            content: Some(Content::Text(text)),
                            ..Default::default()
                        }],
                        ..Default::default()
                    }),
                    timestamp: Some(Timestamp::now()),
                }),
                metadata: None,
            })),
        };
        let change = TaskChange {
            user_message: None,
            event,
        };
        match self
            .inner
            .store
            .append(&task.task_id, task.seq, change)
            .await
        {
            Ok((stored, _)) => {
                self.publish(&task.task_id, [stored]).await;
                true
            }
            // Answered, canceled or expired elsewhere meanwhile, or deleted.
            Err(
                StoreError::Conflict { .. } | StoreError::Terminal(_) | StoreError::NotFound(_),
            ) => false,
            Err(e) => {
                tracing::warn!(task_id = task.task_id, error = %e, "cannot expire an interrupted task");
                false
            }
        }
    }
}

/// `ttl` as the config writes it (the largest whole unit).
fn humane(ttl: Duration) -> String {
    let ms = ttl.as_millis();
    for (unit, size) in [
        ("d", 86_400_000),
        ("h", 3_600_000),
        ("m", 60_000),
        ("s", 1000),
    ] {
        if ms >= size && ms.is_multiple_of(size) {
            return format!("{}{unit}", ms / size);
        }
    }
    format!("{ms}ms")
}
