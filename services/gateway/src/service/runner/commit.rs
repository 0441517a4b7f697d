//! The [`Runner`]'s writes: the task's create (with the send's inline push config, in one
//! atomic write) and the fenced appends of its events, each published once committed, and
//! retried through a store outage where losing it would strand the task.

use a2a_store::{InlinePush, NewTask, StoreError, StoredEvent, TaskChange};
use std::time::Duration;

use a2a_types::A2aError;
use a2a_types::state::{is_settled, is_terminal, state_of};
use a2a_types::v1::{StreamResponse, Task, TaskPushNotificationConfig, TaskState, TaskStatus};
use a2a_types::wkt::Timestamp;

use super::super::store_error;
use super::state::{Current, Runner};
use super::through_outage;

/// How long a create whose answer was lost is left before it is read back: a COMMIT still in
/// flight when its connection dropped lands (or is abandoned) meanwhile, so that a read finding
/// nothing means nothing was stored.
const LOST_CREATE_GRACE: Duration = Duration::from_secs(1);

/// The status message of a task whose create was stored although its caller was refused.
const LOST_CREATE_FAILURE: &str = "the task store was unreachable when this task was created; \
     the caller was told to retry";

impl Runner<'_> {
    /// Creates the task (sequence 1) with the staged events after it and the send's inline push
    /// config, in one write: a task is never stored without the config its send asked for (a
    /// replica gone between two writes would leave the task running on elsewhere, its webhook
    /// never told). A config past its quota refuses the send: nothing is stored, and the caller
    /// gets the quota error.
    pub(super) async fn create(&mut self) -> Result<(), A2aError> {
        let req = &self.turn.request;
        let task = Task {
            id: req.task_id.clone(),
            context_id: req.context_id.clone(),
            status: Some(TaskStatus {
                state: TaskState::Submitted as i32,
                message: None,
                timestamp: Some(Timestamp::now()),
            }),
            artifacts: Vec::new(),
            history: vec![req.message.clone()],
            metadata: None,
        };
        // A blocking send whose task this write settles is answered with the settled snapshot
        // (any snapshot at its sequence number is a correct start for the caller, which follows
        // from there if it is not settled after all); otherwise with the task as created.
        let answer_settled =
            self.turn.blocking && self.first_tx.is_some() && is_settled(self.state());
        let created = (!answer_settled).then(|| task.clone());
        let changes = self.take_pending();
        // The config's id is fixed here, so a retry of the write stores the same config.
        let push = self.turn.push_config.as_ref().map(|cfg| InlinePush {
            config: TaskPushNotificationConfig {
                tenant: String::new(),
                id: if cfg.id.is_empty() {
                    uuid::Uuid::now_v7().to_string()
                } else {
                    cfg.id.clone()
                },
                task_id: req.task_id.clone(),
                ..cfg.clone()
            },
            dialect: self.turn.dialect,
            quota: self.svc.push_quota(),
        });
        let new = NewTask {
            upstream_key: req.upstream_key.clone(),
            owner: self.turn.owner.clone(),
            agent: self.turn.agent.name().to_owned(),
            task,
            push,
        };
        let (events, snapshot) = self.create_through_outage(new, changes).await?;
        crate::metrics::committed(self.turn.agent.name(), true, &events);
        let last = events.last().map_or(1, |e| e.seq);
        self.svc.publish(self.task_id(), events).await;
        // The caller starts from the task as created, and the later events reach it as events;
        // or, as above, from the settled snapshot.
        self.current = Some(Current::of(&snapshot, last));
        match created {
            Some(task) => self.announce(task, 1),
            None => self.announce(snapshot, last),
        }
        if let Some(ids) = self.upstream.take() {
            self.record_upstream(ids).await?;
        }
        Ok(())
    }

    /// The task's create. One with an inline push config is retried while the store is
    /// unreachable, as the config's own write was when it came second (a send's config is not
    /// dropped for a PostgreSQL restart); one without fails at once, as a new request does
    /// then. A retry refused as a duplicate found its own earlier attempt, committed although
    /// its answer was lost (the task id was minted for this send): it reads it back.
    ///
    /// A create that fails with the store unreachable (at once, or past the patience) may have
    /// committed all the same, its answer lost: the caller is told `Unavailable` at once, and
    /// the runner settles the outcome after (`Runner::settle_lost_create`).
    pub(super) async fn create_through_outage(
        &mut self,
        new: NewTask,
        changes: Vec<TaskChange>,
    ) -> Result<(Vec<StoredEvent>, Task), A2aError> {
        let svc = self.svc;
        let store = &svc.inner.store;
        let result = if new.push.is_none() {
            store.create_with(new, changes).await
        } else {
            let (result, retried) = through_outage(
                self.task_id(),
                "the task's write with its push config",
                || store.create_with(new.clone(), changes.clone()),
            )
            .await;
            match result {
                Err(StoreError::Duplicate(_)) if retried => return self.read_back(0).await,
                other => other,
            }
        };
        if let Err(StoreError::Unavailable(_)) = &result {
            self.create_unknown = true;
        }
        result.map_err(|e| store_error(self.task_id(), e))
    }

    /// Settles a create whose outcome is unknown (`create_unknown`), once its caller has been
    /// told `Unavailable`. That caller retries as a new send (its idempotency key is freed here
    /// at once) and never learns this task's id, minted for the send: a task the create did
    /// store must neither run on (the work would be done twice) nor stay open with nothing
    /// running it (under this replica's live dispatch lease no takeover would rescue it, and it
    /// would count against the owner's `open_tasks_per_owner` for good). So the task is read
    /// back once the store answers (after [`LOST_CREATE_GRACE`], then retried for up to
    /// `STORE_OUTAGE_PATIENCE`): stored and not over, it ends FAILED, saying why, through the
    /// turn's own fenced write (its event published, its push targets told, the owner's
    /// open-task figure released as the runner ends); not stored, there is nothing to do.
    /// Meanwhile the agent is not run any further and the task stays claimed here; the turn
    /// ends, releasing the claim, once this returns. The same for every store: it is all above
    /// the store trait.
    pub(super) async fn settle_lost_create(&mut self) {
        drop(self.key.take());
        tokio::time::sleep(LOST_CREATE_GRACE).await;
        let (svc, turn) = (self.svc, self.turn);
        let (owner, task_id) = (&turn.owner, turn.request.task_id.as_str());
        let (found, _) = through_outage(
            task_id,
            "reading back a create whose answer was lost",
            || svc.inner.store.get(owner, task_id, Some(0)),
        )
        .await;
        let rec = match found {
            Ok(Some(rec)) => rec,
            Ok(None) => {
                tracing::info!(task_id, "the create whose answer was lost was not stored");
                self.create_unknown = false;
                return;
            }
            Err(e) => {
                tracing::error!(task_id, error = %e, "cannot tell whether a create whose answer was lost was stored; the task may be left open");
                return;
            }
        };
        self.create_unknown = false;
        self.current = Some(Current::of(&rec.task, rec.seq));
        if is_terminal(state_of(&rec.task)) {
            return;
        }
        tracing::warn!(
            task_id,
            "a create whose answer was lost was stored: the task fails"
        );
        let failed = self
            .settle(TaskState::Failed, Some(LOST_CREATE_FAILURE.to_owned()))
            .await;
        if let Err(e) = failed {
            tracing::error!(task_id, error = %e, "cannot fail the task of a create whose answer was lost");
        }
    }

    /// The task's events after `after_seq` and its snapshot, as the store holds them: what a
    /// write whose answer was lost had committed.
    pub(super) async fn read_back(
        &self,
        after_seq: u64,
    ) -> Result<(Vec<StoredEvent>, Task), A2aError> {
        let store = &self.svc.inner.store;
        let owner = &self.turn.owner;
        let rec = store
            .get(owner, self.task_id(), None)
            .await
            .map_err(|e| store_error(self.task_id(), e))?
            .ok_or_else(|| A2aError::task_not_found(self.task_id()))?;
        let mut events = store
            .events_after(owner, self.task_id(), after_seq)
            .await
            .map_err(|e| store_error(self.task_id(), e))?;
        // Read apart from the snapshot: what a later writer appended between the two reads is
        // left to it.
        events.retain(|e| e.seq <= rec.seq);
        Ok((events, rec.task))
    }

    /// Stores changes as one write, then publishes their events; the snapshot after them and
    /// its sequence number.
    pub(super) async fn commit(
        &mut self,
        expected_seq: u64,
        changes: Vec<TaskChange>,
    ) -> Result<(Task, u64), A2aError> {
        #[cfg(feature = "test-panics")]
        crate::test_panics::test_panic(&self.turn.request.message, "turn");
        let (events, snapshot) = self.append_through_outage(expected_seq, changes).await?;
        crate::metrics::committed(self.turn.agent.name(), false, &events);
        let last = events.last().map_or(expected_seq, |e| e.seq);
        self.svc.publish(self.task_id(), events).await;
        self.current = Some(Current::of(&snapshot, last));
        Ok((snapshot, last))
    }

    /// The turn's write, fenced by the turn's epoch, retried while the store is unreachable (a
    /// PostgreSQL restart, a short outage) for up to `STORE_OUTAGE_PATIENCE`: the turn then
    /// goes on where it was. Failing at once would fail the task with a write that cannot be
    /// stored either, leaving it WORKING on a replica that holds its lease, so never taken
    /// over. A retry that finds the
    /// sequence moved by exactly this write's events found its own earlier attempt, committed
    /// although its answer was lost (this runner is the task's only writer): it reads it back.
    pub(super) async fn append_through_outage(
        &mut self,
        expected_seq: u64,
        changes: Vec<TaskChange>,
    ) -> Result<(Vec<StoredEvent>, Task), A2aError> {
        let store = &self.svc.inner.store;
        let written = changes.len() as u64;
        let epoch = Some(self.turn.epoch);
        let (result, retried) = through_outage(self.task_id(), "the turn's write", || {
            store.append_fenced(self.task_id(), expected_seq, epoch, changes.clone())
        })
        .await;
        match result {
            Ok(done) => Ok(done),
            Err(StoreError::Conflict { actual, .. })
                if retried && actual == expected_seq + written =>
            {
                self.read_back(expected_seq).await
            }
            Err(e) => Err(self.store_failure(e)),
        }
    }

    /// Stages `event` for the next write. Events an agent produces in a burst (an echo's whole
    /// answer, chunks sent faster than the store commits) are stored together: one write, one
    /// commit and one sequence-guard check instead of one each.
    pub(super) fn stage(&mut self, event: StreamResponse) {
        self.pending.push(event);
    }

    /// Writes the staged events (creating the task first if needed).
    pub(super) async fn flush(&mut self) -> Result<(), A2aError> {
        match &self.current {
            _ if self.pending.is_empty() => Ok(()),
            None => self.create().await,
            Some(current) => {
                let seq = current.seq;
                let changes = self.take_pending();
                self.commit(seq, changes).await.map(drop)
            }
        }
    }

    /// Stores `event` on the task now (creating it first if needed).
    pub(super) async fn apply(&mut self, event: StreamResponse) -> Result<(), A2aError> {
        self.stage(event);
        self.flush().await
    }
}
