//! The outbox on PostgreSQL (migration 0015; issue 27 item 1, review M5).
//!
//! Every batch statement (`batch.rs`) inserts one `event_outbox` row per commit, beside the
//! commit's events and in the same transaction; except for the commit that creates a task
//! without push configs, which has nobody to announce it to ([`crate::outboxed`]). What happens
//! to the rows afterwards:
//! - the committing replica publishes the commit's events and, once the bus acknowledged them,
//!   deletes the row: inside the next write's statement (`batch.rs`, `write::Writer::forget`),
//!   so a commit costs one transaction, not two; or, when no write comes within a linger,
//!   alone ([`delete`]: one statement for every commit acknowledged meanwhile);
//! - rows that stay (the replica died between commit and publish, or the bus was unreachable)
//!   are relayed by any replica ([`relay`]): claimed with `FOR UPDATE SKIP LOCKED` once older
//!   than a threshold, their events read back from the log, published, and deleted in the same
//!   transaction, so two replicas never relay the same row at once and a relay that dies leaves
//!   the row to the next one.

use std::sync::Arc;
use std::time::Duration;

use a2a_types::v1::StreamResponse;
use sqlx::Row;
use sqlx::postgres::PgPool;

use super::codec::decode;
use super::db_error;
use crate::{OutboxDepth, OutboxRelay, RelayPass, StoreError, StoreResult, Unpublished};

/// Deletes the outbox rows of `commits` (task id, last sequence number of the commit).
pub(super) async fn delete(pool: &PgPool, commits: &[(String, u64)]) -> StoreResult<u64> {
    if commits.is_empty() {
        return Ok(0);
    }
    delete_in(pool, commits).await.map_err(db_error)
}

/// One statement for the whole batch: an index probe per row on the primary key.
async fn delete_in<'e>(
    ex: impl sqlx::PgExecutor<'e>,
    commits: &[(String, u64)],
) -> Result<u64, sqlx::Error> {
    const SQL: &str = "\
        DELETE FROM event_outbox o \
         USING unnest($1::text[], $2::int8[]) AS d(task_id, seq) \
         WHERE o.task_id = d.task_id AND o.seq = d.seq";
    let ids: Vec<&str> = commits.iter().map(|(t, _)| t.as_str()).collect();
    let seqs: Vec<i64> = commits
        .iter()
        .map(|(_, s)| i64::try_from(*s).unwrap_or(i64::MAX))
        .collect();
    let done = sqlx::query(SQL).bind(ids).bind(seqs).execute(ex).await?;
    Ok(done.rows_affected())
}

/// One relay pass over the rows left behind (see the module documentation).
pub(super) async fn relay(
    pool: &PgPool,
    older_than: Duration,
    limit: usize,
    inline_max: usize,
    relay: &dyn OutboxRelay,
) -> StoreResult<RelayPass> {
    // The oldest rows first (a range scan of `event_outbox_created`), each commit's events
    // beside it; payloads above `inline_max` stay in the database (their readers read them
    // from the log), so a pass holds at most `limit` commits of small events in memory. The
    // LEFT JOIN keeps a row whose task retention deleted: it is deleted unpublished.
    const SQL: &str = "\
        WITH claimed AS ( \
                 SELECT task_id, seq, first_seq FROM event_outbox \
                  WHERE created_at < now() - make_interval(secs => $1) \
                  ORDER BY created_at LIMIT $2 \
                    FOR UPDATE SKIP LOCKED) \
        SELECT c.task_id, c.seq AS last, e.seq AS event_seq, \
               CASE WHEN octet_length(e.payload) <= $3 THEN e.payload END AS payload \
          FROM claimed c \
          LEFT JOIN task_events e \
                 ON e.task_id = c.task_id AND e.seq BETWEEN c.first_seq AND c.seq \
         ORDER BY c.task_id, c.seq, e.seq";
    let mut tx = pool.begin().await.map_err(db_error)?;
    let rows = sqlx::query(SQL)
        .bind(older_than.as_secs_f64())
        .bind(i64::try_from(limit).unwrap_or(i64::MAX))
        .bind(i32::try_from(inline_max).unwrap_or(i32::MAX))
        .fetch_all(&mut *tx)
        .await
        .map_err(db_error)?;
    let mut commits: Vec<Unpublished> = Vec::new();
    for row in &rows {
        let task_id: String = row.try_get("task_id").map_err(internal)?;
        let last: i64 = row.try_get("last").map_err(internal)?;
        let last = u64::try_from(last).unwrap_or(0);
        let same = commits
            .last()
            .is_some_and(|c| c.task_id == task_id && c.seq == last);
        if !same {
            commits.push(Unpublished {
                task_id,
                seq: last,
                events: Vec::new(),
            });
        }
        let commit = commits.last_mut().expect("pushed above");
        let Some(seq) = row
            .try_get::<Option<i64>, _>("event_seq")
            .map_err(internal)?
        else {
            continue; // the task is gone
        };
        let payload: Option<Vec<u8>> = row.try_get("payload").map_err(internal)?;
        // An event this build cannot decode is announced like a large one: its readers read
        // the log, and whatever they make of it is theirs to report.
        let event = payload
            .and_then(|p| decode::<StreamResponse>(&p, "event").ok())
            .map(Arc::new);
        commit.events.push((u64::try_from(seq).unwrap_or(0), event));
    }
    let claimed = commits.len() as u64;
    if commits.is_empty() {
        tx.commit().await.map_err(db_error)?;
        return Ok(RelayPass::default());
    }
    let acked = relay.relay(&commits).await;
    let done: Vec<(String, u64)> = commits
        .into_iter()
        .zip(acked)
        .filter(|(c, ok)| *ok || c.events.is_empty())
        .map(|(c, _)| (c.task_id, c.seq))
        .collect();
    let relayed = if done.is_empty() {
        0
    } else {
        delete_in(&mut *tx, &done).await.map_err(db_error)?
    };
    tx.commit().await.map_err(db_error)?;
    Ok(RelayPass { claimed, relayed })
}

/// The rows (counted up to `count_up_to`, so an outage's backlog costs a bounded count) and the
/// oldest row's age.
pub(super) async fn depth(pool: &PgPool, count_up_to: u64) -> StoreResult<OutboxDepth> {
    const SQL: &str = "\
        SELECT (SELECT count(*) FROM (SELECT 1 FROM event_outbox LIMIT $1) x) AS rows, \
               coalesce(extract(epoch FROM now() - (SELECT min(created_at) FROM event_outbox)), \
                        0)::float8 AS oldest";
    let row = sqlx::query(SQL)
        .bind(i64::try_from(count_up_to).unwrap_or(i64::MAX))
        .fetch_one(pool)
        .await
        .map_err(db_error)?;
    let rows: i64 = row.try_get("rows").map_err(internal)?;
    let oldest: f64 = row.try_get("oldest").map_err(internal)?;
    Ok(OutboxDepth {
        rows: u64::try_from(rows).unwrap_or(0),
        oldest_secs: oldest.max(0.0),
    })
}

fn internal(e: sqlx::Error) -> StoreError {
    StoreError::Internal(e.to_string())
}
