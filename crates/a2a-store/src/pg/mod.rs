//! The PostgreSQL task ledger (schema in `migrations/`, embedded here).
//!
//! *Invariant*: a task's snapshot, history, artifacts and event log change together (one event
//! or several), in one
//! statement (one implicit transaction) guarded by the sequence number: `UPDATE tasks ... WHERE
//! seq = expected` plus the inserts that join on its `RETURNING` rows, so a stale writer changes
//! nothing, and a crash leaves either all or none of an event.
//!
//! What an event does to a snapshot is decided in Rust by `a2a_types::state` (as in the in-memory
//! store); SQL only stores the difference (`codec::Plan`).
//!
//! Round trips, per operation (statements; sqlx adds a `Sync` health check when a read takes a
//! pooled connection and when it gives it back, writes use held connections and skip them):
//! - `create_with`, `append_all` (and `create`, `append`, their one-event forms): 1 statement
//!   for the task and all its new events, shared with every other create and append queued at
//!   that moment (`write`: group commit); `append_all` adds 1 read when this process has not got the
//!   snapshot at `expected_seq` in its cache (another process wrote last, or after a restart),
//!   and 1 read to tell Conflict/NotFound/Terminal apart when the guard refused the write. A
//!   create with an inline push config (`NewTask::push`) is a transaction of its own instead:
//!   the same create statement, the config's quota (owner lock and count) and the config's row
//!   with its delivery progress (`push.rs`), 3-5 statements.
//! - `get`, `list` (page and exact total together), `events_after`, each push-config operation:
//!   1 statement.
//! - `set_upstream`, `mark_dispatch`, `reclaim_key`, `release_key`, `purge_expired_keys`,
//!   `purge_tasks` (up to its limit of tasks with all their rows), `purge_stale_leases`:
//!   1 statement; `claim_key`: a share of one batched statement (`claims.rs`); `take_over`: 2.
//! - outbox (`outbox.rs`): every create and append writes its row inside its own statement
//!   (no round trip of its own); `outbox_published`: no statement of its own while writes go
//!   on (its delete rides on the next batch statement, `write::Writer::forget`), else, after
//!   100 ms, 1 statement for every commit acknowledged since the last one, on a connection of
//!   its own without synchronous commit (a delete lost in a crash only publishes its commit
//!   again); `relay_outbox`: a transaction of 2-3 statements per pass;
//!   `outbox_depth`: 1.
//! - `ping`: 1 statement on the dedicated health connection (`health.rs`), bounded; until the
//!   schema matched once, the read of `_sqlx_migrations` instead.

mod batch;
mod claims;
mod codec;
mod delivery;
mod dispatch;
pub mod health;
mod keys;
mod outbox;
mod push;
mod read;
mod retention;
mod write;

use std::collections::HashMap;
use std::str::FromStr;
use std::sync::Mutex;
use std::time::Duration;

use a2a_types::state::{is_terminal, state_of};
use a2a_types::v1::{Task, TaskPushNotificationConfig};
use async_trait::async_trait;
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};

use crate::{
    DispatchMark, Interrupted, KeyClaim, KeyRequest, ListQuery, NewTask, Orphan, OwnerUsage,
    PushConfigPage, PushQuota, StoreError, StoreResult, StoredEvent, TaskChange, TaskPage,
    TaskRecord, TaskStore, UpstreamRef, apply_changes, created_event, with_push,
};
use batch::{AppendJob, CreateJob};
use claims::Claimer;
use codec::{Plan, TaskRow};
use write::Writer;

pub use delivery::{
    Advanced, AttemptRecord, Behind, ClaimOutcome, DeadLetter, LoggedAttempt, NewDeadLetter,
    PgDeliveryStore, REDACTED, Release, is_redacted, redact,
};
pub use keys::{ApiKeyRecord, PgApiKeys};
pub use retention::TASK_SWEEP_LOCK;

/// The schema, embedded from `migrations/`.
pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../../migrations");

