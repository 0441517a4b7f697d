//! Where a phase of a scenario spent the machine: CPU time of each kind of process of the
//! topology (from `/proc/<pid>/stat`; PostgreSQL with its backends), PostgreSQL's committed
//! transactions, and the workers' pipeline gauges and counters. Printed per phase, so a latency
//! that grew can be told apart: a process that works harder, or one that waits.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::topology::Topology;

/// Clock ticks per second of `/proc/<pid>/stat` (`getconf CLK_TCK`: 100 on Linux).
const TICKS: f64 = 100.0;

/// Worker metrics worth a line: what the pipeline holds and what it deferred or retried.
const WORKER_METRICS: &[&str] = &[
    "a2a_worker_tasks_in_delivery",
    "a2a_worker_queued_events",
    "a2a_worker_in_flight",
    "a2a_worker_attempts_waiting",
    "a2a_worker_destinations_active",
    "a2a_worker_left_to_holder_total",
    "a2a_worker_lease_kept_total",
    "a2a_worker_deferred_total",
    "a2a_worker_attempts_total",
    "a2a_worker_sweep_behind_total",
];

/// One sample.
pub struct Usage {
    at: Instant,
    /// CPU seconds per kind of process.
    cpu: BTreeMap<&'static str, f64>,
    /// PostgreSQL transactions committed in the topology's database.
    commits: i64,
    /// Worker metric lines (both workers, summed per series).
    worker: BTreeMap<String, f64>,
}

impl Usage {
    pub async fn sample(top: &Topology) -> Self {
        let mut cpu = BTreeMap::new();
        let mut add = |kind: &'static str, pid: Option<u32>| {
            *cpu.entry(kind).or_insert(0.0) += pid.map_or(0.0, cpu_seconds);
        };
        for p in &top.replicas {
            add("gateways", p.pid());
        }
        for p in &top.workers {
            add("workers", p.pid());
        }
        add("upstream", top.upstream.pid());
        add("haproxy", top.haproxy.as_ref().and_then(|h| h.pid()));
        add("test process", Some(std::process::id()));
        if let Some(pm) = top.pg.pid() {
            let tree: f64 = children(pm).into_iter().map(cpu_seconds).sum();
            *cpu.entry("postgresql").or_insert(0.0) += cpu_seconds(pm) + tree;
        }
        let commits = commits(top).await.unwrap_or(-1);
        let mut worker = BTreeMap::new();
        for i in 0..top.workers.len() {
            for (series, v) in worker_metrics(&top.worker_metrics_url(i)).await {
                *worker.entry(series).or_insert(0.0) += v;
            }
        }
        Self {
            at: Instant::now(),
            cpu,
            commits,
            worker,
        }
    }

    /// What happened between `earlier` and this sample: CPU as a share of one core, commits
    /// per second, gauges as they are now and counters' increase.
    pub fn since(&self, earlier: &Usage) -> String {
        let wall = self
            .at
            .duration_since(earlier.at)
            .max(Duration::from_millis(1));
        let secs = wall.as_secs_f64();
        let cpu: Vec<String> = self
            .cpu
            .iter()
            .map(|(k, v)| {
                let before = earlier.cpu.get(k).copied().unwrap_or(0.0);
                format!("{k} {:.0}%", (v - before) / secs * 100.0)
            })
            .collect();
        let worker: Vec<String> = self
            .worker
            .iter()
            .map(|(k, v)| {
                if k.contains("_total") {
                    let before = earlier.worker.get(k).copied().unwrap_or(0.0);
                    format!("{k} +{:.0}", v - before)
                } else {
                    format!("{k} {v:.0}")
                }
            })
            .collect();
        format!(
            "{:.1} s; cpu (of one core): {}; postgresql {:.0} commits/s; workers: {}",
            secs,
            cpu.join(", "),
            (self.commits - earlier.commits) as f64 / secs,
            worker.join(", ")
        )
    }
}

/// User and system CPU seconds of `pid` (0 when it is gone).
fn cpu_seconds(pid: u32) -> f64 {
    stat(pid).map_or(0.0, |(_, ticks)| ticks as f64 / TICKS)
}

/// The parent and CPU ticks of `pid`, from `/proc/<pid>/stat` (the fields after the command,
/// which is in parentheses and may hold spaces).
fn stat(pid: u32) -> Option<(u32, u64)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest: Vec<&str> = text.rsplit_once(')')?.1.split_whitespace().collect();
    let ppid = rest.get(1)?.parse().ok()?;
    let utime: u64 = rest.get(11)?.parse().ok()?;
    let stime: u64 = rest.get(12)?.parse().ok()?;
    Some((ppid, utime + stime))
}

/// The children of `pid` (PostgreSQL's backends and helpers).
fn children(pid: u32) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&p| stat(p).is_some_and(|(ppid, _)| ppid == pid))
        .collect()
}

async fn commits(top: &Topology) -> Option<i64> {
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(1)
        .connect(top.db.url())
        .await
        .ok()?;
    let n: Option<i64> = sqlx::query_scalar(
        "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()",
    )
    .fetch_one(&pool)
    .await
    .ok()?;
    pool.close().await;
    n
}

/// The series of [`WORKER_METRICS`] a worker exports now (name with labels, value).
async fn worker_metrics(url: &str) -> Vec<(String, f64)> {
    let Ok(resp) = reqwest::get(url).await else {
        return Vec::new();
    };
    let text = resp.text().await.unwrap_or_default();
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| WORKER_METRICS.iter().any(|m| l.starts_with(m)))
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            Some((series.to_owned(), value.parse().ok()?))
        })
        .collect()
}
