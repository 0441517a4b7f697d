//! Retention (`[retention]`): how long terminal tasks are kept, and how many tasks the
//! in-memory store holds.
//!
//! A background sweep deletes, every `sweep_interval`, the tasks that became terminal more
//! than `task_ttl` ago, [`BATCH`] per store call, oldest first, with everything stored for them
//! ([`TaskStore::purge_tasks`]); on PostgreSQL one replica sweeps at a time (an advisory lock).
//! The same sweep deletes the dispatch leases of replicas gone for longer than [`LEASE_GRACE`].
//! The in-memory store is bounded as well, by `max_tasks` ([`MemoryTaskStore::with_max_tasks`]),
//! so that an embedded gateway under sustained load keeps a flat memory footprint with the
//! defaults. Tasks that are not terminal are never deleted by either.
//!
//! [`MemoryTaskStore::with_max_tasks`]: a2a_store::MemoryTaskStore::with_max_tasks

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use a2a_store::TaskStore;
use serde::{Deserialize, Deserializer};
use tokio_util::sync::CancellationToken;

/// Tasks deleted per store call: one statement on PostgreSQL, short enough not to hold locks
/// or the write path for long.
pub const BATCH: usize = 1000;
/// A dispatch lease that expired this long ago belongs to a replica that is gone.
pub const LEASE_GRACE: Duration = Duration::from_secs(3600);

/// `[retention]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RetentionConfig {
    /// Terminal tasks are deleted this long after they ended; `None` (`0`) keeps them.
    #[serde(deserialize_with = "ttl")]
    pub task_ttl: Option<Duration>,
    /// Tasks the in-memory store keeps at most (0 = no bound); the oldest terminal tasks are
    /// deleted beyond it. Not used with PostgreSQL.
    pub max_tasks: usize,
    /// Pause between two sweeps.
    #[serde(deserialize_with = "interval")]
    pub sweep_interval: Duration,
}

impl Default for RetentionConfig {
    fn default() -> Self {
        Self {
            task_ttl: Some(7 * DAY),
            // About 300 MiB of tasks like echo's (measured: `loadtest/bench-memory.sh`).
            max_tasks: 100_000,
            sweep_interval: Duration::from_secs(60),
        }
    }
}

const DAY: Duration = Duration::from_secs(86_400);

/// Parses a duration written as a whole number and a unit: `500ms`, `30s`, `15m`, `12h`, `7d`;
/// a bare `0` is zero.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    if text == "0" {
        return Ok(Duration::ZERO);
    }
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .ok_or_else(|| format!("{text:?} has no unit (ms, s, m, h or d), e.g. \"7d\""))?;
    let (number, unit) = text.split_at(split);
    let n: u64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a whole number and a unit, e.g. \"7d\""))?;
    let unit_ms = match unit {
        "ms" => 1,
        "s" => 1000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => return Err(format!("{text:?}: the unit must be ms, s, m, h or d")),
    };
    n.checked_mul(unit_ms)
        .map(Duration::from_millis)
        .ok_or_else(|| format!("{text:?} is too long"))
}

/// A duration as TOML writes it: a string with a unit, or the integer 0.
#[derive(Deserialize)]
#[serde(untagged)]
enum Written {
    Text(String),
    Number(u64),
}

/// A duration setting as TOML writes it: a string with a unit (see [`parse_duration`]) or 0.
pub(crate) fn duration<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    written(d)
}

fn written<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    use serde::de::Error;
    match Written::deserialize(d)? {
        Written::Text(text) => parse_duration(&text).map_err(D::Error::custom),
        Written::Number(0) => Ok(Duration::ZERO),
        Written::Number(n) => Err(D::Error::custom(format!(
            "{n} needs a unit: write e.g. \"{n}s\" or \"{n}d\""
        ))),
    }
}

fn ttl<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
    written(d).map(|t| (!t.is_zero()).then_some(t))
}

fn interval<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    use serde::de::Error;
    let every = written(d)?;
    if every < Duration::from_millis(100) {
        return Err(D::Error::custom("must be at least 100ms"));
    }
    Ok(every)
}

/// Starts the sweep: every `sweep_interval` until `shutdown`, the expired terminal tasks
/// (counted as `a2a_retention_deleted_tasks_total{reason="task_ttl"}`) and the stale leases.
pub fn start(store: Arc<dyn TaskStore>, config: &RetentionConfig, shutdown: CancellationToken) {
    let (ttl, every) = (config.task_ttl, config.sweep_interval);
    tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(every) => {}
            }
            if let Some(ttl) = ttl {
                sweep_tasks(&*store, SystemTime::now() - ttl, &shutdown).await;
            }
            match store.purge_stale_leases(LEASE_GRACE).await {
                Ok(0) => {}
                Ok(n) => tracing::info!(leases = n, "dispatch leases of stopped replicas deleted"),
                Err(e) => tracing::warn!(error = %e, "cannot delete stale dispatch leases"),
            }
        }
    });
}

/// Deletes the tasks that ended before `before`, a batch at a time, until none is left (or
/// another replica holds the sweep: then it gets 0 and waits for the next round).
async fn sweep_tasks(store: &dyn TaskStore, before: SystemTime, shutdown: &CancellationToken) {
    let mut total = 0;
    while !shutdown.is_cancelled() {
        match store.purge_tasks(before, BATCH).await {
            Ok(n) => {
                metrics::counter!("a2a_retention_deleted_tasks_total", "reason" => "task_ttl")
                    .increment(n);
                total += n;
                if n < BATCH as u64 {
                    break;
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot delete expired tasks");
                break;
            }
        }
    }
    if total > 0 {
        tracing::debug!(tasks = total, "expired terminal tasks deleted");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_take_a_unit() {
        assert_eq!(parse_duration("7d"), Ok(7 * DAY));
        assert_eq!(parse_duration("12h"), Ok(Duration::from_secs(12 * 3600)));
        assert_eq!(parse_duration("30m"), Ok(Duration::from_secs(1800)));
        assert_eq!(parse_duration("45s"), Ok(Duration::from_secs(45)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
        for bad in ["7", "d", "7 d", "1.5h", "7w", "-1d", ""] {
            assert!(parse_duration(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn the_section_parses_with_defaults_and_zero_keeps() {
        let parse = |s: &str| toml::from_str::<RetentionConfig>(s);
        let d = parse("").unwrap();
        assert_eq!(d.task_ttl, Some(7 * DAY));
        assert_eq!(d.max_tasks, 100_000);
        assert_eq!(d.sweep_interval, Duration::from_secs(60));
        assert_eq!(parse("task_ttl = 0").unwrap().task_ttl, None);
        assert_eq!(parse("task_ttl = \"0\"").unwrap().task_ttl, None);
        let c = parse("task_ttl = \"12h\"\nmax_tasks = 0\nsweep_interval = \"5s\"").unwrap();
        assert_eq!(c.task_ttl, Some(Duration::from_secs(12 * 3600)));
        assert_eq!(c.max_tasks, 0);
        assert_eq!(c.sweep_interval, Duration::from_secs(5));
        let err = parse("task_ttl = 7").unwrap_err().to_string();
        assert!(err.contains("needs a unit"), "{err}");
        assert!(parse("sweep_interval = \"10ms\"").is_err());
        assert!(parse("ttl = \"7d\"").is_err(), "unknown keys are refused");
    }
}
