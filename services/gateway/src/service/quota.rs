//! Per-owner quotas (`[limits.quotas]`): what one caller may hold at once, so that nothing one
//! caller does can take the gateway from the others.
//!
//! Open streams, running turns and blocking sends are counted in this process (per replica):
//! each is a [`QuotaGuard`] held by what it counts (the stream, the turn's runner, the waiting
//! send) and dropped with it on every path: completion, error, client disconnect, cancel, panic.
//! Push configs are counted in the task store, atomically with their creation, so that the
//! limit holds across replicas (`a2a_store::PushQuota`).
//!
//! What an owner stores is counted in the task store, so that it holds across replicas: its
//! tasks that are not terminal (`open_tasks_per_owner`: running and interrupted ones) and the
//! bytes of its messages and artifacts (`stored_bytes_per_owner`), checked when a caller's
//! message would create or continue a task ([`Quotas::check_stored`]). Interrupted tasks
//! expire after `interrupted_task_ttl` (see `A2aService::expire_interrupted`).
//!
//! A refusal is [`A2aError::QuotaExceeded`] naming the config key, counted in
//! `a2a_quota_refusals_total{quota}`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use a2a_store::{OwnerUsage, TaskStore};
use a2a_types::A2aError;
use serde::{Deserialize, Deserializer};

/// `[limits.quotas]`: what one owner (authenticated principal) may hold at once; 0 = no limit.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct QuotaConfig {
    /// Open SSE and gRPC server streams (SendStreamingMessage, SubscribeToTask), per replica.
    pub streams_per_owner: u64,
    /// Turns running (an agent working on a task, queued turns included), per replica.
    pub running_turns_per_owner: u64,
    /// Blocking SendMessage calls waiting for their task, per replica.
    pub blocking_sends_per_owner: u64,
    /// Push configs of one task (all replicas: counted in the store).
    pub push_configs_per_task: u64,
    /// Push configs of all of an owner's tasks (all replicas: counted in the store).
    pub push_configs_per_owner: u64,
    /// Tasks of one owner that are not terminal, interrupted ones included (all replicas:
    /// counted in the store); a message that would create one more is refused.
    pub open_tasks_per_owner: u64,
    /// Bytes of the messages and artifacts of all of one owner's stored tasks (all replicas:
    /// counted in the store); a message that would take them past it is refused.
    pub stored_bytes_per_owner: u64,
    /// A task waiting for input (INPUT_REQUIRED, AUTH_REQUIRED) longer than this is CANCELED
    /// by the gateway, saying so in its status message; `0` = never.
    #[serde(deserialize_with = "ttl")]
    pub interrupted_task_ttl: Option<Duration>,
}

fn ttl<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
    crate::retention::duration(d).map(|t| (!t.is_zero()).then_some(t))
}

impl Default for QuotaConfig {
    fn default() -> Self {
        Self {
            // A fifth of the default `max_streams`: one caller cannot take them all.
            streams_per_owner: 2_000,
            running_turns_per_owner: 1_000,
            blocking_sends_per_owner: 1_000,
            push_configs_per_task: 10,
            push_configs_per_owner: 10_000,
            open_tasks_per_owner: 10_000,
            stored_bytes_per_owner: 1 << 30,
            interrupted_task_ttl: Some(Duration::from_secs(86_400)),
        }
    }
}

/// The quotas counted in this process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Quota {
    Streams,
    RunningTurns,
    BlockingSends,
}

impl Quota {
    const COUNT: usize = 3;

    fn index(self) -> usize {
        match self {
            Self::Streams => 0,
            Self::RunningTurns => 1,
            Self::BlockingSends => 2,
        }
    }

    /// The config key, as refusals and the metric name it.
    pub(crate) fn key(self) -> &'static str {
        match self {
            Self::Streams => "streams_per_owner",
            Self::RunningTurns => "running_turns_per_owner",
            Self::BlockingSends => "blocking_sends_per_owner",
        }
    }

    fn limit(self, config: &QuotaConfig) -> u64 {
        match self {
            Self::Streams => config.streams_per_owner,
            Self::RunningTurns => config.running_turns_per_owner,
            Self::BlockingSends => config.blocking_sends_per_owner,
        }
    }
}

