//! The single writer of a running turn's task ([`Runner`]): what it knows of the task, the
//! dispatch facts it records (queued, sending: fenced by the turn's epoch), and how the turn
//! ends (settled, failed, or stopped because another replica took the task over).

use a2a_store::{DispatchMark, StoreError, TaskChange, UpstreamRef};
use a2a_types::A2aError;
use a2a_types::state::{is_terminal, state_of};
use a2a_types::v1::{
    Message, Role, StreamResponse, Task, TaskState, TaskStatus, TaskStatusUpdateEvent,
    stream_response::Payload,
};
use a2a_types::wkt::Timestamp;
use tokio::sync::oneshot;

use super::super::idempotency::KeyHold;
use super::super::{A2aService, store_error};
use super::{First, Resume, Turn};

/// State of one running turn.
pub(super) struct Runner<'a> {
    pub(super) svc: &'a A2aService,
    pub(super) turn: &'a Turn,
    pub(super) first_tx: Option<oneshot::Sender<Result<First, A2aError>>>,
    /// The send's idempotency key: kept once the task exists (or the message continuing it is
    /// recorded); dropped with the runner otherwise, which frees it.
    pub(super) key: Option<KeyHold>,
    /// What the runner needs of its task once it exists (the snapshot goes to the caller).
    pub(super) current: Option<Current>,
    /// Events staged for the next write.
    pub(super) pending: Vec<StreamResponse>,
    /// Upstream ids reported before the task existed.
    pub(super) upstream: Option<UpstreamRef>,
    /// A write was refused because another replica took the task over: the turn stops here
    /// and writes nothing more (its agent, and so its upstream call, is dropped).
    pub(super) fenced: bool,
    /// The task's create failed with the store unreachable (`Runner::create_through_outage`):
    /// it may be stored all the same (its answer lost after the COMMIT). Cleared once the
    /// outcome is known (`Runner::settle_lost_create`).
    pub(super) create_unknown: bool,
}

/// However the runner ends: the owner's remembered open-task figure drops the task it counted
/// when the turn left it terminal as stored, or (a new task) never stored it
/// (`Quotas::task_closed`, `service/quota.rs`). A create whose outcome stayed unknown may have
/// stored the task open: it keeps counting until the next store read says.
impl Drop for Runner<'_> {
    fn drop(&mut self) {
        let closed = match &self.current {
            Some(current) => is_terminal(current.state),
            None => self.turn.continues.is_none() && !self.create_unknown,
        };
        if closed {
            self.svc.inner.quotas.task_closed(&self.turn.owner);
        }
    }
}

/// What a runner keeps of its task's last snapshot.
#[derive(Debug, Clone, Copy)]
pub(super) struct Current {
    pub(super) seq: u64,
    pub(super) state: TaskState,
    /// When its status last changed, Unix milliseconds (where a taken-over turn queues).
    pub(super) since_ms: i64,
}

impl Current {
    pub(super) fn of(task: &Task, seq: u64) -> Self {
        Self {
            seq,
            state: state_of(task),
            since_ms: task
                .status
                .as_ref()
                .and_then(|s| s.timestamp)
                .map_or(0, |t| t.as_millis()),
        }
    }
}

