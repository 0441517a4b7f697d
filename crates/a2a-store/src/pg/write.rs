//! The write path: creates and appends are queued to a few writer tasks; each takes everything
//! queued at that moment (at most one job per task) and commits it as one statement
//! (`batch::execute`).
//!
//! Why: a task costs several durable writes (created, artifact, completed), and on a small
//! machine PostgreSQL's per-statement cost (bind, execute, commit, WAL flush, round trip) is the
//! ceiling. Under load one statement carries many tasks' events, so that cost is shared; with one
//! request in flight a batch is one job and nothing waits. Each job keeps its own sequence guard.
//!
//! The same statement deletes the outbox rows of commits the bus acknowledged meanwhile
//! ([`Writer::forget`]): a send then costs one transaction, its commit, instead of a commit and a
//! delete. With no write to ride on within [`FORGET_LINGER`] the delete runs alone.

use std::collections::{HashSet, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use sqlx::Connection;
use sqlx::pool::PoolConnection;
use sqlx::postgres::{PgPool, Postgres};
use tokio::sync::{Mutex, mpsc, oneshot};

use super::batch::{self, AppendJob, CreateJob, Done, Outcome};
use super::{db_error, outbox};
use crate::{StoreError, StoreResult};

/// Most jobs in one statement.
const MAX_BATCH: usize = 256;
/// Jobs waiting for a writer; senders wait beyond this (backpressure).
const QUEUE: usize = 4096;
/// A held connection unused this long is pinged before use: PostgreSQL may have restarted.
const IDLE_PING: Duration = Duration::from_secs(1);
/// How long acknowledged outbox rows wait for a write to delete them with; then they are
/// deleted alone. Short beside the relay's threshold (`A2A_OUTBOX_RELAY_AFTER_MS`, 5 s by
/// default), so a row waiting here is not relayed again; and it bounds the lone deletes of an
/// idle gateway to one per linger.
pub(super) const FORGET_LINGER: Duration = Duration::from_millis(100);

type Reply<T> = oneshot::Sender<StoreResult<T>>;
/// What an append did: its new sequence number and whether its task has push configs, or `None`
/// when the sequence or epoch guard refused it.
pub(super) type Applied = Option<(u64, bool)>;

enum Job {
    /// Answers whether the task was created (false: the id exists).
    Create(CreateJob, Reply<bool>),
    /// Answers the new sequence number, or None when the guard refused the write.
    Append(AppendJob, Reply<Applied>),
}

impl Job {
    fn task_id(&self) -> &str {
        match self {
            Job::Create(j, _) => &j.id,
            Job::Append(j, _) => &j.task_id,
        }
    }
}

/// Outbox rows whose commits the bus acknowledged, waiting for the next batch statement.
struct Forget {
    id: u64,
    rows: Vec<(String, u64)>,
    /// The rows the carrying statement deleted, once it committed.
    tx: Reply<u64>,
}

type Forgets = Arc<std::sync::Mutex<Vec<Forget>>>;

fn lock(forgets: &Forgets) -> std::sync::MutexGuard<'_, Vec<Forget>> {
    forgets.lock().unwrap_or_else(|e| e.into_inner())
}

pub(super) struct Writer {
    tx: mpsc::Sender<Job>,
    forgets: Forgets,
    next_forget: AtomicU64,
}

fn writer_gone() -> StoreError {
    StoreError::Internal("the PostgreSQL writer stopped".into())
}

impl Writer {
    /// Starts `writers` writer tasks; they stop when the store (the sender) is dropped.
    pub fn spawn(pool: PgPool, writers: usize) -> Self {
        let (tx, rx) = mpsc::channel(QUEUE);
        let rx = Arc::new(Mutex::new(rx));
        let forgets = Forgets::default();
        for _ in 0..writers.max(1) {
            tokio::spawn(run(pool.clone(), rx.clone(), forgets.clone()));
        }
        Self {
            tx,
            forgets,
            next_forget: AtomicU64::new(0),
        }
    }

