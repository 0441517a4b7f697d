//! What the push worker (`a2a-worker`) reads and writes: a task's push configs and events
//! regardless of owner, the per-task delivery progress and lease, the delivery log and the dead
//! letters (schema in `migrations/0003_push_delivery.sql`).
//!
//! *Boundary*: not owner-scoped. Only the worker uses this; no binding ever does.
//!
//! Round trips per batch of one task's events: [`PgDeliveryStore::claim`] (lease, progress and
//! configs in one statement) and [`PgDeliveryStore::advance`]; the delivery log is written in
//! batches of many attempts ([`PgDeliveryStore::log`]) and pruned by age
//! ([`PgDeliveryStore::prune_log`]); dead letters go with their task's retention, at most a
//! configured number per owner, their configs redacted. [`PgDeliveryStore::sweep`] finds the
//! tasks whose delivery is behind their event log (migration 0012).

use std::str::FromStr;
use std::time::Duration;

use a2a_types::Dialect;
use a2a_types::v1::{StreamResponse, TaskPushNotificationConfig};
use sqlx::Row;
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};

use super::codec::{decode, encode};
use super::db_error;
use crate::{StoreError, StoreResult, Webhook};

/// The worker's view of the database.
#[derive(Clone)]
pub struct PgDeliveryStore {
    pool: PgPool,
}

/// What [`PgDeliveryStore::claim`] found.
#[derive(Debug, Clone, PartialEq)]
pub enum ClaimOutcome {
    /// The task has no push configs: nothing to deliver.
    NoConfigs,
    /// Another worker holds the task's lease.
    Held,
    /// The task is gone (retention deleted it, or it never existed): an explicit outcome, so
    /// that the pipeline counts what it cannot deliver instead of skipping it silently.
    Vanished,
    /// This worker holds the lease: deliver events after `delivered_seq` to `configs`; the
    /// task's owner is whose share of the delivery slots they take.
    Claimed {
        delivered_seq: u64,
        configs: Vec<Webhook>,
        owner: String,
    },
}

/// Whether [`PgDeliveryStore::advance`] frees the task's lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Release {
    /// Keep it: the holder has more queued.
    Keep,
    /// Free it, unless the task's event log goes on past the progress: another worker that
    /// found the lease held acknowledged the entries of those events and left them to the
    /// holder (a [`ClaimOutcome::Held`] is never asked again), so the holder goes on from the
    /// log instead.
    IfDone,
    /// Free it whatever is left: the rest waits in the ledger for the sweep (an owner over its
    /// share of the delivery slots).
    Anyway,
}

/// What [`PgDeliveryStore::advance`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Advanced {
    /// The progress is recorded, and the lease freed if that was asked.
    Recorded,
    /// The progress is recorded but the lease kept ([`Release::IfDone`]): the task's log goes
    /// on to this sequence number, which the holder delivers next.
    Behind(u64),
    /// The worker no longer held the lease (it ran out, another worker took over).
    Lost,
}

/// A task whose delivery is behind its event log, found by [`PgDeliveryStore::sweep`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Behind {
    pub task_id: String,
    /// The task's last sequence number (`tasks.seq`).
    pub seq: u64,
}

/// What a redacted secret of a dead letter's config is replaced with.
pub const REDACTED: &str = "[redacted]";

/// `config` without its secrets (`authentication.credentials`, `token`): what a dead letter
/// keeps. A replay takes the secrets from the live config, if it still exists.
pub fn redact(config: &TaskPushNotificationConfig) -> TaskPushNotificationConfig {
    let mut config = config.clone();
    if let Some(auth) = config.authentication.as_mut()
        && !auth.credentials.is_empty()
    {
        auth.credentials = REDACTED.to_owned();
    }
    if !config.token.is_empty() {
        config.token = REDACTED.to_owned();
    }
    config
}

/// Whether [`redact`] removed a secret from `config`.
pub fn is_redacted(config: &TaskPushNotificationConfig) -> bool {
    config.token == REDACTED
        || config
            .authentication
            .as_ref()
            .is_some_and(|a| a.credentials == REDACTED)
}

/// One delivery attempt, for the delivery log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttemptRecord {
    pub task_id: String,
    pub seq: u64,
    pub config_id: String,
    /// 1 = the first attempt.
    pub attempt: u32,
    /// `delivered`, `retry` or `dead_lettered`.
    pub outcome: &'static str,
    pub status: Option<u16>,
    pub error: Option<String>,
    pub latency: Duration,
}

