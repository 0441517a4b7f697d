//! Per-owner quotas (`[limits.quotas]`): what one caller may hold at once, so that nothing one
//! caller does can take the gateway from the others.
//!
//! Open streams, running turns and blocking sends are counted in this process (per replica):
//! each is a [`QuotaGuard`] held by what it counts (the stream, the turn's runner, the waiting
//! send) and dropped with it on every path: completion, error, client disconnect, cancel, panic.
//! Push configs are counted in the task store, atomically with their creation, so that the
//! limit holds across replicas (`a2a_store::PushQuota`).
//!
//! A refusal is [`A2aError::QuotaExceeded`] naming the config key, counted in
//! `a2a_quota_refusals_total{quota}`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use a2a_types::A2aError;
use serde::Deserialize;

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
    /// Entries are removed when they fall to 0, so the map holds only owners holding something.
    held: Mutex<HashMap<(Quota, String), u64>>,
}

impl Quotas {
    pub(crate) fn new(config: QuotaConfig) -> Arc<Self> {
        Arc::new(Self {
            config,
            held: Mutex::new(HashMap::new()),
        })
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
        let count = held.entry((quota, owner.to_owned())).or_insert(0);
        if limit > 0 && *count >= limit {
            if *count == 0 {
                held.remove(&(quota, owner.to_owned()));
            }
            drop(held);
            return Err(refusal(quota.key(), limit));
        }
        *count += 1;
        Ok(self.guard(quota, owner))
    }

    /// Takes one unit without checking the limit: for work that must not be refused (a turn
    /// taken over from a replica that died), which still counts against the owner's later
    /// requests.
    pub(crate) fn force(self: &Arc<Self>, quota: Quota, owner: &str) -> QuotaGuard {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        *held.entry((quota, owner.to_owned())).or_insert(0) += 1;
        self.guard(quota, owner)
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
        held.get(&(quota, owner.to_owned())).copied().unwrap_or(0)
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
        let key = (self.quota, std::mem::take(&mut self.owner));
        if let Some(count) = held.get_mut(&key) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                held.remove(&key);
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