/// The refusal of `quota` at `limit`, counted.
pub(crate) fn refusal(quota: &str, limit: u64) -> A2aError {
    metrics::counter!("a2a_quota_refusals_total", "quota" => quota.to_owned()).increment(1);
    A2aError::QuotaExceeded {
        quota: quota.to_owned(),
        limit,
    }
}

/// What each owner holds in this process, by quota.
pub(crate) struct Quotas {
    config: QuotaConfig,
    /// Per owner, the units held of each [`Quota`] (indexed by [`Quota::index`]); keyed by the
    /// owner alone so that a lookup borrows the caller's `&str` (no allocation per request). An
    /// entry is removed when all its counts fall to 0, so the map holds only owners holding
    /// something. Hashed with foldhash: owners are authenticated principals, not a
    /// caller's free choice, and the map is touched several times per request.
    held: Mutex<HashMap<String, [u64; Quota::COUNT], foldhash::fast::RandomState>>,
    /// What the store said each recent owner holds, plus what this process let them add since
    /// (see [`Quotas::check_stored`]); at most [`USAGE_CACHE`] owners, the least used evicted
    /// one at a time (`a2a_quota_usage_cache_entries`).
    /// A remembered figure is shared (`Arc`) and moved with atomics, so a message that it
    /// answers costs one cache lookup and no cache write.
    usage: quick_cache::sync::Cache<String, Arc<Seen>>,
}

/// Owners whose usage is remembered.
const USAGE_CACHE: usize = 10_000;
/// How long a remembered usage may answer without asking the store.
const USAGE_FRESH: Duration = Duration::from_secs(1);

struct Seen {
    at: Instant,
    open_tasks: AtomicU64,
    bytes: AtomicU64,
}

impl Seen {
    fn usage(&self) -> OwnerUsage {
        OwnerUsage {
            open_tasks: self.open_tasks.load(Ordering::Relaxed),
            bytes: self.bytes.load(Ordering::Relaxed),
        }
    }
}

/// Whether `used` is below half of `limit` (0 = no limit): far enough that a remembered
/// figure may answer.
fn far_below(used: u64, limit: u64) -> bool {
    limit == 0 || used < limit / 2
}

impl Quotas {
    pub(crate) fn new(config: QuotaConfig) -> Arc<Self> {
        Arc::new(Self {
            config,
            held: Mutex::new(HashMap::default()),
            usage: quick_cache::sync::Cache::new(USAGE_CACHE),
        })
    }

    /// Checks that `owner` may store a message of `bytes` bytes, in a new task when
    /// `new_task`: refused with `open_tasks_per_owner` when it holds that many tasks that are
    /// not terminal, with `stored_bytes_per_owner` when the message would take its stored
    /// bytes past that. The store is asked unless a figure it gave within [`USAGE_FRESH`],
    /// plus what this process let the owner add since, is below half of each limit: an owner
    /// far from its limits costs a store read per second per replica, one near them a read per
    /// message. (Across replicas the check is as exact as the store's figure is fresh: other
    /// replicas may add what they let through meanwhile.)
    pub(crate) async fn check_stored(
        &self,
        store: &dyn TaskStore,
        owner: &str,
        new_task: bool,
        bytes: u64,
    ) -> Result<(), A2aError> {
        let (open_limit, bytes_limit) = (
            self.config.open_tasks_per_owner,
            self.config.stored_bytes_per_owner,
        );
        if open_limit == 0 && bytes_limit == 0 {
            return Ok(());
        }
        let now = Instant::now();
        let add = |mut usage: OwnerUsage| {
            usage.open_tasks += u64::from(new_task);
            usage.bytes = usage.bytes.saturating_add(bytes);
            usage
        };
        if let Some(seen) = self.usage.get(owner)
            && now.duration_since(seen.at) < USAGE_FRESH
        {
            let after = add(seen.usage());
            if far_below(after.open_tasks, open_limit) && far_below(after.bytes, bytes_limit) {
                seen.open_tasks
                    .fetch_add(u64::from(new_task), Ordering::Relaxed);
                seen.bytes.fetch_add(bytes, Ordering::Relaxed);
                return Ok(());
            }
        }
        let usage = store.usage(owner, open_limit).await.map_err(|e| match e {
            a2a_store::StoreError::Unavailable(m) => A2aError::Unavailable(m),
            e => A2aError::Internal(e.to_string()),
        })?;
        if new_task && open_limit > 0 && usage.open_tasks >= open_limit {
            return Err(refusal("open_tasks_per_owner", open_limit));
        }
        if bytes_limit > 0 && usage.bytes.saturating_add(bytes) > bytes_limit {
            return Err(refusal("stored_bytes_per_owner", bytes_limit));
        }
        self.remember(owner, now, add(usage));
        Ok(())
    }