/// A logged attempt as read back (tests, inspection).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoggedAttempt {
    pub seq: u64,
    pub config_id: String,
    pub attempt: u32,
    pub outcome: String,
    pub status: Option<u16>,
    pub error: Option<String>,
    pub worker: String,
}

/// A delivery that gave up, as it is recorded.
#[derive(Debug, Clone, PartialEq)]
pub struct NewDeadLetter {
    pub task_id: String,
    pub seq: u64,
    pub config: TaskPushNotificationConfig,
    pub event: StreamResponse,
    /// The dialect of the webhook: a replay sends that dialect's payload.
    pub dialect: Dialect,
    pub attempts: u32,
    pub last_error: String,
}

/// A stored dead letter.
#[derive(Debug, Clone, PartialEq)]
pub struct DeadLetter {
    pub id: i64,
    pub task_id: String,
    pub seq: u64,
    pub config: TaskPushNotificationConfig,
    pub event: StreamResponse,
    pub dialect: Dialect,
    pub attempts: u32,
    pub last_error: String,
    /// Unix milliseconds.
    pub created_ms: i64,
    pub replayed_ms: Option<i64>,
    pub replay_outcome: Option<String>,
}

/// The advisory lock key that serialises [`PgDeliveryStore::prune_log`]'s statements across
/// workers (`a2aprune` in ASCII).
const PRUNE_LOCK: i64 = 0x6132_6170_7275_6e65;

fn row_error(e: sqlx::Error) -> StoreError {
    StoreError::Internal(format!("push delivery: unexpected row shape: {e}"))
}

