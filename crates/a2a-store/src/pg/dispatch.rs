//! Upstream ids, idempotency keys (migration 0005), dispatch leases (migration 0004) and
//! dispatch marks (migration 0006). One statement each.

use std::time::Duration;

use sqlx::Row;
use sqlx::postgres::PgPool;

use super::db_error;
use crate::{DispatchMark, KeyRequest, Orphan, StoreError, StoreResult, UpstreamRef};

pub(super) async fn set_upstream(
    pool: &PgPool,
    task_id: &str,
    upstream: &UpstreamRef,
) -> StoreResult<()> {
    const SQL: &str = "UPDATE tasks SET upstream_task_id = $2, upstream_context_id = $3, \
                       upstream_sent_turn = coalesce(upstream_sent_turn, 1), \
                       upstream_sent_at = coalesce(upstream_sent_at, now()) \
                       WHERE id = $1";
    let done = sqlx::query(SQL)
        .bind(task_id)
        .bind(&upstream.task_id)
        .bind(&upstream.context_id)
        .execute(pool)
        .await
        .map_err(db_error)?;
    if done.rows_affected() == 0 {
        return Err(StoreError::NotFound(task_id.to_owned()));
    }
    Ok(())
}

pub(super) async fn mark(pool: &PgPool, task_id: &str, mark: DispatchMark) -> StoreResult<()> {
    let query = match mark {
        DispatchMark::Queued { priority } => {
            sqlx::query("UPDATE tasks SET priority = $2 WHERE id = $1")
                .bind(task_id)
                .bind(priority)
        }
        // Fenced (migration 0013): a runner whose task was taken over marks nothing, and
        // learns it before it sends. The row count tells a missing task (none) from a stale
        // epoch (a row, not updated) in the same statement.
        DispatchMark::Sending { turn, epoch } => sqlx::query(
            "WITH t AS (SELECT id FROM tasks WHERE id = $1), \
                  u AS (UPDATE tasks SET upstream_sent_turn = $2, upstream_sent_at = now() \
                         WHERE id = $1 AND epoch = $3 RETURNING id) \
             SELECT (SELECT count(*) FROM t) AS found, (SELECT count(*) FROM u) AS updated",
        )
        .bind(task_id)
        .bind(i32::try_from(turn).unwrap_or(i32::MAX))
        .bind(i64::try_from(epoch).unwrap_or(i64::MAX)),
    };
    if let DispatchMark::Sending { .. } = mark {
        let row = query.fetch_one(pool).await.map_err(db_error)?;
        let found: i64 = row.try_get("found").map_err(db_error)?;
        let updated: i64 = row.try_get("updated").map_err(db_error)?;
        return match (found, updated) {
            (0, _) => Err(StoreError::NotFound(task_id.to_owned())),
            (_, 0) => Err(StoreError::Fenced(task_id.to_owned())),
            _ => Ok(()),
        };
    }
    let done = query.execute(pool).await.map_err(db_error)?;
    if done.rows_affected() == 0 {
        return Err(StoreError::NotFound(task_id.to_owned()));
    }
    Ok(())
}

pub(super) async fn release_key(
    pool: &PgPool,
    owner: &str,
    key: &str,
    task_id: &str,
) -> StoreResult<()> {
    sqlx::query("DELETE FROM idempotency_keys WHERE owner = $1 AND key = $2 AND task_id = $3")
        .bind(owner)
        .bind(key)
        .bind(task_id)
        .execute(pool)
        .await
        .map_err(db_error)?;
    Ok(())
}

