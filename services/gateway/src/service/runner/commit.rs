//! The [`Runner`]'s writes: the task's create (with the send's inline push config, in one
//! atomic write) and the fenced appends of its events, each published once committed, and
//! retried through a store outage where losing it would strand the task.

use a2a_store::{InlinePush, NewTask, StoreError, StoredEvent, TaskChange};
use a2a_types::A2aError;
use a2a_types::state::is_settled;
use a2a_types::v1::{StreamResponse, Task, TaskPushNotificationConfig, TaskState, TaskStatus};
use a2a_types::wkt::Timestamp;

use super::super::store_error;
use super::state::{Current, Runner};
use super::through_outage;

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
        self.svc
            .publish(self.task_id(), events.into_iter().map(|e| (e.seq, e.event)))
            .await;
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
    pub(super) async fn create_through_outage(
        &self,
        new: NewTask,
        changes: Vec<TaskChange>,
    ) -> Result<(Vec<StoredEvent>, Task), A2aError> {
        let store = &self.svc.inner.store;
        if new.push.is_none() {
            let created = store.create_with(new, changes).await;
            return created.map_err(|e| store_error(self.task_id(), e));
        }
        let (result, retried) = through_outage(
            self.task_id(),
            "the task's write with its push config",
            || store.create_with(new.clone(), changes.clone()),
        )
        .await;
        match result {
            Ok(done) => Ok(done),
            Err(StoreError::Duplicate(_)) if retried => self.read_back(0).await,
            Err(e) => Err(store_error(self.task_id(), e)),
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
        self.svc
            .publish(self.task_id(), events.into_iter().map(|e| (e.seq, e.event)))
            .await;
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