    /// Deletes the outbox rows of `commits` (acknowledged by the bus): with the next batch
    /// statement if one starts within [`FORGET_LINGER`], else alone on `alone` (the outbox's
    /// pool). Answers once the rows are deleted, with how many were. A carrying statement that
    /// fails hands them to a lone delete too; rows a relay pass holds are left to it.
    pub async fn forget(&self, alone: &PgPool, commits: &[(String, u64)]) -> StoreResult<u64> {
        if commits.is_empty() {
            return Ok(0);
        }
        let id = self.next_forget.fetch_add(1, Ordering::Relaxed);
        let (tx, mut rx) = oneshot::channel();
        lock(&self.forgets).push(Forget {
            id,
            rows: commits.to_vec(),
            tx,
        });
        let answer = match tokio::time::timeout(FORGET_LINGER, &mut rx).await {
            Ok(answer) => answer,
            Err(_) => {
                // No write took them: taken back and deleted alone, unless a writer took them
                // meanwhile (its statement is running: its answer comes).
                let mine = {
                    let mut forgets = lock(&self.forgets);
                    let at = forgets.iter().position(|f| f.id == id);
                    at.map(|i| forgets.swap_remove(i))
                };
                if mine.is_some() {
                    return outbox::delete(alone, commits).await;
                }
                rx.await
            }
        };
        match answer {
            Ok(Ok(deleted)) => Ok(deleted),
            // The carrying statement failed (its jobs are answered with the error), or the
            // writer stopped: the delete is still owed.
            Ok(Err(_)) | Err(_) => outbox::delete(alone, commits).await,
        }
    }

    pub async fn create(&self, job: CreateJob) -> StoreResult<bool> {
        let (tx, rx) = oneshot::channel();
        self.tx
            .send(Job::Create(job, tx))
            .await
            .map_err(|_| writer_gone())?;
        rx.await.map_err(|_| writer_gone())?
    }

    /// The new sequence number and whether the task has push configs, or `None` when the
    /// sequence or epoch guard refused the append.
    pub async fn append(&self, job: AppendJob) -> StoreResult<Applied> {
        let (tx, rx) = oneshot::channel();
        self.tx
            .send(Job::Append(job, tx))
            .await
            .map_err(|_| writer_gone())?;
        rx.await.map_err(|_| writer_gone())?
    }
}

/// A writer's connection, held between batches (no pool round trips) and replaced after a
/// failure.
struct Conn {
    conn: Option<(PoolConnection<Postgres>, Instant)>,
    pool: PgPool,
}

impl Conn {
    async fn get(&mut self) -> StoreResult<&mut PoolConnection<Postgres>> {
        if let Some((conn, used)) = &mut self.conn
            && used.elapsed() >= IDLE_PING
            && conn.ping().await.is_err()
        {
            self.discard();
        }
        if self.conn.is_none() {
            let conn = self.pool.acquire().await.map_err(db_error)?;
            self.conn = Some((conn, Instant::now()));
        }
        let (conn, used) = self.conn.as_mut().expect("a connection was just set");
        *used = Instant::now();
        Ok(conn)
    }

    /// Closes the connection instead of returning it: after an error its state is unknown.
    fn discard(&mut self) {
        if let Some((mut conn, _)) = self.conn.take() {
            conn.close_on_drop();
        }
    }

    async fn execute(
        &mut self,
        creates: &[&CreateJob],
        appends: &[&AppendJob],
        published: &[(&str, i64)],
    ) -> StoreResult<Done> {
        let conn = self.get().await?;
        match batch::execute(conn, creates, appends, published).await {
            Ok(done) => Ok(done),
            Err(e) => {
                self.discard();
                Err(db_error(e))
            }
        }
    }
}