/// Snapshots kept in memory so that an append by the task's runner needs no read first.
const CACHE_CAPACITY: usize = 16_384;

/// Connection settings of [`PgTaskStore`].
#[derive(Debug, Clone)]
pub struct PgOptions {
    /// Connections in all (reads, and one held by each writer).
    pub pool_size: u32,
    /// How long an operation waits for a connection (including connecting) before it fails
    /// with [`StoreError::Unavailable`]: the fail-fast bound while PostgreSQL is down.
    pub acquire_timeout: Duration,
    /// Writer tasks, each committing batches of creates and appends on its own connection;
    /// 0 = 2 (at most half the pool). Two overlap one batch's commit with the next batch's
    /// execution; more only split the queue into smaller batches (measured: no gain on 2 cores).
    pub writers: usize,
    /// This process's replica id: the `a2a.replica` session setting of every connection, which
    /// makes the replica the dispatcher of the tasks it writes (see [`TaskStore::take_over`]).
    pub replica: Option<String>,
}

impl Default for PgOptions {
    fn default() -> Self {
        Self {
            pool_size: 16,
            acquire_timeout: Duration::from_secs(3),
            writers: 0,
            replica: None,
        }
    }
}

/// The [`TaskStore`] over PostgreSQL.
pub struct PgTaskStore {
    pool: PgPool,
    /// Idempotency-key claims, batched (see `claims.rs`).
    claimer: Claimer,
    writer: Writer,
    /// Task id → (sequence number, snapshot) as this process last wrote or read it. A hit is
    /// only used when its sequence number is the one the caller expects, and the write is
    /// guarded by that number, so a stale entry can cause a conflict but never a wrong snapshot.
    cache: Mutex<HashMap<String, (u64, Task)>>,
    /// `/readyz`: its own connection, bounded, with the schema gate (`health.rs`).
    health: health::Health,
    /// The dispatch lease's own connection (renewal and takeover claims): a request pool
    /// exhausted by load cannot make the lease lapse (review M4).
    leases: PgPool,
    /// The deletes of published outbox rows: one connection without synchronous commit
    /// (`outbox.rs`).
    outbox: PgPool,
}

/// Maps driver errors: a lost or unobtainable connection is `Unavailable` (the caller may retry
/// later), anything else `Internal`.
pub(crate) fn db_error(e: sqlx::Error) -> StoreError {
    use sqlx::Error as E;
    let unavailable = match &e {
        E::PoolTimedOut | E::PoolClosed | E::Io(_) | E::Tls(_) | E::WorkerCrashed => true,
        E::Protocol(_) => true,
        // 08: connection exception; 53: insufficient resources (too many connections);
        // 57: operator intervention (shutdown, cannot connect now, statement canceled).
        E::Database(db) => db
            .code()
            .is_some_and(|c| c.starts_with("08") || c.starts_with("53") || c.starts_with("57")),
        _ => false,
    };
    if unavailable {
        StoreError::Unavailable(e.to_string())
    } else {
        StoreError::Internal(e.to_string())
    }
}