    /// A task of `owner` that [`Quotas::check_stored`] counted as open is no longer (its turn
    /// ended it, or never created it): the remembered figure goes down with it. Without this,
    /// every message an owner sends within [`USAGE_FRESH`] would count as one more open task
    /// until the next store read, so an owner sending more than half of `open_tasks_per_owner`
    /// a second (a load test does thousands) would pay a store read per message though it
    /// holds hardly any open task. Another replica's ends are seen at the next read.
    pub(crate) fn task_closed(&self, owner: &str) {
        if self.config.open_tasks_per_owner == 0 {
            return;
        }
        if let Some(seen) = self.usage.get(owner) {
            let _ = seen
                .open_tasks
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
        }
    }

    fn remember(&self, owner: &str, at: Instant, usage: OwnerUsage) {
        let seen = Seen {
            at,
            open_tasks: AtomicU64::new(usage.open_tasks),
            bytes: AtomicU64::new(usage.bytes),
        };
        self.usage.insert(owner.to_owned(), Arc::new(seen));
        metrics::gauge!("a2a_quota_usage_cache_entries").set(self.usage.len() as f64);
    }

    pub(crate) fn config(&self) -> &QuotaConfig {
        &self.config
    }

    /// Takes one unit of `quota` for `owner`, or refuses when the owner holds the limit already.
    pub(crate) fn acquire(
        self: &Arc<Self>,
        quota: Quota,
        owner: &str,
    ) -> Result<QuotaGuard, A2aError> {
        let limit = quota.limit(&self.config);
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        let count = held.get(owner).map_or(0, |c| c[quota.index()]);
        if limit > 0 && count >= limit {
            drop(held);
            return Err(refusal(quota.key(), limit));
        }
        Self::add(&mut held, quota, owner);
        drop(held);
        Ok(self.guard(quota, owner))
    }

    /// Takes one unit without checking the limit: for work that must not be refused (a turn
    /// taken over from a replica that died), which still counts against the owner's later
    /// requests.
    pub(crate) fn force(self: &Arc<Self>, quota: Quota, owner: &str) -> QuotaGuard {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        Self::add(&mut held, quota, owner);
        drop(held);
        self.guard(quota, owner)
    }

    fn add(
        held: &mut HashMap<String, [u64; Quota::COUNT], foldhash::fast::RandomState>,
        quota: Quota,
        owner: &str,
    ) {
        match held.get_mut(owner) {
            Some(counts) => counts[quota.index()] += 1,
            None => {
                let mut counts = [0; Quota::COUNT];
                counts[quota.index()] = 1;
                held.insert(owner.to_owned(), counts);
            }
        }
    }

    fn guard(self: &Arc<Self>, quota: Quota, owner: &str) -> QuotaGuard {
        QuotaGuard {
            quotas: self.clone(),
            quota,
            owner: owner.to_owned(),
        }
    }

    /// How many units of `quota` `owner` holds now (tests).
    #[cfg(test)]
    fn held(&self, quota: Quota, owner: &str) -> u64 {
        let held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        held.get(owner).map_or(0, |c| c[quota.index()])
    }
}

/// One unit of a quota, given back when dropped.
pub(crate) struct QuotaGuard {
    quotas: Arc<Quotas>,
    quota: Quota,
    owner: String,
}