impl Runner<'_> {
    pub(super) fn task_id(&self) -> &str {
        &self.turn.request.task_id
    }

    pub(super) fn status_event(
        &self,
        state: TaskState,
        message: Option<Message>,
    ) -> StreamResponse {
        StreamResponse {
            payload: Some(Payload::StatusUpdate(TaskStatusUpdateEvent {
                task_id: self.task_id().to_owned(),
                context_id: self.turn.request.context_id.clone(),
                status: Some(TaskStatus {
                    state: state as i32,
                    message,
                    timestamp: Some(Timestamp::now()),
                }),
                metadata: None,
            })),
        }
    }

    /// Whether the task exists or is about to (events are staged for it).
    pub(super) fn exists(&self) -> bool {
        self.current.is_some() || !self.pending.is_empty()
    }

    /// The task's state after the staged events.
    pub(super) fn state(&self) -> TaskState {
        let staged = self.pending.iter().rev().find_map(|e| match &e.payload {
            Some(Payload::StatusUpdate(u)) => u.status.as_ref().map(|s| s.state()),
            _ => None,
        });
        staged.unwrap_or_else(|| {
            self.current
                .as_ref()
                .map_or(TaskState::Submitted, |c| c.state)
        })
    }

    /// Tells the waiting caller that the task exists (once), as `task` at `seq`.
    pub(super) fn announce(&mut self, task: Task, seq: u64) {
        if let Some(key) = self.key.take() {
            key.keep();
        }
        if let Some(tx) = self.first_tx.take() {
            let _ = tx.send(Ok(First::Task { task, seq }));
        }
    }

    /// Staged events as store changes.
    pub(super) fn take_pending(&mut self) -> Vec<TaskChange> {
        std::mem::take(&mut self.pending)
            .into_iter()
            .map(|event| TaskChange {
                user_message: None,
                event,
            })
            .collect()
    }

    pub(super) async fn record_upstream(&mut self, ids: UpstreamRef) -> Result<(), A2aError> {
        self.svc
            .inner
            .store
            .set_upstream(self.task_id(), ids)
            .await
            .map_err(|e| store_error(self.task_id(), e))
    }

    /// Waits for a running slot when the agent has a queue. A turn that has to wait makes its
    /// task visible first (SUBMITTED), so the caller is answered and can cancel it, and records
    /// its priority for a takeover; a full queue is refused before the task exists. A turn taken
    /// over is readmitted where it was: its priority, and the time its task last changed (when
    /// it was queued, for a turn never sent).
    pub(super) async fn admit(&mut self) -> Result<Option<crate::agents::queue::Permit>, A2aError> {
        use crate::agents::queue::Admission;
        let Some(queue) = self.turn.agent.queue() else {
            return Ok(None);
        };
        let since_ms = match (&self.current, self.turn.resume) {
            (Some(current), Resume::Reattach | Resume::Redispatch) => Some(current.since_ms),
            _ => None,
        };
        let admission = match since_ms {
            Some(ms) => queue.readmit(self.turn.priority, ms),
            None => queue.admit(self.turn.priority)?,
        };
        let rx = match admission {
            Admission::Now(permit) => return Ok(Some(permit)),
            Admission::Queued(rx) => rx,
        };
        tracing::debug!(task_id = %self.task_id(), priority = self.turn.priority.as_str(), "turn queued");
        if self.current.is_none() {
            self.create().await?;
        }
        if self.turn.resume == Resume::No {
            let mark = DispatchMark::Queued {
                priority: self.turn.priority.rank(),
            };
            // Without it a takeover dispatches the turn at NORMAL priority: not worth failing it.
            if let Err(e) = self
                .svc
                .inner
                .store
                .mark_dispatch(self.task_id(), mark)
                .await
            {
                tracing::warn!(task_id = %self.task_id(), error = %e, "cannot record the queued turn's priority");
            }
        }
        tokio::select! {
            permit = rx => permit
                .map(Some)
                .map_err(|_| A2aError::Internal("the dispatch queue closed".into())),
            _ = self.turn.cancel.cancelled() => Err(A2aError::Internal("canceled while queued".into())),
        }
    }

    /// Records, before an upstream agent is sent the turn of an existing task, that its sending
    /// begins: a replica taking the task over can then tell a turn never sent (it dispatches it)
    /// from one whose outcome upstream it cannot know. (A new task's first turn that needed no
    /// wait is sent before the task exists; nothing is left to take over if the replica dies
    /// then.)
    ///
    /// Nothing is sent while this replica's dispatch lease has lapsed (it waits for a renewal),
    /// and the mark carries the turn's epoch: a task taken over meanwhile is not sent from here.
    pub(super) async fn mark_sending(&mut self) -> Result<(), A2aError> {
        if !self.turn.agent.is_remote() {
            return Ok(());
        }
        if !self.svc.inner.lease.wait_live(&self.turn.cancel).await {
            return Err(A2aError::Internal("canceled while the lease lapsed".into()));
        }
        if self.current.is_none() {
            return Ok(());
        }
        let mark = DispatchMark::Sending {
            turn: self.turn.request.turn,
            epoch: self.turn.epoch,
        };
        let marked = self
            .svc
            .inner
            .store
            .mark_dispatch(self.task_id(), mark)
            .await;
        marked.map_err(|e| self.store_failure(e))
    }

    /// A store error of this turn's write as the turn's error; a fenced one (the task was taken
    /// over) is remembered, so the turn stops without writing anything more.
    pub(super) fn store_failure(&mut self, e: StoreError) -> A2aError {
        if matches!(e, StoreError::Fenced(_)) {
            self.fenced = true;
        }
        store_error(self.task_id(), e)
    }

    /// Ends the turn in `state` (used for cancel and agent failures).
    pub(super) async fn settle(
        &mut self,
        state: TaskState,
        text: Option<String>,
    ) -> Result<(), A2aError> {
        // Taken over: the end of the turn is the other replica's to write.
        if !self.exists() || self.fenced {
            return Ok(());
        }
        let message = text.map(|t| Message {
            message_id: uuid::Uuid::now_v7().to_string(),
            context_id: self.turn.request.context_id.clone(),
            task_id: self.task_id().to_owned(),
            role: Role::Agent as i32,
            parts: vec![crate::agents::text_part(t)],
            ..Default::default()
        });
        let event = self.status_event(state, message);
        self.apply(event).await
    }

    /// The agent returned without settling the task.
    pub(super) async fn on_agent_end(&mut self, outcome: Result<(), A2aError>) {
        let error = match outcome {
            Ok(()) if !self.exists() => A2aError::InvalidAgentResponse(format!(
                "agent {} ended its turn without a reply",
                self.turn.agent.name()
            )),
            Ok(()) => A2aError::InvalidAgentResponse(format!(
                "agent {} ended its turn without a final state",
                self.turn.agent.name()
            )),
            Err(e) => e,
        };
        self.fail(error).await;
    }

    /// Whether the stored task is already terminal (ended by another writer).
    pub(super) async fn ended_elsewhere(&self) -> bool {
        let store = &self.svc.inner.store;
        matches!(
            store.get(&self.turn.owner, self.task_id(), Some(0)).await,
            Ok(Some(rec)) if is_terminal(state_of(&rec.task))
        )
    }

    /// Reports `error` to the caller if the task does not exist yet, else ends the task FAILED.
    pub(super) async fn fail(&mut self, error: A2aError) {
        if self.fenced {
            tracing::warn!(task_id = %self.task_id(), agent = self.turn.agent.name(), epoch = self.turn.epoch, "the turn stops: another replica took its task over (stale dispatch epoch); nothing more is written or sent from here");
            metrics::counter!("a2a_turns_fenced_total", "agent" => self.turn.agent.name().to_owned())
                .increment(1);
            if let Some(tx) = self.first_tx.take() {
                let _ = tx.send(Err(error));
            }
            return;
        }
        if !self.exists() && self.create_unknown {
            // Told at once, as when nothing was stored; then the runner finds out whether
            // something was after all.
            if let Some(tx) = self.first_tx.take() {
                let _ = tx.send(Err(error));
            }
            return self.settle_lost_create().await;
        }
        if !self.exists()
            && let Some(tx) = self.first_tx.take()
        {
            let _ = tx.send(Err(error));
            return;
        }
        if self.ended_elsewhere().await {
            // A CancelTask on another replica wrote the task's end while this turn ran: its
            // write conflicted, and there is nothing to fail.
            tracing::info!(task_id = %self.task_id(), error = %error, "the turn stops: its task was ended concurrently");
            return;
        }
        tracing::warn!(task_id = %self.task_id(), error = %error, "task failed");
        if let Err(e) = self
            .settle(TaskState::Failed, Some(error.to_string()))
            .await
        {
            tracing::error!(task_id = %self.task_id(), error = %e, "cannot record the failure");
        }
    }
}