/// Rewrites an abandoned key for `req` if it still names `stale_task_id`.
pub(super) async fn reclaim_key(
    pool: &PgPool,
    req: &KeyRequest,
    stale_task_id: &str,
) -> StoreResult<bool> {
    const SQL: &str = "\
        UPDATE idempotency_keys \
           SET fingerprint = $3, task_id = $4, after_seq = $5, \
               replica = nullif(current_setting('a2a.replica', true), ''), \
               expires_at = now() + make_interval(secs => $6) \
         WHERE owner = $1 AND key = $2 AND task_id = $7";
    let done = sqlx::query(SQL)
        .bind(&req.owner)
        .bind(&req.key)
        .bind(&req.fingerprint)
        .bind(&req.task_id)
        .bind(i64::try_from(req.after_seq).unwrap_or(i64::MAX))
        .bind(req.ttl.as_secs_f64())
        .bind(stale_task_id)
        .execute(pool)
        .await
        .map_err(db_error)?;
    Ok(done.rows_affected() == 1)
}

/// The advisory lock that lets one process at a time sweep expired keys (`a2aidemk` in ASCII).
const KEY_SWEEP_LOCK: i64 = 0x6132_6169_6465_6d6b;

/// Deletes at most `limit` expired keys, oldest first, in one statement; a process that finds
/// another one sweeping deletes nothing. Rows are addressed by `ctid` (a TID scan) and checked
/// again, so a key claimed anew meanwhile is kept.
pub(super) async fn purge_expired_keys(pool: &PgPool, limit: usize) -> StoreResult<u64> {
    const SQL: &str = "\
        DELETE FROM idempotency_keys \
         WHERE ctid = ANY (ARRAY( \
                   SELECT ctid FROM idempotency_keys \
                    WHERE expires_at <= now() AND (SELECT pg_try_advisory_xact_lock($2)) \
                    ORDER BY expires_at LIMIT $1)) \
           AND expires_at <= now()";
    let done = sqlx::query(SQL)
        .bind(i64::try_from(limit).unwrap_or(i64::MAX))
        .bind(KEY_SWEEP_LOCK)
        .execute(pool)
        .await
        .map_err(db_error)?;
    Ok(done.rows_affected())
}

/// Renews `replica`'s lease, then claims orphans: running tasks whose dispatcher holds no live
/// lease. Each claim moves the task's epoch (its fencing token, migration 0013) on by one, so
/// the replica that lost the task can no longer append to it or mark it sent. `SKIP LOCKED` lets several survivors scan at once without claiming a task twice; the
/// claim itself is the `UPDATE` of the dispatcher.
pub(super) async fn take_over(
    pool: &PgPool,
    replica: &str,
    lease: Duration,
    limit: usize,
) -> StoreResult<Vec<Orphan>> {
    const RENEW: &str = "\
        INSERT INTO dispatch_leases (replica, expires_at) \
        VALUES ($1, now() + make_interval(secs => $2)) \
        ON CONFLICT (replica) DO UPDATE SET expires_at = excluded.expires_at";
    const CLAIM: &str = "\
        WITH orphans AS (\
            SELECT t.id FROM tasks t \
             WHERE t.state IN (1, 2) AND t.dispatcher IS DISTINCT FROM $1 \
               AND NOT EXISTS (SELECT 1 FROM dispatch_leases l \
                                WHERE l.replica = t.dispatcher AND l.expires_at > now()) \
             LIMIT $2 FOR UPDATE SKIP LOCKED) \
        UPDATE tasks t SET dispatcher = $1, epoch = t.epoch + 1 FROM orphans o WHERE t.id = o.id \
        RETURNING t.id, t.owner, t.epoch";
    sqlx::query(RENEW)
        .bind(replica)
        .bind(lease.as_secs_f64())
        .execute(pool)
        .await
        .map_err(db_error)?;
    let rows = sqlx::query(CLAIM)
        .bind(replica)
        .bind(i64::try_from(limit).unwrap_or(i64::MAX))
        .fetch_all(pool)
        .await
        .map_err(db_error)?;
    rows.iter()
        .map(|r| {
            Ok(Orphan {
                task_id: r.try_get("id").map_err(db_error)?,
                owner: r.try_get("owner").map_err(db_error)?,
                epoch: u64::try_from(r.try_get::<i64, _>("epoch").map_err(db_error)?)
                    .unwrap_or_default(),
            })
        })
        .collect()
}
