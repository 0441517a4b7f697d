//! The task ledger behind the gateway: the [`TaskStore`] trait, its in-memory implementation, and
//! the conformance suite every implementation must pass.
//!
//! *Invariant*: every read and every listing is scoped to an owner; a task of another owner is
//! indistinguishable from a missing one. *Invariant*: each task's events carry strictly increasing
//! sequence numbers (1 = the task as created), and appending an event updates the snapshot in the
//! same atomic step, guarded by the sequence number the writer last saw.
//! *Boundary*: no store knows HTTP, JSON-RPC or gRPC.

mod cursor;
mod idempotency;
mod memory;
mod metered;
#[cfg(feature = "postgres")]
pub mod pg;
mod redact;
mod registry;
#[cfg(any(test, feature = "testing"))]
pub mod suite;

use a2a_types::Dialect;
use a2a_types::v1::{Message, StreamResponse, Task, TaskPushNotificationConfig, TaskState};
use a2a_types::wkt::Timestamp;
use async_trait::async_trait;
use std::sync::Arc;

pub use cursor::Cursor;
pub use idempotency::{HeldKey, KeyClaim, KeyRequest};
pub use memory::MemoryTaskStore;
pub use metered::Metered;
#[cfg(feature = "postgres")]
pub use pg::{ApiKeyRecord, PgApiKeys, PgOptions, PgTaskStore};
pub use redact::{redact_url, redact_urls};
#[cfg(feature = "postgres")]
pub use registry::PgAgentRegistry;
pub use registry::{
    AgentRegistryStore, AuditRecord, MemoryAgentRegistry, RegisteredAgent, RegistryChange,
};

/// A task snapshot and what the gateway keeps beside it.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskRecord {
    /// Snapshot with status, artifacts and (possibly trimmed) history.
    pub task: Task,
    pub owner: String,
    /// Name of the agent the task was routed to.
    pub agent: String,
    /// Sequence number of the last event applied to the snapshot.
    pub seq: u64,
    /// The upstream agent's ids for this task, once the upstream named them (never shown to
    /// clients).
    pub upstream: Option<UpstreamRef>,
    /// How the current turn is being dispatched upstream (for a takeover).
    pub dispatch: DispatchMarks,
    /// [`NewTask::upstream_key`], kept for a takeover and the task's later turns.
    pub upstream_key: Option<String>,
}

/// What a replica records about dispatching a task's turn to an upstream agent, so that the
/// replica taking the task over can tell a turn never sent (dispatch it) from one that was
/// being sent (its outcome upstream is unknown) and restore its place in the queue.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DispatchMarks {
    /// The priority of the turn that waited in the dispatch queue (0 = lowest).
    pub priority: Option<i16>,
    /// The last turn (1 = the task's first message) whose sending upstream began.
    pub sent_turn: Option<u32>,
    /// When it began, Unix milliseconds.
    pub sent_at_ms: Option<i64>,
    /// The task's fencing token: one more at every takeover claim ([`TaskStore::take_over`]).
    /// A turn carries the epoch it started under in its appends
    /// ([`TaskStore::append_fenced`]) and its [`DispatchMark::Sending`] mark; either is refused
    /// with [`StoreError::Fenced`] once the task was taken over.
    pub epoch: u64,
}

/// One fact for [`TaskStore::mark_dispatch`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DispatchMark {
    /// The current turn waits in the dispatch queue with this priority.
    Queued { priority: i16 },
    /// Turn `turn` is about to be sent upstream (recorded before the call), by a runner that
    /// started under `epoch` (refused with [`StoreError::Fenced`] if the task's epoch moved).
    Sending { turn: u32, epoch: u64 },
}

/// An upstream agent's task and context ids, stored beside the gateway's own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpstreamRef {
    pub task_id: String,
    pub context_id: String,
}

/// A running task whose dispatching replica is gone, claimed by [`TaskStore::take_over`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Orphan {
    pub owner: String,
    pub task_id: String,
    /// The task's epoch after this claim: the fencing token of the turn resumed from it.
    pub epoch: u64,
}

