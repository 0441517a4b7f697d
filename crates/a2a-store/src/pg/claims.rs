//! Idempotency-key claims, batched: one claimer task takes every claim queued at that moment
//! and settles them in one statement, on a connection with `synchronous_commit = off`.
//!
//! Why batched: a claim is one more statement per keyed SendMessage, and on a small machine the
//! per-statement cost is the ceiling (see `write.rs`); one claim statement each halved the
//! persisted sends per second. Why `synchronous_commit = off` is safe: a claim is committed
//! before the task it names is created or continued, and that write waits for the WAL to be
//! flushed up to its own commit record, which lies after the claim's; so a claim is durable
//! whenever its request's effect is, and one lost in a crash had no effect yet.

use sqlx::Row;
use sqlx::postgres::PgPool;
use tokio::sync::{mpsc, oneshot};

use super::db_error;
use crate::{HeldKey, KeyClaim, KeyRequest, StoreError, StoreResult};

/// Most claims in one statement.
const MAX_BATCH: usize = 256;

struct Claim {
    req: KeyRequest,
    reply: oneshot::Sender<StoreResult<KeyClaim>>,
}

pub(super) struct Claimer {
    tx: mpsc::Sender<Claim>,
}

fn claimer_gone() -> StoreError {
    StoreError::Internal("the PostgreSQL claimer stopped".into())
}

impl Claimer {
    /// Starts the claimer task; it stops when the store (the sender) is dropped.
    pub fn spawn(pool: PgPool) -> Self {
        let (tx, rx) = mpsc::channel(4096);
        tokio::spawn(run(pool, rx));
        Self { tx }
    }

    /// Claims `req.key` for `req.task_id`, or reports the request that holds it.
    pub async fn claim(&self, req: &KeyRequest) -> StoreResult<KeyClaim> {
        let (reply, rx) = oneshot::channel();
        let claim = Claim {
            req: req.clone(),
            reply,
        };
        self.tx.send(claim).await.map_err(|_| claimer_gone())?;
        rx.await.map_err(|_| claimer_gone())?
    }
}

async fn run(pool: PgPool, mut rx: mpsc::Receiver<Claim>) {
    let mut queued = Vec::with_capacity(MAX_BATCH);
    while rx.recv_many(&mut queued, MAX_BATCH).await > 0 {
        while !queued.is_empty() {
            let batch = distinct_keys(&mut queued);
            match settle(&pool, &batch).await {
                Ok(outcomes) => {
                    for (claim, outcome) in batch.into_iter().zip(outcomes) {
                        // A caller that went away while its claim was in flight (its client
                        // hung up) never learns it holds the key: free it, or it would stick.
                        if let Err(Ok(KeyClaim::Claimed)) = claim.reply.send(outcome) {
                            let req = &claim.req;
                            if let Err(e) = super::dispatch::release_key(
                                &pool,
                                &req.owner,
                                &req.key,
                                &req.task_id,
                            )
                            .await
                            {
                                tracing::warn!(error = %e, "cannot free an unclaimed idempotency key");
                            }
                        }
                    }
                }
                Err(e) => {
                    for claim in batch {
                        let _ = claim.reply.send(Err(e.clone()));
                    }
                }
            }
        }
    }
}

/// Takes from `queued` the claims of distinct `(owner, key)`s, in order, leaving the others
/// for the next statement: one `INSERT ... ON CONFLICT DO UPDATE` may not touch a row twice,
/// and a second claim of a key must see the first one's outcome anyway.
fn distinct_keys(queued: &mut Vec<Claim>) -> Vec<Claim> {
    let mut seen = std::collections::HashSet::new();
    let (batch, rest): (Vec<_>, Vec<_>) = std::mem::take(queued)
        .into_iter()
        .partition(|c| seen.insert((c.req.owner.clone(), c.req.key.clone())));
    *queued = rest;
    batch
}

/// One statement for the whole batch: insert each key that is free or expired, then answer
/// each claim from what was written or, for a key held by an unexpired claim, from that claim
/// (with whether the replica that made it still holds a dispatch lease).
async fn settle(pool: &PgPool, batch: &[Claim]) -> StoreResult<Vec<StoreResult<KeyClaim>>> {
    const SQL: &str = "\
        WITH req AS (SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], \
                                          $5::int8[], $6::float8[]) \
                       WITH ORDINALITY AS r(owner, key, fingerprint, task_id, after_seq, ttl, n)), \
             ins AS (INSERT INTO idempotency_keys \
                            (owner, key, fingerprint, task_id, after_seq, expires_at) \
                     SELECT owner, key, fingerprint, task_id, after_seq, \
                            now() + make_interval(secs => ttl) \
                       FROM req ORDER BY n \
                     ON CONFLICT (owner, key) DO UPDATE \
                        SET fingerprint = excluded.fingerprint, task_id = excluded.task_id, \
                            after_seq = excluded.after_seq, replica = excluded.replica, \
                            expires_at = excluded.expires_at \
                      WHERE idempotency_keys.expires_at <= now() \
                     RETURNING owner, key) \
        SELECT r.n, i.key IS NOT NULL AS claimed, c.task_id, c.fingerprint, c.after_seq, \
               (c.replica IS NOT NULL AND NOT EXISTS ( \
                    SELECT 1 FROM dispatch_leases l \
                     WHERE l.replica = c.replica AND l.expires_at > now())) AS abandoned \
          FROM req r \
          LEFT JOIN ins i ON i.owner = r.owner AND i.key = r.key \
          LEFT JOIN idempotency_keys c ON i.key IS NULL \
                AND c.owner = r.owner AND c.key = r.key \
         ORDER BY r.n";
    let column = |f: fn(&KeyRequest) -> String| batch.iter().map(|c| f(&c.req)).collect::<Vec<_>>();
    let after: Vec<i64> = batch
        .iter()
        .map(|c| i64::try_from(c.req.after_seq).unwrap_or(i64::MAX))
        .collect();
    let ttl: Vec<f64> = batch.iter().map(|c| c.req.ttl.as_secs_f64()).collect();
    let rows = sqlx::query(SQL)
        .bind(column(|r| r.owner.clone()))
        .bind(column(|r| r.key.clone()))
        .bind(column(|r| r.fingerprint.clone()))
        .bind(column(|r| r.task_id.clone()))
        .bind(after)
        .bind(ttl)
        .fetch_all(pool)
        .await
        .map_err(db_error)?;
    Ok(batch
        .iter()
        .zip(rows)
        .map(|(c, row)| outcome(&c.req, &row))
        .collect())
}

fn outcome(req: &KeyRequest, row: &sqlx::postgres::PgRow) -> StoreResult<KeyClaim> {
    if row.try_get::<bool, _>("claimed").map_err(db_error)? {
        return Ok(KeyClaim::Claimed);
    }
    let task_id: Option<String> = row.try_get("task_id").map_err(db_error)?;
    let Some(task_id) = task_id else {
        // Released between the insert and the read: the caller claims again.
        return Err(StoreError::Conflict {
            task_id: req.task_id.clone(),
            expected: 0,
            actual: 0,
        });
    };
    let after_seq: i64 = row.try_get("after_seq").map_err(db_error)?;
    Ok(KeyClaim::Held(HeldKey {
        task_id,
        fingerprint: row.try_get("fingerprint").map_err(db_error)?,
        after_seq: u64::try_from(after_seq).unwrap_or(0),
        abandoned: row.try_get("abandoned").map_err(db_error)?,
    }))
}
