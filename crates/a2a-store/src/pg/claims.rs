//! Message claims (idempotent SendMessage), batched: one claimer task takes every claim queued
//! at that moment and settles them in one statement, on a connection with
//! `synchronous_commit = off`.
//!
//! Why batched: a claim is one more statement per SendMessage, and on a small machine the
//! per-statement cost is the ceiling (see `write.rs`); one claim statement each halved the
//! persisted sends per second. Why `synchronous_commit = off` is safe: a claim is committed
//! before the task it names is created, and that creation waits for the WAL to be flushed up to
//! its own commit record, which lies after the claim's; so a claim is durable whenever its task
//! is, and one lost in a crash named no task yet.

use sqlx::Row;
use sqlx::postgres::PgPool;
use tokio::sync::{mpsc, oneshot};

use super::db_error;
use crate::{MessageClaim, StoreError, StoreResult};

/// Most claims in one statement.
const MAX_BATCH: usize = 256;

struct Claim {
    owner: String,
    message_id: String,
    task_id: String,
    reply: oneshot::Sender<StoreResult<MessageClaim>>,
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

    /// Claims `(owner, message_id)` for `task_id`, or names the task that has it.
    pub async fn claim(
        &self,
        owner: &str,
        message_id: &str,
        task_id: &str,
    ) -> StoreResult<MessageClaim> {
        let (reply, rx) = oneshot::channel();
        let claim = Claim {
            owner: owner.to_owned(),
            message_id: message_id.to_owned(),
            task_id: task_id.to_owned(),
            reply,
        };
        self.tx.send(claim).await.map_err(|_| claimer_gone())?;
        rx.await.map_err(|_| claimer_gone())?
    }
}

async fn run(pool: PgPool, mut rx: mpsc::Receiver<Claim>) {
    let mut batch = Vec::with_capacity(MAX_BATCH);
    while rx.recv_many(&mut batch, MAX_BATCH).await > 0 {
        match settle(&pool, &batch).await {
            Ok(outcomes) => {
                for (claim, outcome) in batch.drain(..).zip(outcomes) {
                    let _ = claim.reply.send(outcome);
                }
            }
            Err(e) => {
                for claim in batch.drain(..) {
                    let _ = claim.reply.send(Err(e.clone()));
                }
            }
        }
    }
}

/// One statement for the whole batch: insert what is free (`ON CONFLICT DO NOTHING` also skips
/// a duplicate within the batch), then answer each claim from what was inserted or, for a
/// message id claimed before, from the existing row.
async fn settle(pool: &PgPool, batch: &[Claim]) -> StoreResult<Vec<StoreResult<MessageClaim>>> {
    const SQL: &str = "\
        WITH req AS (SELECT * FROM unnest($1::text[], $2::text[], $3::text[]) \
                       WITH ORDINALITY AS r(owner, message_id, task_id, n)), \
             ins AS (INSERT INTO message_claims (owner, message_id, task_id) \
                     SELECT owner, message_id, task_id FROM req ORDER BY n \
                     ON CONFLICT (owner, message_id) DO NOTHING \
                     RETURNING owner, message_id, task_id) \
        SELECT r.n, COALESCE(i.task_id, c.task_id) AS task_id \
          FROM req r \
          LEFT JOIN ins i ON i.owner = r.owner AND i.message_id = r.message_id \
          LEFT JOIN message_claims c ON i.task_id IS NULL \
                AND c.owner = r.owner AND c.message_id = r.message_id \
         ORDER BY r.n";
    let column = |f: fn(&Claim) -> &str| batch.iter().map(|c| f(c).to_owned()).collect::<Vec<_>>();
    let rows = sqlx::query(SQL)
        .bind(column(|c| &c.owner))
        .bind(column(|c| &c.message_id))
        .bind(column(|c| &c.task_id))
        .fetch_all(pool)
        .await
        .map_err(db_error)?;
    Ok(batch
        .iter()
        .zip(rows)
        .map(|(claim, row)| {
            let task_id: Option<String> = row.try_get("task_id").map_err(db_error)?;
            match task_id {
                Some(t) if t == claim.task_id => Ok(MessageClaim::Claimed),
                Some(t) => Ok(MessageClaim::Existing(t)),
                // Released between the insert and the read: the caller retries.
                None => Err(StoreError::Conflict {
                    task_id: claim.task_id.clone(),
                    expected: 0,
                    actual: 0,
                }),
            }
        })
        .collect())
}
