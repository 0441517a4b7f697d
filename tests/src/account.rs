//! Loss accounting after a scenario, from the clients' ledger and the database: every
//! acknowledged send has its task, every task's event log is gap-free and ends terminal, every
//! followed stream saw the log's events in order with no gap (duplicates after a resume are
//! counted apart), every event of a task with a push config reached the receiver at least once in
//! order, no task is left SUBMITTED/WORKING, no idempotency key made two tasks, and no turn ran
//! twice upstream ([`crate::upstream`]).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use a2a_store::{PgOptions, PgTaskStore, TaskStore};
use a2a_testing::receiver::{Received, describe, task_id_of};
use sqlx::Row;

use crate::load::{LedgerInner, is_terminal, state_of};
use crate::topology::Topology;

/// How long the system may take, after the load stopped, to settle (takeovers finishing,
/// push deliveries catching up) before what is missing counts as lost.
const SETTLE: Duration = Duration::from_secs(45);

/// One row of the table.
#[derive(Debug, Clone, Default)]
pub struct Report {
    pub scenario: String,
    pub operations: u64,
    pub retries: u64,
    pub errors: BTreeMap<String, u64>,
    pub duplicates: u64,
    /// Streams broken and resumed (SubscribeToTask after the last event seen).
    pub resumed: u64,
    /// Everything lost or wrong, one line each; empty when nothing was.
    pub lost: Vec<String>,
    pub tasks: usize,
    pub streams: usize,
    pub pushed: usize,
    /// Turns the upstream ran, and how many of them more than once (each also a `lost` line).
    pub upstream_turns: usize,
    pub twice: usize,
}

impl Report {
    pub fn line(&self) -> String {
        let errors = if self.errors.is_empty() {
            "-".to_owned()
        } else {
            self.errors
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(" ")
        };
        format!(
            "| {:<16} | {:>5} | {:>5} | {:>7} | {:>7} | {:>7} | {:>6} | {:>5} | {:>5} | {:>4} | {} |",
            self.scenario,
            self.operations,
            self.tasks,
            self.retries,
            self.streams,
            self.resumed,
            self.pushed,
            self.duplicates,
            self.twice,
            self.lost.len(),
            errors
        )
    }

    pub fn header() -> String {
        format!(
            "| {:<16} | {:>5} | {:>5} | {:>7} | {:>7} | {:>7} | {:>6} | {:>5} | {:>5} | {:>4} | errors by kind |\n|{}|",
            "scenario",
            "ops",
            "tasks",
            "retries",
            "streams",
            "resumed",
            "pushed",
            "dups",
            "twice",
            "lost",
            "-".repeat(116)
        )
    }
}

struct Logged {
    state: i32,
    seq: u64,
    events: Vec<(u64, String)>,
}

/// Every task of the run with its event log, read through the gateway's own store code.
async fn logged(pool: &sqlx::PgPool, store: &PgTaskStore) -> BTreeMap<String, Logged> {
    let mut out: BTreeMap<String, Logged> = BTreeMap::new();
    for row in sqlx::query("SELECT id, owner, state, seq FROM tasks")
        .fetch_all(pool)
        .await
        .expect("tasks read")
    {
        let id: String = row.get("id");
        let owner: String = row.get("owner");
        let events = store
            .events_after(&owner, &id, 0)
            .await
            .expect("an event log reads")
            .into_iter()
            .map(|e| {
                let v = serde_json::to_value(&e.event).expect("ProtoJSON");
                (e.seq, describe(&v))
            })
            .collect();
        out.insert(
            id,
            Logged {
                state: i32::from(row.get::<i16, _>("state")),
                seq: row.get::<i64, _>("seq") as u64,
                events,
            },
        );
    }
    out
}

fn running(state: i32) -> bool {
    state == 1 || state == 2
}

/// Whether `want` occurs in `got` in order (other items, duplicates, between them allowed).
fn in_order(want: &[String], got: &[String]) -> bool {
    let mut it = got.iter();
    want.iter().all(|w| it.any(|g| g == w))
}

