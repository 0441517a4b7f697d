//! The write path: creates and appends are queued to a few writer tasks; each takes everything
//! queued at that moment (at most one job per task) and commits it as one statement
//! (`batch::execute`).
//!
//! Why: a task costs several durable writes (created, artifact, completed), and on a small
//! machine PostgreSQL's per-statement cost (bind, execute, commit, WAL flush, round trip) is the
//! ceiling. Under load one statement carries many tasks' events, so that cost is shared; with one
//! request in flight a batch is one job and nothing waits. Each job keeps its own sequence guard.

use std::collections::{HashSet, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sqlx::Connection;
use sqlx::pool::PoolConnection;
use sqlx::postgres::{PgPool, Postgres};
use tokio::sync::{Mutex, mpsc, oneshot};

use super::batch::{self, AppendJob, CreateJob, Outcome};
use super::db_error;
use crate::{StoreError, StoreResult};

/// Most jobs in one statement.
const MAX_BATCH: usize = 256;
/// Jobs waiting for a writer; senders wait beyond this (backpressure).
const QUEUE: usize = 4096;
/// A held connection unused this long is pinged before use: PostgreSQL may have restarted.
const IDLE_PING: Duration = Duration::from_secs(1);

type Reply<T> = oneshot::Sender<StoreResult<T>>;

enum Job {
    /// Answers whether the task was created (false: the id exists).
    Create(CreateJob, Reply<bool>),
    /// Answers the new sequence number, or None when the guard refused the write.
    Append(AppendJob, Reply<Option<u64>>),
}

impl Job {
    fn task_id(&self) -> &str {
        match self {
            Job::Create(j, _) => &j.id,
            Job::Append(j, _) => &j.task_id,
        }
    }
}

pub(super) struct Writer {
    tx: mpsc::Sender<Job>,
}

fn writer_gone() -> StoreError {
    StoreError::Internal("the PostgreSQL writer stopped".into())
}

impl Writer {
    /// Starts `writers` writer tasks; they stop when the store (the sender) is dropped.
    pub fn spawn(pool: PgPool, writers: usize) -> Self {
        let (tx, rx) = mpsc::channel(QUEUE);
        let rx = Arc::new(Mutex::new(rx));
        for _ in 0..writers.max(1) {
            tokio::spawn(run(pool.clone(), rx.clone()));
        }
        Self { tx }
    }

    pub async fn create(&self, job: CreateJob) -> StoreResult<bool> {
        let (tx, rx) = oneshot::channel();
        self.tx
            .send(Job::Create(job, tx))
            .await
            .map_err(|_| writer_gone())?;
        rx.await.map_err(|_| writer_gone())?
    }

    pub async fn append(&self, job: AppendJob) -> StoreResult<Option<u64>> {
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
    ) -> StoreResult<Outcome> {
        let conn = self.get().await?;
        match batch::execute(conn, creates, appends).await {
            Ok(outcome) => Ok(outcome),
            Err(e) => {
                self.discard();
                Err(db_error(e))
            }
        }
    }
}

async fn run(pool: PgPool, rx: Arc<Mutex<mpsc::Receiver<Job>>>) {
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
        commit(&mut conn, batch).await;
    }
}

/// Commits a batch and answers each job. If the statement fails for a reason other than the
/// connection, each job is retried alone, so one bad job cannot fail the others.
async fn commit(conn: &mut Conn, batch: Vec<Job>) {
    let (mut creates, mut appends) = (Vec::new(), Vec::new());
    for job in batch {
        match job {
            Job::Create(j, tx) => creates.push((j, tx)),
            Job::Append(j, tx) => appends.push((j, tx)),
        }
    }
    let c: Vec<&CreateJob> = creates.iter().map(|(j, _)| j).collect();
    let a: Vec<&AppendJob> = appends.iter().map(|(j, _)| j).collect();
    let result = conn.execute(&c, &a).await;
    let alone = match result {
        Ok(outcome) => {
            answer(creates, appends, &outcome);
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
        let result = conn.execute(&[&job], &[]).await;
        let _ = tx.send(result.map(|o| o.contains_key(&job.id)));
    }
    for (job, tx) in alone.1 {
        let result = conn.execute(&[], &[&job]).await;
        let _ = tx.send(result.map(|o| applied_seq(&o, &job.task_id)));
    }
}

fn answer(
    creates: Vec<(CreateJob, Reply<bool>)>,
    appends: Vec<(AppendJob, Reply<Option<u64>>)>,
    outcome: &Outcome,
) {
    for (job, tx) in creates {
        let _ = tx.send(Ok(outcome.contains_key(&job.id)));
    }
    for (job, tx) in appends {
        let _ = tx.send(Ok(applied_seq(outcome, &job.task_id)));
    }
}

fn applied_seq(outcome: &Outcome, task_id: &str) -> Option<u64> {
    outcome
        .get(task_id)
        .and_then(|&seq| u64::try_from(seq).ok())
}
