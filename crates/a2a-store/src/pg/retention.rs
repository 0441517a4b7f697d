//! Retention on PostgreSQL (migration 0007): terminal tasks past their time to live are deleted
//! with their rows in every table keyed by the task, and the dispatch leases of replicas gone
//! for long are deleted. One statement each.
//!
//! The child tables have no foreign keys (see 0001), so the statement deletes from each of them
//! explicitly: history, artifacts, events, push configs, push delivery progress and the
//! idempotency keys naming the task, and its push dead letters (migration 0012: they hold the
//! task's events, so they go with it). The delivery log is kept: the worker prunes it by its
//! own retention.

use std::time::{Duration, SystemTime};

use sqlx::postgres::PgPool;

use super::db_error;
use crate::StoreResult;

/// The advisory lock that lets one process at a time delete tasks (`a2aretn` in ASCII).
pub const TASK_SWEEP_LOCK: i64 = 0x0061_3261_7265_746e;

/// Deletes at most `limit` tasks that became terminal before `before`, oldest first, with
/// everything kept for them; a process that finds another one sweeping deletes nothing. The
/// tasks are locked (`SKIP LOCKED`: a task being written is left for the next sweep), and the
/// index on `terminal_at` makes finding them a range scan however many tasks are kept.
pub(super) async fn purge_tasks(
    pool: &PgPool,
    before: SystemTime,
    limit: usize,
) -> StoreResult<u64> {
    // The ids go to every delete as one array, so each is an index scan on `= ANY(ids)`
    // whatever the tables' sizes and statistics (a join could turn into a merge or hash join
    // over a whole child table).
    const SQL: &str = "\
        WITH doomed AS ( \
                 SELECT coalesce(array_agg(id), '{}') AS ids FROM ( \
                     SELECT id FROM tasks \
                      WHERE terminal_at IS NOT NULL AND terminal_at < to_timestamp($1) \
                        AND (SELECT pg_try_advisory_xact_lock($3)) \
                      ORDER BY terminal_at LIMIT $2 \
                        FOR UPDATE SKIP LOCKED) oldest), \
             gone AS (DELETE FROM tasks WHERE id = ANY((SELECT ids FROM doomed)::text[]) \
                      RETURNING id, owner, bytes), \
             usage AS (INSERT INTO owner_bytes (owner, slot, bytes) \
                        SELECT owner, 0, -sum(bytes)::int8 FROM gone GROUP BY owner \
                        HAVING sum(bytes) <> 0 \
                        ON CONFLICT (owner, slot) \
                        DO UPDATE SET bytes = owner_bytes.bytes + excluded.bytes), \
             history AS (DELETE FROM task_history \
                          WHERE task_id = ANY((SELECT ids FROM doomed)::text[])), \
             artifacts AS (DELETE FROM task_artifacts \
                            WHERE task_id = ANY((SELECT ids FROM doomed)::text[])), \
             events AS (DELETE FROM task_events \
                         WHERE task_id = ANY((SELECT ids FROM doomed)::text[])), \
             configs AS (DELETE FROM push_configs \
                          WHERE task_id = ANY((SELECT ids FROM doomed)::text[])), \
             progress AS (DELETE FROM push_progress \
                           WHERE task_id = ANY((SELECT ids FROM doomed)::text[])), \
             dead AS (DELETE FROM push_dead_letters \
                       WHERE task_id = ANY((SELECT ids FROM doomed)::text[])), \
             keys AS (DELETE FROM idempotency_keys \
                       WHERE task_id = ANY((SELECT ids FROM doomed)::text[])) \
        SELECT count(*) FROM gone";
    let before = before
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    let (deleted,): (i64,) = sqlx::query_as(SQL)
        .bind(before)
        .bind(i64::try_from(limit).unwrap_or(i64::MAX))
        .bind(TASK_SWEEP_LOCK)
        .fetch_one(pool)
        .await
        .map_err(db_error)?;
    Ok(u64::try_from(deleted).unwrap_or(0))
}

/// At most `limit` interrupted tasks whose status timestamp is before `before`, oldest first:
/// a range scan of `tasks_interrupted` (migration 0011).
pub(super) async fn interrupted_before(
    pool: &PgPool,
    before: SystemTime,
    limit: usize,
) -> StoreResult<Vec<crate::Interrupted>> {
    const SQL: &str = "\
        SELECT id, context_id, seq FROM tasks \
         WHERE state IN (6, 8) AND status_ms < $1 \
         ORDER BY status_ms LIMIT $2";
    let before_ms = before
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
    let rows: Vec<(String, String, i64)> = sqlx::query_as(SQL)
        .bind(before_ms)
        .bind(i64::try_from(limit).unwrap_or(i64::MAX))
        .fetch_all(pool)
        .await
        .map_err(db_error)?;
    Ok(rows
        .into_iter()
        .map(|(task_id, context_id, seq)| crate::Interrupted {
            task_id,
            context_id,
            seq: u64::try_from(seq).unwrap_or(0),
        })
        .collect())
}

/// Folds the `owner_bytes` rows of writer connections that are gone into slot 0, so the table
/// keeps about one row per owner and live writer; one process at a time (the sweep's lock).
pub(super) async fn fold_owner_bytes(pool: &PgPool) -> StoreResult<u64> {
    const SQL: &str = "\
        WITH gone AS (DELETE FROM owner_bytes \
                       WHERE slot <> 0 AND (SELECT pg_try_advisory_xact_lock($1)) \
                         AND slot NOT IN (SELECT pid FROM pg_stat_activity WHERE pid IS NOT NULL) \
                       RETURNING owner, bytes, open), \
             folded AS (INSERT INTO owner_bytes (owner, slot, bytes, open) \
                         SELECT owner, 0, sum(bytes)::int8, sum(open)::int8 FROM gone \
                          GROUP BY owner \
                         ON CONFLICT (owner, slot) \
                         DO UPDATE SET bytes = owner_bytes.bytes + excluded.bytes, \
                           open = owner_bytes.open + excluded.open) \
        SELECT count(*) FROM gone";
    let (n,): (i64,) = sqlx::query_as(SQL)
        .bind(TASK_SWEEP_LOCK)
        .fetch_one(pool)
        .await
        .map_err(db_error)?;
    Ok(u64::try_from(n).unwrap_or(0))
}

/// Deletes the leases that expired more than `grace` ago. A lease that has expired already
/// protects nothing (takeover and key reclaims look for a live one), so this only keeps the
/// table from holding one row per replica that ever ran.
pub(super) async fn purge_stale_leases(pool: &PgPool, grace: Duration) -> StoreResult<u64> {
    const SQL: &str =
        "DELETE FROM dispatch_leases WHERE expires_at < now() - make_interval(secs => $1)";
    let done = sqlx::query(SQL)
        .bind(grace.as_secs_f64())
        .execute(pool)
        .await
        .map_err(db_error)?;
    Ok(done.rows_affected())
}