pub async fn account(scenario: &str, top: &Topology, ledger: &LedgerInner) -> Report {
    let mut report = Report {
        scenario: scenario.to_owned(),
        operations: ledger.operations,
        retries: ledger.retries,
        errors: ledger.errors.clone(),
        ..Report::default()
    };
    report
        .lost
        .extend(ledger.failures.iter().map(|f| format!("failed: {f}")));
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(2)
        .connect(top.db.url())
        .await
        .expect("the test database answers");
    let store =
        PgTaskStore::connect_lazy(top.db.url(), &PgOptions::default()).expect("a task store");

    // Settle: no running task, and every push task's log at the receiver.
    let acked: BTreeMap<&str, bool> = ledger
        .acked
        .iter()
        .map(|a| (a.id.as_str(), a.push))
        .collect();
    let deadline = Instant::now() + SETTLE;
    let (tasks, received) = loop {
        let tasks = logged(&pool, &store).await;
        let received = by_task(&top.receiver.requests());
        let settled = tasks.values().all(|t| !running(t.state))
            && acked.iter().filter(|(_, push)| **push).all(|(id, _)| {
                let want: Vec<String> = tasks
                    .get(*id)
                    .map(|t| t.events.iter().map(|e| e.1.clone()).collect())
                    .unwrap_or_default();
                in_order(&want, received.get(*id).map_or(&[][..], |v| &v[..]))
            });
        if settled || Instant::now() > deadline {
            break (tasks, received);
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    report.tasks = tasks.len();

    for (id, t) in &tasks {
        if running(t.state) {
            report
                .lost
                .push(format!("task {id} still running (state {})", t.state));
        }
        let seqs: Vec<u64> = t.events.iter().map(|e| e.0).collect();
        if seqs != (1..=t.seq).collect::<Vec<_>>() {
            report.lost.push(format!(
                "task {id}: event log {seqs:?} is not 1..={}",
                t.seq
            ));
        }
        if !acked.contains_key(id.as_str()) {
            report.lost.push(format!(
                "task {id} exists but no client was answered with it (created twice?)"
            ));
        }
    }
    for (id, push) in &acked {
        let Some(t) = tasks.get(*id) else {
            report
                .lost
                .push(format!("acknowledged task {id} is not in the database"));
            continue;
        };
        let last = t.events.last().map(|e| e.1.as_str()).unwrap_or_default();
        // COMPLETED, FAILED, CANCELED, REJECTED.
        if ![3, 4, 5, 7].contains(&t.state) {
            report
                .lost
                .push(format!("acknowledged task {id} ended in state {}", t.state));
        }
        if !is_terminal(&state_name(last)) {
            report.lost.push(format!(
                "task {id}: the log ends with {last:?}, not a terminal state"
            ));
        }
        if *push {
            report.pushed += 1;
            let want: Vec<String> = t.events.iter().map(|e| e.1.clone()).collect();
            let got = received.get(*id).cloned().unwrap_or_default();
            if !in_order(&want, &got) {
                report.lost.push(format!(
                    "task {id}: the webhook got {got:?}, the log is {want:?}"
                ));
            }
            report.duplicates += got.len().saturating_sub(want.len()) as u64;
        }
    }
    for (key, ids) in &ledger.keys {
        if ids.len() > 1 {
            report
                .lost
                .push(format!("Idempotency-Key {key} answered with tasks {ids:?}"));
        }
    }
    for f in &ledger.followed {
        report.streams += 1;
        report.duplicates += f.duplicates;
        report.resumed += f.resumes;
        let Some(t) = tasks.get(&f.task_id) else {
            report.lost.push(format!(
                "followed task {} is not in the database",
                f.task_id
            ));
            continue;
        };
        let log: BTreeMap<u64, &String> = t.events.iter().map(|(s, d)| (*s, d)).collect();
        let seqs: Vec<u64> = f.events.iter().map(|e| e.0).collect();
        let expected: Vec<u64> = if f.ended_terminal {
            (1..=t.seq).collect()
        } else {
            (1..=seqs.len() as u64).collect()
        };
        if seqs != expected {
            report.lost.push(format!(
                "stream of {}: saw events {seqs:?}, the log has 1..={}",
                f.task_id, t.seq
            ));
        }
        for (seq, desc) in &f.events {
            if log.get(seq).map(|d| d.as_str()) != Some(desc.as_str()) {
                report.lost.push(format!(
                    "stream of {}: event {seq} was {desc:?}, the log says {:?}",
                    f.task_id,
                    log.get(seq)
                ));
            }
        }
    }
    match crate::upstream::ran(top.upstream_port).await {
        Ok(ran) => {
            report.upstream_turns = ran.turns;
            report.twice = ran.twice.len();
            for (message, n) in &ran.twice {
                report.lost.push(format!(
                    "the turn of message {message} ran {n} times upstream"
                ));
            }
        }
        Err(e) => report.lost.push(format!("the upstream's turns: {e}")),
    }
    pool.close().await;
    report
}

/// The state a description names (`task X`, `status X`), for the terminal check.
fn state_name(desc: &str) -> String {
    let v = desc
        .strip_prefix("task ")
        .or(desc.strip_prefix("status "))
        .unwrap_or_default();
    state_of(&serde_json::json!({"status": {"state": v}})).to_owned()
}

/// The receiver's deliveries, described, per task in arrival order.
fn by_task(requests: &[Received]) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for r in requests.iter().filter(|r| r.status < 300) {
        out.entry(task_id_of(&r.json).to_owned())
            .or_default()
            .push(describe(&r.json));
    }
    out
}