fn to_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn to_u64(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

impl PgDeliveryStore {
    /// A pool whose connections open on first use (no I/O here).
    pub fn connect_lazy(url: &str, pool_size: u32, acquire_timeout: Duration) -> StoreResult<Self> {
        let connect = PgConnectOptions::from_str(url)
            .map_err(|e| StoreError::Internal(format!("invalid PostgreSQL URL: {e}")))?
            .application_name("a2a-worker")
            .options([("plan_cache_mode", "force_generic_plan")]);
        let pool = PgPoolOptions::new()
            .max_connections(pool_size.max(2))
            .acquire_timeout(acquire_timeout)
            .test_before_acquire(true)
            .connect_lazy_with(connect);
        Ok(Self { pool })
    }

    pub fn from_pool(pool: PgPool) -> Self {
        Self { pool }
    }

    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// Applies the embedded migrations (idempotent).
    pub async fn migrate(&self) -> StoreResult<()> {
        super::MIGRATOR
            .run(&self.pool)
            .await
            .map_err(|e| StoreError::Internal(format!("migration failed: {e}")))
    }

    /// Takes (or renews) the task's lease for `worker` and returns its progress and push configs,
    /// in creation order. The progress row is created with the task's first push config (see
    /// `push::put`); for a task without one (configs stored before migration 0003) delivery
    /// starts at `first_seq`, the first event this worker handles.
    pub async fn claim(
        &self,
        task_id: &str,
        worker: &str,
        first_seq: u64,
        lease: Duration,
    ) -> StoreResult<ClaimOutcome> {
        const SQL: &str = "\
            WITH cfg AS ( \
                SELECT array_agg(config ORDER BY position) AS configs, \
                       array_agg(dialect ORDER BY position) AS dialects \
                  FROM push_configs WHERE task_id = $1), \
            claim AS ( \
                INSERT INTO push_progress AS p (task_id, delivered_seq, lease_owner, lease_until) \
                SELECT $1, $3, $2, clock_timestamp() + make_interval(secs => $4) \
                 WHERE EXISTS (SELECT 1 FROM cfg WHERE configs IS NOT NULL) \
                ON CONFLICT (task_id) DO UPDATE \
                   SET lease_owner = excluded.lease_owner, lease_until = excluded.lease_until, \
                       updated_at = now() \
                 WHERE p.lease_owner IS NULL OR p.lease_owner = excluded.lease_owner \
                    OR p.lease_until < clock_timestamp() \
                RETURNING p.delivered_seq) \
            SELECT (SELECT configs FROM cfg) AS configs, \
                   (SELECT dialects FROM cfg) AS dialects, \
                   (SELECT delivered_seq FROM claim) AS delivered_seq, \
                   (SELECT owner FROM tasks WHERE id = $1) AS owner";
        let row = sqlx::query(SQL)
            .bind(task_id)
            .bind(worker)
            .bind(to_i64(first_seq.saturating_sub(1)))
            .bind(lease.as_secs_f64())
            .fetch_one(&self.pool)
            .await
            .map_err(db_error)?;
        let configs: Option<Vec<Vec<u8>>> = row.try_get("configs").map_err(row_error)?;
        let delivered: Option<i64> = row.try_get("delivered_seq").map_err(row_error)?;
        let owner: Option<String> = row.try_get("owner").map_err(row_error)?;
        let Some(owner) = owner else {
            return Ok(ClaimOutcome::Vanished);
        };
        let Some(configs) = configs else {
            return Ok(ClaimOutcome::NoConfigs);
        };
        let Some(delivered) = delivered else {
            return Ok(ClaimOutcome::Held);
        };
        let dialects: Vec<String> = row.try_get("dialects").map_err(row_error)?;
        let configs = configs
            .iter()
            .zip(dialects)
            .map(|(c, d)| {
                Ok(Webhook {
                    config: decode(c, "push config")?,
                    dialect: Dialect::from_stored(&d),
                })
            })
            .collect::<StoreResult<Vec<_>>>()?;
        Ok(ClaimOutcome::Claimed {
            delivered_seq: to_u64(delivered),
            configs,
            owner,
        })
    }

    /// The reconciliation sweep's step: takes at most `limit` unsettled progress rows that no
    /// sweep looked at for `interval` and whose lease is free (or ran out), marks them looked
    /// at, and returns those behind their task's last event. Rows of a terminal task that is
    /// delivered to its end are settled (never looked at again); rows whose task is gone are
    /// deleted, and counted in the second value.
    ///
    /// Cheap when nothing is behind: a range scan of the partial index `push_progress_unsettled`
    /// (settled rows are not in it), bounded by `limit`. Safe with several workers: the rows
    /// are locked `SKIP LOCKED` and their `swept_at` moves, so each goes to one sweep per
    /// interval; delivery still takes the task's lease before it sends anything.
    pub async fn sweep(&self, limit: u32, interval: Duration) -> StoreResult<(Vec<Behind>, u64)> {
        // Every lookup is by primary key (`= ANY(ARRAY(...))` and correlated subqueries rather
        // than joins), so the generic plan the worker's connections use never turns into a hash
        // join over a whole table, however large `tasks` grows. The rows whose task exists are
        // marked; the others deleted: disjoint sets, so no row is changed twice.
        const SQL: &str = "\
            WITH picked AS MATERIALIZED ( \
                SELECT task_id FROM push_progress \
                 WHERE NOT settled AND swept_at < clock_timestamp() - make_interval(secs => $2) \
                   AND (lease_owner IS NULL OR lease_until < clock_timestamp()) \
                 ORDER BY swept_at LIMIT $1 \
                   FOR UPDATE SKIP LOCKED), \
            marked AS ( \
                UPDATE push_progress p \
                   SET swept_at = clock_timestamp(), \
                       settled = coalesce((SELECT t.state IN (3, 4, 5, 7) \
                                                  AND p.delivered_seq >= t.seq \
                                             FROM tasks t WHERE t.id = p.task_id), false) \
                 WHERE p.task_id = ANY (ARRAY(SELECT task_id FROM picked)) \
                   AND EXISTS (SELECT 1 FROM tasks t WHERE t.id = p.task_id) \
                RETURNING p.task_id, p.delivered_seq, \
                          (SELECT t.seq FROM tasks t WHERE t.id = p.task_id) AS seq), \
            gone AS ( \
                DELETE FROM push_progress p \
                 WHERE p.task_id = ANY (ARRAY(SELECT task_id FROM picked)) \
                   AND NOT EXISTS (SELECT 1 FROM tasks t WHERE t.id = p.task_id) \
                RETURNING p.task_id) \
            SELECT m.task_id, m.seq, m.delivered_seq, (SELECT count(*) FROM gone) AS gone \
              FROM marked m \
            UNION ALL \
            SELECT NULL, NULL, 0, (SELECT count(*) FROM gone) \
             WHERE NOT EXISTS (SELECT 1 FROM marked)";
        let rows = sqlx::query(SQL)
            .bind(i64::from(limit.max(1)))
            .bind(interval.as_secs_f64())
            .fetch_all(&self.pool)
            .await
            .map_err(db_error)?;
        let (mut behind, mut gone) = (Vec::new(), 0);
        for row in &rows {
            gone = to_u64(row.try_get("gone").map_err(row_error)?);
            let task_id: Option<String> = row.try_get("task_id").map_err(row_error)?;
            let seq: Option<i64> = row.try_get("seq").map_err(row_error)?;
            let delivered: i64 = row.try_get("delivered_seq").map_err(row_error)?;
            if let (Some(task_id), Some(seq)) = (task_id, seq.filter(|s| *s > delivered)) {
                behind.push(Behind {
                    task_id,
                    seq: to_u64(seq),
                });
            }
        }
        Ok((behind, gone))
    }

    /// Extends the lease `worker` holds; false when it no longer holds it.
    /// Extends the leases `worker` holds on `task_ids` in one statement (a worker holding many
    /// tasks, most of them waiting on a slow webhook, renews them all at once instead of one
    /// statement per task and tick); returns the ids whose lease it no longer holds.
    pub async fn renew(
        &self,
        task_ids: &[String],
        worker: &str,
        lease: Duration,
    ) -> StoreResult<Vec<String>> {
        if task_ids.is_empty() {
            return Ok(Vec::new());
        }
        const SQL: &str = "\
            UPDATE push_progress \
               SET lease_until = clock_timestamp() + make_interval(secs => $3) \
             WHERE task_id = ANY($1) AND lease_owner = $2 \
            RETURNING task_id";
        let held: Vec<String> = sqlx::query_scalar(SQL)
            .bind(task_ids)
            .bind(worker)
            .bind(lease.as_secs_f64())
            .fetch_all(&self.pool)
            .await
            .map_err(db_error)?;
        let held: std::collections::HashSet<&str> = held.iter().map(String::as_str).collect();
        Ok(task_ids
            .iter()
            .filter(|t| !held.contains(t.as_str()))
            .cloned()
            .collect())
    }

    /// Records that every event up to `seq` is done and, as `release` says, frees the lease.
    ///
    /// [`Release::IfDone`] closes the race with a worker that found the lease held: that worker
    /// read the entry of a committed event, so either its claim came after this statement (and
    /// found the lease free), or this statement reads that event's `tasks.seq` and keeps the
    /// lease. The task row is read `FOR SHARE`, which waits for a commit in flight and then
    /// reads the newest row (the statement's snapshot alone could predate a commit whose entry
    /// the other worker already handled).
    pub async fn advance(
        &self,
        task_id: &str,
        worker: &str,
        seq: u64,
        release: Release,
    ) -> StoreResult<Advanced> {
        const SQL: &str = "\
            WITH last AS MATERIALIZED ( \
                SELECT seq FROM tasks WHERE id = $1 AND $4 AND NOT $5 FOR SHARE) \
            UPDATE push_progress p \
               SET delivered_seq = GREATEST(p.delivered_seq, $3), updated_at = now(), \
                   lease_owner = CASE WHEN $4 AND ($5 OR coalesce((SELECT seq FROM last), 0) \
                                          <= GREATEST(p.delivered_seq, $3)) \
                                      THEN NULL ELSE p.lease_owner END, \
                   lease_until = CASE WHEN $4 AND ($5 OR coalesce((SELECT seq FROM last), 0) \
                                          <= GREATEST(p.delivered_seq, $3)) \
                                      THEN '-infinity'::timestamptz ELSE p.lease_until END \
             WHERE p.task_id = $1 AND p.lease_owner = $2 \
            RETURNING p.lease_owner IS NULL AS freed, (SELECT seq FROM last) AS last";
        let row = sqlx::query(SQL)
            .bind(task_id)
            .bind(worker)
            .bind(to_i64(seq))
            .bind(release != Release::Keep)
            .bind(release == Release::Anyway)
            .fetch_optional(&self.pool)
            .await
            .map_err(db_error)?;
        let Some(row) = row else {
            return Ok(Advanced::Lost);
        };
        let freed: bool = row.try_get("freed").map_err(row_error)?;
        let last: Option<i64> = row.try_get("last").map_err(row_error)?;
        Ok(match (release, freed, last) {
            (Release::IfDone, false, Some(last)) => Advanced::Behind(to_u64(last)),
            _ => Advanced::Recorded,
        })
    }

    /// The task's events with `after < seq <= upto`, from the event log, in order.
    pub async fn events(
        &self,
        task_id: &str,
        after: u64,
        upto: u64,
    ) -> StoreResult<Vec<(u64, StreamResponse)>> {
        const SQL: &str = "\
            SELECT seq, payload FROM task_events \
             WHERE task_id = $1 AND seq > $2 AND seq <= $3 ORDER BY seq";
        let rows = sqlx::query(SQL)
            .bind(task_id)
            .bind(to_i64(after))
            .bind(to_i64(upto))
            .fetch_all(&self.pool)
            .await
            .map_err(db_error)?;
        rows.iter()
            .map(|row| {
                let seq: i64 = row.try_get("seq").map_err(row_error)?;
                let payload: Vec<u8> = row.try_get("payload").map_err(row_error)?;
                Ok((to_u64(seq), decode(&payload, "event")?))
            })
            .collect()
    }

    /// Appends attempts to the delivery log, in one statement.
    pub async fn log(&self, worker: &str, attempts: &[AttemptRecord]) -> StoreResult<()> {
        const SQL: &str = "\
            INSERT INTO push_delivery_log \
                (task_id, seq, config_id, attempt, outcome, status, error, latency_us, worker) \
            SELECT t, s, c, a, o, st, e, l, $9 \
              FROM unnest($1::text[], $2::int8[], $3::text[], $4::int4[], $5::text[], \
                          $6::int4[], $7::text[], $8::int8[]) AS x(t, s, c, a, o, st, e, l)";
        if attempts.is_empty() {
            return Ok(());
        }
        let col = |f: fn(&AttemptRecord) -> String| attempts.iter().map(f).collect::<Vec<_>>();
        sqlx::query(SQL)
            .bind(col(|a| a.task_id.clone()))
            .bind(attempts.iter().map(|a| to_i64(a.seq)).collect::<Vec<_>>())
            .bind(col(|a| a.config_id.clone()))
            .bind(
                attempts
                    .iter()
                    .map(|a| i32::try_from(a.attempt).unwrap_or(i32::MAX))
                    .collect::<Vec<_>>(),
            )
            .bind(col(|a| a.outcome.to_owned()))
            .bind(
                attempts
                    .iter()
                    .map(|a| a.status.map(i32::from))
                    .collect::<Vec<_>>(),
            )
            .bind(attempts.iter().map(|a| a.error.clone()).collect::<Vec<_>>())
            .bind(
                attempts
                    .iter()
                    .map(|a| i64::try_from(a.latency.as_micros()).unwrap_or(i64::MAX))
                    .collect::<Vec<_>>(),
            )
            .bind(worker)
            .execute(&self.pool)
            .await
            .map_err(db_error)?;
        Ok(())
    }

    /// Deletes the delivery log's rows older than `retention`, oldest first, at most `batch`
    /// per statement, until it meets a younger row or the end of the log; returns how many it
    /// deleted. A zero `retention` keeps everything (`A2A_WORKER_LOG_RETENTION_HOURS=0`).
    ///
    /// No index on `at` is needed: ids are handed out in insertion order and `at` is the
    /// inserting statement's start, so the log sorted by id is sorted by age (to within the
    /// milliseconds that concurrent inserts overlap). Each statement reads the next `batch` rows
    /// after the last window through the primary key and deletes those old enough; the first
    /// row too young ends the pass (a row out of order would only hold back the older rows after
    /// it until it ages too). A pass with nothing to do reads `batch` index entries however long
    /// the log is, and each statement is its own short transaction (measured: about 50 ms per
    /// 10,000 rows), so a large backlog never holds locks for long.
    pub async fn prune_log(&self, retention: Duration, batch: u32) -> StoreResult<u64> {
        // `id = ANY(ARRAY(...))` rather than `IN (subquery)` or a join: the generic plan of a
        // join guesses the `LIMIT $2` window large and hashes a sequential scan of the whole
        // table, where `= ANY` of the window's ids stays on the primary key.
        //
        // Several workers prune the same table. The advisory lock lets one statement at a time
        // read a window: a worker that finds it taken reads nothing and ends its pass, since
        // another worker is doing the work (and does not end before the young rows: its window
        // counts rows as old whether or not it deleted them itself, so a window emptied by a
        // statement that committed after this one's snapshot does not stop it). Without the
        // lock, overlapping statements would still be correct (a row is deleted and counted
        // once: the second statement waits for the first's row locks, then skips the rows it
        // deleted), but they would delete the same windows in lockstep, and two plans locking
        // rows in different orders (index vs. heap order) could deadlock. `FOR UPDATE SKIP
        // LOCKED` would avoid the waits but lock, i.e. write, the young rows ending every pass.
        const SQL: &str = "\
            WITH head AS MATERIALIZED ( \
                SELECT id, at < now() - make_interval(secs => $3) AS old \
                  FROM push_delivery_log \
                 WHERE id > $1 AND (SELECT pg_try_advisory_xact_lock($4)) \
                 ORDER BY id LIMIT $2), \
            doomed AS ( \
                DELETE FROM push_delivery_log \
                 WHERE id = ANY (ARRAY(SELECT id FROM head WHERE old)) \
                RETURNING id) \
            SELECT (SELECT count(*) FROM doomed) AS deleted, count(*) AS seen, \
                   count(*) FILTER (WHERE old) AS old, max(id) AS last \
              FROM head";
        if retention.is_zero() {
            return Ok(0);
        }
        let batch = i64::from(batch.max(1));
        let (mut after, mut total) = (0_i64, 0_u64);
        loop {
            let row = sqlx::query(SQL)
                .bind(after)
                .bind(batch)
                .bind(retention.as_secs_f64())
                .bind(PRUNE_LOCK)
                // Planned at every run: a plan cached while the table was small (sequential
                // scans) would otherwise serve the connection after the table has grown.
                .persistent(false)
                .fetch_one(&self.pool)
                .await
                .map_err(db_error)?;
            let deleted: i64 = row.try_get("deleted").map_err(row_error)?;
            let seen: i64 = row.try_get("seen").map_err(row_error)?;
            let old: i64 = row.try_get("old").map_err(row_error)?;
            let last: Option<i64> = row.try_get("last").map_err(row_error)?;
            total += to_u64(deleted);
            match last {
                // A full window of old rows: the next one may hold more. A short window is the
                // end of the log, or the lock was taken (nothing seen).
                Some(last) if seen == batch && old == seen => after = last,
                _ => return Ok(total),
            }
        }
    }

    /// The logged attempts of one task, oldest first.
    pub async fn logged_attempts(&self, task_id: &str) -> StoreResult<Vec<LoggedAttempt>> {
        const SQL: &str = "\
            SELECT seq, config_id, attempt, outcome, status, error, worker \
              FROM push_delivery_log WHERE task_id = $1 ORDER BY id";
        let rows = sqlx::query(SQL)
            .bind(task_id)
            .fetch_all(&self.pool)
            .await
            .map_err(db_error)?;
        rows.iter()
            .map(|row| {
                let status: Option<i32> = row.try_get("status").map_err(row_error)?;
                let attempt: i32 = row.try_get("attempt").map_err(row_error)?;
                Ok(LoggedAttempt {
                    seq: to_u64(row.try_get("seq").map_err(row_error)?),
                    config_id: row.try_get("config_id").map_err(row_error)?,
                    attempt: u32::try_from(attempt).unwrap_or(0),
                    outcome: row.try_get("outcome").map_err(row_error)?,
                    status: status.and_then(|s| u16::try_from(s).ok()),
                    error: row.try_get("error").map_err(row_error)?,
                    worker: row.try_get("worker").map_err(row_error)?,
                })
            })
            .collect()
    }

    /// Records a dead letter, its config redacted ([`redact`]), under its task's owner; beyond
    /// `per_owner` dead letters of that owner the oldest go (0 = no cap). Returns its id.
    pub async fn add_dead_letter(&self, d: &NewDeadLetter, per_owner: u64) -> StoreResult<i64> {
        // The cap reads at most `per_owner` entries of the owner's index to find the oldest
        // to keep; dead letters are rare, so this costs little per insert.
        const SQL: &str = "\
            WITH ins AS ( \
                INSERT INTO push_dead_letters \
                    (task_id, seq, config_id, url, config, event, attempts, last_error, dialect, \
                     owner) \
                VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, \
                        (SELECT owner FROM tasks WHERE id = $1)) \
                RETURNING id, owner), \
            capped AS ( \
                DELETE FROM push_dead_letters \
                 WHERE $10 > 0 AND owner = (SELECT owner FROM ins) \
                   AND id <= (SELECT id FROM push_dead_letters \
                               WHERE owner = (SELECT owner FROM ins) \
                               ORDER BY id DESC OFFSET $10 - 1 LIMIT 1)) \
            SELECT id FROM ins";
        let row = sqlx::query(SQL)
            .bind(&d.task_id)
            .bind(to_i64(d.seq))
            .bind(&d.config.id)
            .bind(&d.config.url)
            .bind(encode(&redact(&d.config)))
            .bind(encode(&d.event))
            .bind(i32::try_from(d.attempts).unwrap_or(i32::MAX))
            .bind(&d.last_error)
            .bind(d.dialect.as_str())
            .bind(to_i64(per_owner))
            .fetch_one(&self.pool)
            .await
            .map_err(db_error)?;
        row.try_get("id").map_err(row_error)
    }

    /// Dead letters, oldest first: those never replayed, or all of them with `all`.
    pub async fn dead_letters(&self, all: bool, limit: i64) -> StoreResult<Vec<DeadLetter>> {
        self.select_dead_letters(None, all, limit).await
    }

    /// One dead letter by id.
    pub async fn dead_letter(&self, id: i64) -> StoreResult<Option<DeadLetter>> {
        Ok(self.select_dead_letters(Some(id), true, 1).await?.pop())
    }

    async fn select_dead_letters(
        &self,
        id: Option<i64>,
        all: bool,
        limit: i64,
    ) -> StoreResult<Vec<DeadLetter>> {
        // Times as Unix ms: sqlx is built without chrono.
        const SQL: &str = "\
            SELECT id, task_id, seq, config, event, dialect, attempts, last_error, \
                   (extract(epoch FROM created_at) * 1000)::int8 AS created_ms, \
                   (extract(epoch FROM replayed_at) * 1000)::int8 AS replayed_ms, replay_outcome \
              FROM push_dead_letters \
             WHERE ($1::int8 IS NULL OR id = $1) AND ($2 OR replayed_at IS NULL) \
             ORDER BY id LIMIT $3";
        let rows = sqlx::query(SQL)
            .bind(id)
            .bind(all)
            .bind(limit)
            .fetch_all(&self.pool)
            .await
            .map_err(db_error)?;
        rows.iter().map(dead_letter).collect()
    }

    /// A push config as it is now (any owner): a replay takes its secrets from here, since a
    /// dead letter keeps its config redacted.
    pub async fn push_config(
        &self,
        task_id: &str,
        config_id: &str,
    ) -> StoreResult<Option<TaskPushNotificationConfig>> {
        let row = sqlx::query("SELECT config FROM push_configs WHERE task_id = $1 AND id = $2")
            .bind(task_id)
            .bind(config_id)
            .fetch_optional(&self.pool)
            .await
            .map_err(db_error)?;
        row.map(|row| {
            let config: Vec<u8> = row.try_get("config").map_err(row_error)?;
            decode(&config, "push config")
        })
        .transpose()
    }

    /// Records the outcome of a replay.
    pub async fn mark_replayed(&self, id: i64, outcome: &str) -> StoreResult<()> {
        sqlx::query(
            "UPDATE push_dead_letters SET replayed_at = now(), replay_outcome = $2 WHERE id = $1",
        )
        .bind(id)
        .bind(outcome)
        .execute(&self.pool)
        .await
        .map_err(db_error)?;
        Ok(())
    }

    pub async fn ping(&self) -> StoreResult<()> {
        sqlx::query("SELECT 1")
            .execute(&self.pool)
            .await
            .map(|_| ())
            .map_err(db_error)
    }
}

fn dead_letter(row: &sqlx::postgres::PgRow) -> StoreResult<DeadLetter> {
    let config: Vec<u8> = row.try_get("config").map_err(row_error)?;
    let event: Vec<u8> = row.try_get("event").map_err(row_error)?;
    let attempts: i32 = row.try_get("attempts").map_err(row_error)?;
    Ok(DeadLetter {
        id: row.try_get("id").map_err(row_error)?,
        task_id: row.try_get("task_id").map_err(row_error)?,
        seq: to_u64(row.try_get("seq").map_err(row_error)?),
        config: decode(&config, "push config")?,
        event: decode(&event, "event")?,
        dialect: Dialect::from_stored(row.try_get("dialect").map_err(row_error)?),
        attempts: u32::try_from(attempts).unwrap_or(0),
        last_error: row.try_get("last_error").map_err(row_error)?,
        created_ms: row.try_get("created_ms").map_err(row_error)?,
        replayed_ms: row.try_get("replayed_ms").map_err(row_error)?,
        replay_outcome: row.try_get("replay_outcome").map_err(row_error)?,
    })
}