impl PgTaskStore {
    /// A store whose connections open on first use (no I/O here), so the gateway starts and
    /// reports not-ready while PostgreSQL is down. Must be called inside a tokio runtime: the
    /// writer tasks start here. An unparsable URL is an error.
    pub fn connect_lazy(url: &str, options: &PgOptions) -> StoreResult<Self> {
        let connect = PgConnectOptions::from_str(url)
            .map_err(|e| StoreError::Internal(format!("invalid PostgreSQL URL: {e}")))?
            .application_name("a2a-gateway")
            // Every statement here is prepared once per connection and is a primary-key, keyset
            // or `unnest`-of-a-batch plan whatever the values, so: plan once (re-planning the
            // write statements cost as much as executing them), and never a sequential scan. A
            // plan made while a table was small (fresh database, no ANALYZE yet: some servers
            // run without autovacuum) would otherwise keep scanning it whole as it grows.
            .options([
                ("plan_cache_mode", "force_generic_plan"),
                ("enable_seqscan", "off"),
            ]);
        let connect = match &options.replica {
            Some(replica) => connect.options([("a2a.replica", replica.as_str())]),
            None => connect,
        };
        let pool_of = |size: u32, connect: PgConnectOptions| {
            PgPoolOptions::new()
                .max_connections(size)
                .acquire_timeout(options.acquire_timeout)
                // A pooled connection that died while idle (PostgreSQL restarted) is discarded
                // at acquire instead of failing the request that drew it.
                .test_before_acquire(true)
                .connect_lazy_with(connect)
        };
        // The claimer's own connections: see `claims.rs` for why they need no synchronous commit.
        let claims = pool_of(2, connect.clone().options([("synchronous_commit", "off")]));
        let leases = pool_of(1, connect.clone());
        // Deletes of published outbox rows need no flush of their own: one lost in a crash
        // only makes its commit be published again (at least once).
        let outbox = pool_of(1, connect.clone().options([("synchronous_commit", "off")]));
        let pool = pool_of(options.pool_size.max(2), connect);
        let writers = match options.writers {
            0 => 2.min(options.pool_size as usize / 2).max(1),
            n => n,
        };
        Ok(Self {
            writer: Writer::spawn(pool.clone(), writers),
            health: health::Health::of(&pool),
            pool,
            claimer: Claimer::spawn(claims),
            cache: Mutex::new(HashMap::new()),
            leases,
            outbox,
        })
    }

    /// Applies the embedded migrations (idempotent; concurrent callers serialise on an
    /// advisory lock).
    pub async fn migrate(&self) -> StoreResult<()> {
        MIGRATOR
            .run(&self.pool)
            .await
            .map_err(|e| StoreError::Internal(format!("migration failed: {e}")))
    }

    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// The API keys kept in the same database.
    pub fn api_keys(&self) -> PgApiKeys {
        PgApiKeys::new(self.pool.clone())
    }

    fn cache_take(&self, task_id: &str, seq: u64) -> Option<Task> {
        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        match cache.remove(task_id) {
            Some((s, task)) if s == seq => Some(task),
            _ => None,
        }
    }

    fn cache_put(&self, task_id: &str, seq: u64, task: &Task) {
        if is_terminal(state_of(task)) {
            return; // terminal tasks take no more appends
        }
        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        if cache.len() >= CACHE_CAPACITY
            && let Some(victim) = cache.keys().next().cloned()
        {
            cache.remove(&victim);
        }
        cache.insert(task_id.to_owned(), (seq, task.clone()));
    }

    /// Why the guarded update changed nothing.
    async fn refused(&self, task_id: &str, expected: u64, epoch: Option<u64>) -> StoreError {
        match read::seq_and_state(&self.pool, task_id).await {
            Err(e) => e,
            Ok(None) => StoreError::NotFound(task_id.to_owned()),
            Ok(Some((_, _, actual))) if epoch.is_some_and(|e| e != actual) => {
                StoreError::Fenced(task_id.to_owned())
            }
            Ok(Some((actual, _, _))) if actual != expected => StoreError::Conflict {
                task_id: task_id.to_owned(),
                expected,
                actual,
            },
            Ok(Some((_, state, _))) if is_terminal(state) => {
                StoreError::Terminal(task_id.to_owned())
            }
            Ok(Some(_)) => StoreError::Internal(format!(
                "the guarded update of task {task_id} at sequence {expected} changed nothing"
            )),
        }
    }
}

fn to_i64(seq: u64) -> i64 {
    i64::try_from(seq).unwrap_or(i64::MAX)
}