async fn run(pool: PgPool, rx: Arc<Mutex<mpsc::Receiver<Job>>>, forgets: Forgets) {
    let mut conn = Conn { conn: None, pool };
    // Jobs for a task that already has a job in the batch wait for the next one.
    let mut carried: VecDeque<Job> = VecDeque::new();
    loop {
        let mut ids = HashSet::new();
        let mut batch = Vec::new();
        for job in std::mem::take(&mut carried) {
            if batch.len() < MAX_BATCH && ids.insert(job.task_id().to_owned()) {
                batch.push(job);
            } else {
                carried.push_back(job);
            }
        }
        {
            let mut rx = rx.lock().await;
            if batch.is_empty() {
                match rx.recv().await {
                    Some(job) => {
                        ids.insert(job.task_id().to_owned());
                        batch.push(job);
                    }
                    None => return,
                }
            }
            while batch.len() < MAX_BATCH {
                let Ok(job) = rx.try_recv() else { break };
                if ids.insert(job.task_id().to_owned()) {
                    batch.push(job);
                } else {
                    carried.push_back(job);
                }
            }
        }
        // Taken last: whatever was acknowledged while the batch gathered rides on it.
        let forget = std::mem::take(&mut *lock(&forgets));
        commit(&mut conn, batch, forget).await;
    }
}

/// Commits a batch (with the outbox rows of `forget`) and answers each job. If the statement
/// fails for a reason other than the connection, each job is retried alone, so one bad job
/// cannot fail the others; the rows of `forget` are then answered with the error, and their
/// callers delete them alone.
async fn commit(conn: &mut Conn, batch: Vec<Job>, forget: Vec<Forget>) {
    let (mut creates, mut appends) = (Vec::new(), Vec::new());
    for job in batch {
        match job {
            Job::Create(j, tx) => creates.push((j, tx)),
            Job::Append(j, tx) => appends.push((j, tx)),
        }
    }
    let c: Vec<&CreateJob> = creates.iter().map(|(j, _)| j).collect();
    let a: Vec<&AppendJob> = appends.iter().map(|(j, _)| j).collect();
    let published: Vec<(&str, i64)> = forget
        .iter()
        .flat_map(|f| &f.rows)
        .map(|(t, s)| (t.as_str(), i64::try_from(*s).unwrap_or(i64::MAX)))
        .collect();
    let result = conn.execute(&c, &a, &published).await;
    match &result {
        Ok(done) => answer_forgets(forget, &done.forgotten),
        Err(e) => {
            for f in forget {
                let _ = f.tx.send(Err(e.clone()));
            }
        }
    }
    let alone = match result {
        Ok(done) => {
            answer(creates, appends, &done.outcome);
            return;
        }
        Err(e) if c.len() + a.len() == 1 || matches!(e, StoreError::Unavailable(_)) => {
            for (_, tx) in creates {
                let _ = tx.send(Err(e.clone()));
            }
            for (_, tx) in appends {
                let _ = tx.send(Err(e.clone()));
            }
            return;
        }
        Err(_) => (creates, appends),
    };
    for (job, tx) in alone.0 {
        let result = conn.execute(&[&job], &[], &[]).await;
        let _ = tx.send(result.map(|d| d.outcome.contains_key(&job.id)));
    }
    for (job, tx) in alone.1 {
        let result = conn.execute(&[], &[&job], &[]).await;
        let _ = tx.send(result.map(|d| applied_seq(&d.outcome, &job.task_id)));
    }
}

/// Answers each caller of [`Writer::forget`] with how many of its rows the statement deleted.
fn answer_forgets(forget: Vec<Forget>, deleted: &[(String, i64)]) {
    let deleted: HashSet<(&str, i64)> = deleted.iter().map(|(t, s)| (t.as_str(), *s)).collect();
    for f in forget {
        let n = f
            .rows
            .iter()
            .filter(|(t, s)| deleted.contains(&(t.as_str(), i64::try_from(*s).unwrap_or(i64::MAX))))
            .count();
        let _ = f.tx.send(Ok(n as u64));
    }
}

fn answer(
    creates: Vec<(CreateJob, Reply<bool>)>,
    appends: Vec<(AppendJob, Reply<Applied>)>,
    outcome: &Outcome,
) {
    for (job, tx) in creates {
        let _ = tx.send(Ok(outcome.contains_key(&job.id)));
    }
    for (job, tx) in appends {
        let _ = tx.send(Ok(applied_seq(outcome, &job.task_id)));
    }
}

fn applied_seq(outcome: &Outcome, task_id: &str) -> Applied {
    outcome
        .get(task_id)
        .and_then(|&(seq, push)| Some((u64::try_from(seq).ok()?, push)))
}