/// What [`TaskStore::create`] needs: the task as created (id, context id, status, history).
#[derive(Debug, Clone)]
pub struct NewTask {
    pub owner: String,
    pub agent: String,
    pub task: Task,
    /// What the task's upstream `Idempotency-Key`s derive from, when it is not the task id: a
    /// keyed send's (owner, key) digest, so a retry that mints a new task id after its key was
    /// freed or reclaimed reaches the upstream under the same key (review M7).
    pub upstream_key: Option<String>,
    /// A push config registered by the send that creates the task (SendMessage's
    /// `configuration.taskPushNotificationConfig`): stored in the same atomic step as the task,
    /// with its delivery progress starting before the task as created (the webhook gets every
    /// event), or refused with the task (neither is stored) past its quota. Written apart, a
    /// process gone between the two writes would leave a task that runs on without its config.
    pub push: Option<InlinePush>,
}

/// A push config stored with the task it belongs to (see [`NewTask::push`]): what
/// [`TaskStore::put_push_config`] takes, the config's `task_id` being the new task's.
#[derive(Debug, Clone)]
pub struct InlinePush {
    pub config: TaskPushNotificationConfig,
    pub dialect: Dialect,
    pub quota: PushQuota,
}

/// One entry of a task's event log.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredEvent {
    pub task_id: String,
    pub seq: u64,
    /// Shared, not copied: the in-memory log, the writer's answer and the bus's fan-out all
    /// hold the same event (a deep copy of an event with a task or artifact in it is dozens of
    /// allocations).
    pub event: Arc<StreamResponse>,
    /// Whether the task has push configs, as the write that committed this event saw it: only
    /// such events go to the push worker (issue 27, item 3). `true` where it is not known (an
    /// event read back from the log), so that nothing is kept from the worker by a guess.
    pub push: bool,
}

/// One atomic change to a task: an optional client message recorded with
/// [`a2a_types::state::add_user_message`], then an event applied with
/// [`a2a_types::state::apply_event`] and appended to the event log.
#[derive(Debug, Clone)]
pub struct TaskChange {
    pub user_message: Option<Message>,
    pub event: StreamResponse,
}

/// Applies `changes` to `task` in order, as both stores do, numbering their events from
/// `first_seq`. A change to a terminal task is refused, so a batch cannot move past its end.
pub(crate) fn apply_changes(
    task: &mut Task,
    first_seq: u64,
    changes: Vec<TaskChange>,
) -> StoreResult<Vec<StoredEvent>> {
    use a2a_types::state::{add_user_message, apply_event, is_terminal, state_of};
    changes
        .into_iter()
        .zip(first_seq..)
        .map(|(change, seq)| {
            if is_terminal(state_of(task)) {
                return Err(StoreError::Terminal(task.id.clone()));
            }
            if let Some(m) = change.user_message {
                add_user_message(task, m);
            }
            apply_event(task, &change.event);
            Ok(StoredEvent {
                task_id: task.id.clone(),
                seq,
                event: Arc::new(change.event),
                push: true,
            })
        })
        .collect()
}

/// The first event of every task: the task as created.
pub(crate) fn created_event(task: &Task) -> StoredEvent {
    StoredEvent {
        task_id: task.id.clone(),
        seq: 1,
        event: Arc::new(StreamResponse {
            payload: Some(a2a_types::v1::stream_response::Payload::Task(task.clone())),
        }),
        push: true,
    }
}

/// Whether the commit whose first event is `first` (as the write returned it) has an
/// outbox row in a store with an outbox ([`TaskStore::has_outbox`]): every commit but the one
/// that creates a task without push configs. That commit has nobody to announce it to: no
/// process but the writer's can follow a task before the answer that names it (the Redis bus
/// keeps such a commit out of the task's stream), the push worker has no config to deliver it
/// to, and whoever follows the task later starts from its snapshot. Skipping its row and its
/// publish is most of what a persisted one-turn send costs beyond the task's own rows (issue
/// 27: the persisted send rate).
pub fn outboxed(first: &StoredEvent) -> bool {
    first.seq > 1 || first.push
}

/// Marks what the write of `events` knew: whether their task has push configs.
pub(crate) fn with_push(mut events: Vec<StoredEvent>, push: bool) -> Vec<StoredEvent> {
    for e in &mut events {
        e.push = push;
    }
    events
}