#[async_trait]
impl TaskStore for PgTaskStore {
    async fn create_with(
        &self,
        new: NewTask,
        changes: Vec<TaskChange>,
    ) -> StoreResult<(Vec<StoredEvent>, Task)> {
        let mut task = new.task;
        let mut events = vec![created_event(&task)];
        events.extend(apply_changes(&mut task, 2, changes)?);
        let job = CreateJob {
            id: task.id.clone(),
            owner: new.owner,
            agent: new.agent,
            context_id: task.context_id.clone(),
            upstream_key: new.upstream_key,
            row: TaskRow::of(&task),
            events: events
                .iter()
                .map(|e| codec::encode(e.event.as_ref()))
                .collect(),
            plan: Plan::diff(&Task::default(), &task),
            push: new.push.is_some(),
        };
        // A task with an inline push config takes a transaction of its own instead of the
        // group commit: the config's quota is checked, and its rows written, inside it.
        let push = job.push;
        let created = match new.push {
            None => self.writer.create(job).await?,
            Some(push) => push::create_with(&self.pool, &job, push).await?,
        };
        if !created {
            return Err(StoreError::Duplicate(task.id));
        }
        self.cache_put(&task.id, events.len() as u64, &task);
        Ok((with_push(events, push), task))
    }

    async fn append_fenced(
        &self,
        task_id: &str,
        expected_seq: u64,
        epoch: Option<u64>,
        changes: Vec<TaskChange>,
    ) -> StoreResult<(Vec<StoredEvent>, Task)> {
        if changes.is_empty() {
            return Err(StoreError::Internal("an append without changes".into()));
        }
        let old = match self.cache_take(task_id, expected_seq) {
            Some(task) => task,
            None => match read::load(&self.pool, task_id, None, None).await? {
                None => return Err(StoreError::NotFound(task_id.to_owned())),
                Some(rec) if epoch.is_some_and(|e| e != rec.dispatch.epoch) => {
                    return Err(StoreError::Fenced(task_id.to_owned()));
                }
                Some(rec) if rec.seq != expected_seq => {
                    return Err(StoreError::Conflict {
                        task_id: task_id.to_owned(),
                        expected: expected_seq,
                        actual: rec.seq,
                    });
                }
                Some(rec) => rec.task,
            },
        };
        let mut new = old.clone();
        let events = apply_changes(&mut new, expected_seq + 1, changes)?;
        let row = TaskRow::of(&new);
        let old_bytes = i64::try_from(crate::stored_bytes(&old)).unwrap_or(i64::MAX);
        let job = AppendJob {
            task_id: task_id.to_owned(),
            expected: to_i64(expected_seq),
            epoch: epoch.map(to_i64),
            delta: row.bytes.saturating_sub(old_bytes),
            row,
            events: events
                .iter()
                .map(|e| codec::encode(e.event.as_ref()))
                .collect(),
            plan: Plan::diff(&old, &new),
        };
        let Some((seq, push)) = self.writer.append(job).await? else {
            return Err(self.refused(task_id, expected_seq, epoch).await);
        };
        self.cache_put(task_id, seq, &new);
        Ok((with_push(events, push), new))
    }

    async fn get(
        &self,
        owner: &str,
        task_id: &str,
        history_length: Option<usize>,
    ) -> StoreResult<Option<TaskRecord>> {
        read::load(&self.pool, task_id, Some(owner), history_length).await
    }

    async fn list(&self, owner: &str, query: &ListQuery) -> StoreResult<TaskPage> {
        read::list(&self.pool, owner, query).await
    }

    async fn last_seqs(&self, task_ids: &[String]) -> StoreResult<Vec<(String, u64)>> {
        read::last_seqs(&self.pool, task_ids).await
    }

    async fn events_after(
        &self,
        owner: &str,
        task_id: &str,
        after_seq: u64,
    ) -> StoreResult<Vec<StoredEvent>> {
        read::events_after(&self.pool, owner, task_id, to_i64(after_seq)).await
    }

    async fn put_push_config(
        &self,
        owner: &str,
        config: TaskPushNotificationConfig,
        dialect: a2a_types::Dialect,
        quota: PushQuota,
    ) -> StoreResult<TaskPushNotificationConfig> {
        push::put(&self.pool, owner, config, dialect, quota).await
    }