impl Drop for QuotaGuard {
    fn drop(&mut self) {
        let mut held = self.quotas.held.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(counts) = held.get_mut(self.owner.as_str()) {
            let count = &mut counts[self.quota.index()];
            *count = count.saturating_sub(1);
            if counts.iter().all(|&c| c == 0) {
                held.remove(self.owner.as_str());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quotas(streams: u64) -> Arc<Quotas> {
        Quotas::new(QuotaConfig {
            streams_per_owner: streams,
            ..QuotaConfig::default()
        })
    }

    #[test]
    fn refuses_past_the_limit_and_frees_on_drop() {
        let q = quotas(2);
        let a = q.acquire(Quota::Streams, "alice").unwrap();
        let _b = q.acquire(Quota::Streams, "alice").unwrap();
        let err = q.acquire(Quota::Streams, "alice").err().unwrap();
        assert_eq!(
            err,
            A2aError::QuotaExceeded {
                quota: "streams_per_owner".into(),
                limit: 2
            }
        );
        // Another owner, and another quota, are counted apart.
        let _c = q.acquire(Quota::Streams, "bob").unwrap();
        let _d = q.acquire(Quota::RunningTurns, "alice").unwrap();
        drop(a);
        assert_eq!(q.held(Quota::Streams, "alice"), 1);
        let _e = q.acquire(Quota::Streams, "alice").unwrap();
    }

    #[test]
    fn zero_is_no_limit_and_empty_entries_go() {
        let q = quotas(0);
        let guards: Vec<_> = (0..100)
            .map(|_| q.acquire(Quota::Streams, "alice").unwrap())
            .collect();
        assert_eq!(q.held(Quota::Streams, "alice"), 100);
        drop(guards);
        assert!(q.held.lock().unwrap().is_empty());
    }

    #[test]
    fn forced_units_count_but_are_never_refused() {
        let q = quotas(1);
        let _a = q.force(Quota::Streams, "alice");
        let _b = q.force(Quota::Streams, "alice");
        assert!(q.acquire(Quota::Streams, "alice").is_err());
        assert_eq!(q.held(Quota::Streams, "alice"), 2);
    }

    /// An owner sending far more than half its open-task limit a second, each task ending
    /// before the next send (a load test of echo), is answered from the remembered figure: no
    /// store read after the first within [`USAGE_FRESH`] (the figure's time stays the first
    /// read's). Without `task_closed` the figure would pass half the limit after 4 sends.
    #[tokio::test]
    async fn ended_tasks_leave_the_remembered_figure() {
        let q = Quotas::new(QuotaConfig {
            open_tasks_per_owner: 8,
            ..QuotaConfig::default()
        });
        let store = a2a_store::MemoryTaskStore::new();
        q.check_stored(&store, "alice", true, 10).await.unwrap();
        let first = q.usage.get("alice").unwrap();
        assert_eq!(first.usage().open_tasks, 1);
        q.task_closed("alice");
        for _ in 0..100 {
            q.check_stored(&store, "alice", true, 10).await.unwrap();
            q.task_closed("alice");
        }
        let seen = q.usage.get("alice").unwrap();
        assert_eq!(seen.at, first.at, "no store read within the fresh window");
        assert_eq!(seen.usage().open_tasks, 0);
        assert_eq!(seen.usage().bytes, 101 * 10);
        // Tasks that stay open do count: past half the limit, the store is asked.
        for _ in 0..4 {
            q.check_stored(&store, "alice", true, 10).await.unwrap();
        }
        assert_ne!(q.usage.get("alice").unwrap().at, first.at);
    }

    /// Many threads taking and giving back: the count never passes the limit and ends at 0.
    #[test]
    fn counts_hold_under_concurrency() {
        let q = quotas(8);
        let peak = Arc::new(std::sync::atomic::AtomicU64::new(0));
        std::thread::scope(|s| {
            for _ in 0..8 {
                let (q, peak) = (q.clone(), peak.clone());
                s.spawn(move || {
                    for _ in 0..2_000 {
                        if let Ok(g) = q.acquire(Quota::Streams, "alice") {
                            let now = q.held(Quota::Streams, "alice");
                            peak.fetch_max(now, std::sync::atomic::Ordering::Relaxed);
                            drop(g);
                        }
                    }
                });
            }
        });
        assert!(peak.load(std::sync::atomic::Ordering::Relaxed) <= 8);
        assert_eq!(q.held(Quota::Streams, "alice"), 0);
    }
}