/// A task waiting for input (INPUT_REQUIRED or AUTH_REQUIRED), as
/// [`TaskStore::interrupted_before`] finds it: what expiring it needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Interrupted {
    pub task_id: String,
    pub context_id: String,
    /// The sequence number its expiry must be appended after (the guard of the append).
    pub seq: u64,
}

/// What one owner holds in the store (see [`TaskStore::usage`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OwnerUsage {
    /// Tasks that are not terminal (running or interrupted), counted up to the limit asked.
    pub open_tasks: u64,
    /// Bytes of the messages and artifacts of all the owner's stored tasks ([`stored_bytes`]).
    pub bytes: u64,
}

/// The bytes a task's messages and artifacts take, as both stores count them against the
/// owner's cap: the protobuf encoded length of each history message, the status message and
/// each artifact.
pub fn stored_bytes(task: &Task) -> u64 {
    use prost::Message as _;
    let history: usize = task.history.iter().map(|m| m.encoded_len()).sum();
    let artifacts: usize = task.artifacts.iter().map(|a| a.encoded_len()).sum();
    let status = task
        .status
        .as_ref()
        .and_then(|s| s.message.as_ref())
        .map_or(0, |m| m.encoded_len());
    (history + artifacts + status) as u64
}

/// Filters and paging of ListTasks, already validated by the service.
#[derive(Debug, Clone, Default)]
pub struct ListQuery {
    pub context_id: Option<String>,
    pub status: Option<TaskState>,
    /// Only tasks whose status timestamp is at or after this instant.
    pub status_after: Option<Timestamp>,
    pub page_size: usize,
    pub cursor: Option<Cursor>,
    pub history_length: Option<usize>,
    pub include_artifacts: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct TaskPage {
    pub tasks: Vec<Task>,
    /// Cursor of the next page; `None` on the last page.
    pub next: Option<Cursor>,
    /// Number of matching tasks before paging.
    pub total_size: u64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct PushConfigPage {
    pub configs: Vec<TaskPushNotificationConfig>,
    /// Opaque token of the next page; empty on the last page.
    pub next_page_token: String,
}

/// A push config as delivery sees it: with the dialect it was registered in, which decides the
/// payload its webhook gets (1.0: the StreamResponse of each event; 0.3: the Task after it).
#[derive(Debug, Clone, PartialEq)]
pub struct Webhook {
    pub config: TaskPushNotificationConfig,
    pub dialect: Dialect,
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum StoreError {
    #[error("task {0} not found")]
    NotFound(String),
    /// Another writer appended first: the caller reloads and decides again.
    #[error("task {task_id} changed concurrently (expected sequence {expected}, found {actual})")]
    Conflict {
        task_id: String,
        expected: u64,
        actual: u64,
    },
    /// Terminal tasks are immutable.
    #[error("task {0} is in a terminal state")]
    Terminal(String),
    #[error("task {0} already exists")]
    Duplicate(String),
    /// The task was taken over by another replica since this turn started (its epoch moved):
    /// the write is refused and the turn must stop here.
    #[error("task {0} was taken over by another replica (stale dispatch epoch)")]
    Fenced(String),
    #[error("invalid page token")]
    InvalidPageToken,
    #[error("store unavailable: {0}")]
    Unavailable(String),
    #[error("store error: {0}")]
    Internal(String),
    /// A [`PushQuota`] bound: `quota` names it (`push_configs_per_task`,
    /// `push_configs_per_owner`).
    #[error("quota {quota} exceeded: the limit is {limit}")]
    QuotaExceeded { quota: &'static str, limit: u64 },
}

/// Bounds on the push configs a new one may join, checked atomically with its creation (so
/// they hold across replicas); replacing a config (same task and id) is never refused.
/// 0 = no bound.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PushQuota {
    /// Configs of one task.
    pub per_task: u64,
    /// Configs of all of one owner's tasks.
    pub per_owner: u64,
}

impl PushQuota {
    /// No bound at all.
    pub const NONE: Self = Self {
        per_task: 0,
        per_owner: 0,
    };

    /// The bound a new config would pass, given how many the task and the owner hold.
    pub fn exceeded(&self, on_task: u64, of_owner: u64) -> Option<StoreError> {
        if self.per_task > 0 && on_task >= self.per_task {
            return Some(StoreError::QuotaExceeded {
                quota: "push_configs_per_task",
                limit: self.per_task,
            });
        }
        if self.per_owner > 0 && of_owner >= self.per_owner {
            return Some(StoreError::QuotaExceeded {
                quota: "push_configs_per_owner",
                limit: self.per_owner,
            });
        }
        None
    }
}

pub type StoreResult<T> = Result<T, StoreError>;

#[async_trait]
pub trait TaskStore: Send + Sync + 'static {
    /// Stores a new task and its first event (the task itself, sequence 1).
    async fn create(&self, new: NewTask) -> StoreResult<StoredEvent> {
        let (mut events, _) = self.create_with(new, Vec::new()).await?;
        Ok(events.remove(0))
    }

    /// Stores a new task (sequence 1) and applies `changes` after it, as one atomic step:
    /// returns every event (sequences 1..=1 + changes) and the snapshot after the last. A burst
    /// of events an agent produced together costs one write instead of one each. The task's
    /// [`NewTask::push`] config is part of the same step: a config past its quota refuses the
    /// whole create ([`StoreError::QuotaExceeded`], nothing stored). An existing id is refused
    /// with [`StoreError::Duplicate`], whatever it holds.
    async fn create_with(
        &self,
        new: NewTask,
        changes: Vec<TaskChange>,
    ) -> StoreResult<(Vec<StoredEvent>, Task)>;

    /// Applies `change` if the task's last sequence number is still `expected_seq`; returns the
    /// appended event (sequence `expected_seq + 1`) and the snapshot after the change.
    async fn append(
        &self,
        task_id: &str,
        expected_seq: u64,
        change: TaskChange,
    ) -> StoreResult<(StoredEvent, Task)> {
        let (mut events, task) = self.append_all(task_id, expected_seq, vec![change]).await?;
        Ok((events.remove(0), task))
    }

    /// Applies `changes` (at least one) in order, as one atomic step guarded like
    /// [`TaskStore::append`]: none is applied unless all are. No change may follow one that
    /// makes the task terminal.
    async fn append_all(
        &self,
        task_id: &str,
        expected_seq: u64,
        changes: Vec<TaskChange>,
    ) -> StoreResult<(Vec<StoredEvent>, Task)> {
        self.append_fenced(task_id, expected_seq, None, changes)
            .await
    }

    /// [`TaskStore::append_all`], also guarded by the task's fencing token when `epoch` is
    /// given: refused with [`StoreError::Fenced`] unless the task's epoch is still `epoch`
    /// (checked inside the same statement). The runner of a turn passes the epoch it started
    /// under; writers that are not a turn (cancel, expiry) pass `None`.
    async fn append_fenced(
        &self,
        task_id: &str,
        expected_seq: u64,
        epoch: Option<u64>,
        changes: Vec<TaskChange>,
    ) -> StoreResult<(Vec<StoredEvent>, Task)>;

    /// The task of `owner`, with at most `history_length` most recent history messages.
    async fn get(
        &self,
        owner: &str,
        task_id: &str,
        history_length: Option<usize>,
    ) -> StoreResult<Option<TaskRecord>>;

    /// `owner`'s tasks, newest status first, ties broken by descending id.
    async fn list(&self, owner: &str, query: &ListQuery) -> StoreResult<TaskPage>;

    /// The events of `owner`'s task with a sequence number above `after_seq`, in order.
    async fn events_after(
        &self,
        owner: &str,
        task_id: &str,
        after_seq: u64,
    ) -> StoreResult<Vec<StoredEvent>>;

    /// The sequence number of the last event of each of `task_ids` that exists, whoever owns
    /// it: one read for many followers' safety net (a follower re-reads its log only when the
    /// log has moved past what it has).
    async fn last_seqs(&self, task_ids: &[String]) -> StoreResult<Vec<(String, u64)>>;

    /// Creates or replaces (same task and id) a push config of `owner`'s task, registered in
    /// `dialect` (its webhook gets payloads in that dialect); a new one is refused past `quota`
    /// (checked atomically with the insert, across processes).
    async fn put_push_config(
        &self,
        owner: &str,
        config: TaskPushNotificationConfig,
        dialect: Dialect,
        quota: PushQuota,
    ) -> StoreResult<TaskPushNotificationConfig>;

    async fn get_push_config(
        &self,
        owner: &str,
        task_id: &str,
        id: &str,
    ) -> StoreResult<Option<TaskPushNotificationConfig>>;

    /// Configs in creation order; `page_token` is the one a previous page returned.
    async fn list_push_configs(
        &self,
        owner: &str,
        task_id: &str,
        page_size: usize,
        page_token: &str,
    ) -> StoreResult<PushConfigPage>;

    /// Idempotent: deleting a missing config id succeeds. Errors if the task is not `owner`'s.
    async fn delete_push_config(&self, owner: &str, task_id: &str, id: &str) -> StoreResult<()>;

    /// Records the upstream agent's ids of a task. Ids are named in answer to a send, so the
    /// task's first turn counts as sent from then on (`DispatchMarks::sent_turn` at least 1).
    async fn set_upstream(&self, task_id: &str, upstream: UpstreamRef) -> StoreResult<()>;

    /// Records a dispatch fact of the task's current turn (see [`DispatchMarks`]).
    async fn mark_dispatch(&self, task_id: &str, mark: DispatchMark) -> StoreResult<()>;

    /// Claims an idempotency key for `req.task_id` unless an unexpired claim holds it: the
    /// first claim wins, every later one learns what the holder recorded.
    async fn claim_key(&self, req: &KeyRequest) -> StoreResult<KeyClaim>;

    /// Takes over a key whose holder was `abandoned` (see [`HeldKey::abandoned`]) if it still
    /// names `stale_task_id`; false when another request got there first.
    async fn reclaim_key(&self, req: &KeyRequest, stale_task_id: &str) -> StoreResult<bool>;

    /// Frees a key whose request reached no task (it was refused, answered by a message, or
    /// cut off), if it still names `task_id`, so that a retry dispatches again.
    async fn release_key(&self, owner: &str, key: &str, task_id: &str) -> StoreResult<()>;

    /// Deletes at most `limit` expired keys; returns how many it deleted. Several processes
    /// may call it at once: with PostgreSQL one of them sweeps at a time, the others get 0.
    async fn purge_expired_keys(&self, limit: usize) -> StoreResult<u64>;

    /// Retention: deletes at most `limit` terminal tasks that became terminal before `before`,
    /// oldest first, with everything kept for them (events, history, artifacts, push configs,
    /// push delivery progress, dispatch marks, idempotency keys naming them); returns how many.
    /// Non-terminal tasks are never deleted. Several processes may call it at once: with
    /// PostgreSQL one of them deletes at a time, the others get 0.
    async fn purge_tasks(&self, before: std::time::SystemTime, limit: usize) -> StoreResult<u64>;

    /// Deletes the dispatch leases that expired more than `grace` ago: replicas gone for good.
    /// A store that only one process uses (in memory) keeps no leases.
    async fn purge_stale_leases(&self, _grace: std::time::Duration) -> StoreResult<u64> {
        Ok(0)
    }

    /// Renews the dispatch lease of `replica` for `lease`, then claims for it at most `limit`
    /// running tasks (SUBMITTED or WORKING) whose dispatcher's lease has expired. A store that
    /// only one process uses (in memory) has no other replica to take over from.
    async fn take_over(
        &self,
        _replica: &str,
        _lease: std::time::Duration,
        _limit: usize,
    ) -> StoreResult<Vec<Orphan>> {
        Ok(Vec::new())
    }

    /// At most `limit` interrupted tasks (INPUT_REQUIRED, AUTH_REQUIRED) of any owner whose
    /// status is older than `before` (by its timestamp), oldest first: what the expiry sweep
    /// moves to a terminal state, each with an append guarded by its sequence number (so a
    /// task that moved meanwhile, or that another replica expired first, is left alone).
    async fn interrupted_before(
        &self,
        before: std::time::SystemTime,
        limit: usize,
    ) -> StoreResult<Vec<Interrupted>>;

    /// What `owner` holds: its tasks that are not terminal, counted up to `count_up_to` (a
    /// count that reaches it stops there; 0 = no bound), and the bytes of its stored messages
    /// and artifacts.
    async fn usage(&self, owner: &str, count_up_to: u64) -> StoreResult<OwnerUsage>;

    /// Whether commits write an outbox (PostgreSQL): then every append, and every create of a
    /// task with push configs ([`outboxed`]), also records its events as still to be published,
    /// in the same transaction, until
    /// [`TaskStore::outbox_published`] deletes the record; what nobody deletes is relayed by
    /// [`TaskStore::relay_outbox`]. A store without one (in memory) lives and dies with the
    /// process that publishes its events, so it has nothing to recover.
    fn has_outbox(&self) -> bool {
        false
    }

    /// The commits `(task id, last sequence number)` whose events the bus acknowledged: their
    /// outbox rows are deleted, all in one statement. Unknown ones are ignored (another
    /// replica relayed and deleted them first).
    async fn outbox_published(&self, _commits: &[(String, u64)]) -> StoreResult<u64> {
        Ok(0)
    }

    /// The relay of commits left behind (by a replica that died between commit and publish, or
    /// while the bus was unreachable): claims at most `limit` outbox rows older than
    /// `older_than` that no other process has claimed, reads their events back (those larger
    /// than `inline_max` bytes are not read: `None`), hands them to `relay`, and deletes the
    /// rows it acknowledged, all in one transaction (the claim holds until it ends).
    async fn relay_outbox(
        &self,
        _older_than: std::time::Duration,
        _limit: usize,
        _inline_max: usize,
        _relay: &dyn OutboxRelay,
    ) -> StoreResult<RelayPass> {
        Ok(RelayPass::default())
    }

    /// How many rows the outbox holds (counted up to `count_up_to`) and how old its oldest is.
    async fn outbox_depth(&self, _count_up_to: u64) -> StoreResult<OutboxDepth> {
        Ok(OutboxDepth::default())
    }

    /// Whether the backing service answers and holds this binary's schema (used by `/readyz`):
    /// bounded, and not through the request pool (see `pg::health`).
    async fn ping(&self) -> StoreResult<()> {
        Ok(())
    }

    /// Connections of the pool behind the store, if it has one (the PostgreSQL pool metrics).
    fn pool_stats(&self) -> Option<PoolStats> {
        None
    }
}

/// The events of one commit that the store's outbox still holds (see
/// [`TaskStore::relay_outbox`]): a commit of `task_id` whose publish was never acknowledged.
#[derive(Debug, Clone, PartialEq)]
pub struct Unpublished {
    pub task_id: String,
    /// The last event of the commit (with `task_id`, what the outbox row is known by).
    pub seq: u64,
    /// The commit's events still in the log, in order: `None` for one larger than the inline
    /// limit the relay asked for (not read back: the relay announces it, and its readers read
    /// it from the log). Empty when the task is gone (retention deleted it).
    pub events: Vec<(u64, Option<Arc<StreamResponse>>)>,
}

/// Publishes what [`TaskStore::relay_outbox`] read back, for the store (which knows no bus).
#[async_trait]
pub trait OutboxRelay: Send + Sync {
    /// Publishes each commit's events, in order; answers, per commit, whether the bus
    /// acknowledged all of them (only those rows are deleted).
    async fn relay(&self, commits: &[Unpublished]) -> Vec<bool>;
}

/// What one [`TaskStore::relay_outbox`] pass did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RelayPass {
    /// Outbox rows claimed (old enough and not claimed by another process).
    pub claimed: u64,
    /// Rows relayed and deleted.
    pub relayed: u64,
}

/// How much the outbox holds (see [`TaskStore::outbox_depth`]).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct OutboxDepth {
    /// Rows, counted up to the bound asked.
    pub rows: u64,
    /// Age of the oldest row, seconds (0 when empty).
    pub oldest_secs: f64,
}

/// A connection pool's state at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolStats {
    /// Connections lent out to a query or transaction.
    pub in_use: u32,
    /// Open connections waiting to be lent.
    pub idle: u32,
}