    async fn get_push_config(
        &self,
        owner: &str,
        task_id: &str,
        id: &str,
    ) -> StoreResult<Option<TaskPushNotificationConfig>> {
        push::get(&self.pool, owner, task_id, id).await
    }

    async fn list_push_configs(
        &self,
        owner: &str,
        task_id: &str,
        page_size: usize,
        page_token: &str,
    ) -> StoreResult<PushConfigPage> {
        push::list(&self.pool, owner, task_id, page_size, page_token).await
    }

    async fn delete_push_config(&self, owner: &str, task_id: &str, id: &str) -> StoreResult<()> {
        push::delete(&self.pool, owner, task_id, id).await
    }

    async fn set_upstream(&self, task_id: &str, upstream: UpstreamRef) -> StoreResult<()> {
        dispatch::set_upstream(&self.pool, task_id, &upstream).await
    }

    async fn mark_dispatch(&self, task_id: &str, mark: DispatchMark) -> StoreResult<()> {
        dispatch::mark(&self.pool, task_id, mark).await
    }

    async fn claim_key(&self, req: &KeyRequest) -> StoreResult<KeyClaim> {
        self.claimer.claim(req).await
    }

    async fn reclaim_key(&self, req: &KeyRequest, stale_task_id: &str) -> StoreResult<bool> {
        dispatch::reclaim_key(&self.pool, req, stale_task_id).await
    }

    async fn release_key(&self, owner: &str, key: &str, task_id: &str) -> StoreResult<()> {
        dispatch::release_key(&self.pool, owner, key, task_id).await
    }

    async fn purge_expired_keys(&self, limit: usize) -> StoreResult<u64> {
        dispatch::purge_expired_keys(&self.pool, limit).await
    }

    async fn purge_tasks(&self, before: std::time::SystemTime, limit: usize) -> StoreResult<u64> {
        retention::purge_tasks(&self.pool, before, limit).await
    }

    async fn interrupted_before(
        &self,
        before: std::time::SystemTime,
        limit: usize,
    ) -> StoreResult<Vec<Interrupted>> {
        retention::interrupted_before(&self.pool, before, limit).await
    }

    async fn usage(&self, owner: &str, count_up_to: u64) -> StoreResult<OwnerUsage> {
        read::usage(&self.pool, owner, count_up_to).await
    }

    async fn purge_stale_leases(&self, grace: Duration) -> StoreResult<u64> {
        // The same sweep keeps `owner_bytes` to about a row per owner and live writer.
        retention::fold_owner_bytes(&self.pool).await?;
        retention::purge_stale_leases(&self.pool, grace).await
    }

    async fn take_over(
        &self,
        replica: &str,
        lease: Duration,
        limit: usize,
    ) -> StoreResult<Vec<Orphan>> {
        dispatch::take_over(&self.leases, replica, lease, limit).await
    }

    async fn ping(&self) -> StoreResult<()> {
        self.health.check().await
    }

    fn has_outbox(&self) -> bool {
        true
    }

    async fn outbox_published(&self, commits: &[(String, u64)]) -> StoreResult<u64> {
        self.writer.forget(&self.outbox, commits).await
    }

    async fn relay_outbox(
        &self,
        older_than: Duration,
        limit: usize,
        inline_max: usize,
        relay: &dyn crate::OutboxRelay,
    ) -> StoreResult<crate::RelayPass> {
        outbox::relay(&self.pool, older_than, limit, inline_max, relay).await
    }

    async fn outbox_depth(&self, count_up_to: u64) -> StoreResult<crate::OutboxDepth> {
        outbox::depth(&self.pool, count_up_to).await
    }

    fn pool_stats(&self) -> Option<crate::PoolStats> {
        let idle = u32::try_from(self.pool.num_idle()).unwrap_or(u32::MAX);
        Some(crate::PoolStats {
            in_use: self.pool.size().saturating_sub(idle),
            idle,
        })
    }
}
