//! The rate limiter the request pipeline runs (README, Rate limits): per client IP before
//! authentication, per principal after it, per agent when a send is routed. Each scope is a
//! GCRA (`governor`) keyed by its key, with one rate and burst (per-principal overrides have
//! their own); a call takes its method's cost from the bucket. With `backend = "redis"` the
//! decision is the shared one ([`SharedGcra`]) and the local limiter stands in while Redis is
//! unreachable.
//!
//! *Invariant*: keyed state stays bounded: every `evict_interval_secs` the keys whose buckets
//! are full again (indistinguishable from a fresh key) are dropped.

use std::collections::HashMap;
use std::hash::Hash;
use std::net::IpAddr;
use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

use a2a_types::A2aError;
use axum::http::{HeaderMap, HeaderValue};
use governor::clock::Clock;
use governor::middleware::StateInformationMiddleware;
use governor::{DefaultKeyedRateLimiter, Quota};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::config::{Backend, Rate, RateConfig};
use super::shared::SharedGcra;
use a2a_types::Method;

/// One scope's policy: `burst` units at once, earned back at `rate` per second.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Policy {
    /// `ip`, `principal` or `agent`: the policy's name in the `RateLimit` headers.
    pub scope: &'static str,
    pub burst: u32,
    pub rate: f64,
}

impl Policy {
    /// The policy's window (`RateLimit-Policy` `w`): how long an empty bucket takes to fill.
    pub fn window_secs(&self) -> u64 {
        whole_secs(f64::from(self.burst) / self.rate).max(1)
    }

    /// Seconds until a bucket with `remaining` units is full again (`RateLimit` `t`).
    pub fn reset_secs(&self, remaining: u32) -> u64 {
        whole_secs(f64::from(self.burst.saturating_sub(remaining)) / self.rate)
    }
}

/// A check's outcome.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Verdict {
    Allowed { remaining: u32 },
    Refused { retry_after: Duration },
}

/// A passed check, for the `RateLimit` headers of the response.
#[derive(Debug, Clone, PartialEq)]
pub struct Allowance {
    pub policy: Policy,
    pub remaining: u32,
    /// The policy's `RateLimit-Policy` item (`"ip";q=100;w=2`), made once per scope.
    pub policy_item: HeaderValue,
}

type Local<K> = DefaultKeyedRateLimiter<K, StateInformationMiddleware>;

/// One scope: its policy and its local limiter.
struct Scope<K: Hash + Eq + Clone> {
    policy: Policy,
    policy_item: HeaderValue,
    local: Local<K>,
}

impl<K: Hash + Eq + Clone> Scope<K> {
    fn new(scope: &'static str, limit: Rate) -> Self {
        // The configuration keeps `rate` and the window (burst / rate) in range, so the period
        // fits; should it not, the longest window governor can count in u64 nanoseconds
        // stands (no panic from a configured number).
        let burst = NonZeroU32::new(limit.burst).unwrap_or(NonZeroU32::MIN);
        let longest = Duration::from_secs(super::config::MAX_WINDOW_SECS) / burst.get();
        let period = Duration::try_from_secs_f64(1.0 / limit.rate)
            .unwrap_or(Duration::MAX)
            .min(longest)
            .max(Duration::from_nanos(1));
        let quota = Quota::with_period(period)
            .unwrap_or(Quota::per_second(NonZeroU32::MIN))
            .allow_burst(burst);
        let policy = Policy {
            scope,
            burst: limit.burst,
            rate: limit.rate,
        };
        let item = format!("\"{scope}\";q={};w={}", limit.burst, policy.window_secs());
        Self {
            policy,
            policy_item: HeaderValue::from_str(&item).expect("a scope name and numbers"),
            local: DefaultKeyedRateLimiter::dashmap(quota).with_middleware(),
        }
    }

    fn check_local(&self, key: &K, cost: u32) -> Verdict {
        let n = NonZeroU32::new(cost).unwrap_or(NonZeroU32::MIN);
        match self.local.check_key_n(key, n) {
            Ok(Ok(state)) => Verdict::Allowed {
                remaining: state.remaining_burst_capacity(),
            },
            Ok(Err(not_until)) => Verdict::Refused {
                retry_after: not_until.wait_time_from(self.local.clock().now()),
            },
            // A cost above the burst (the configuration is validated against it).
            Err(_) => Verdict::Refused {
                retry_after: Duration::from_secs(self.policy.window_secs()),
            },
        }
    }

    fn evict(&self) {
        self.local.retain_recent();
        self.local.shrink_to_fit();
    }
}

pub struct RateLimiter {
    ip: Option<Scope<IpAddr>>,
    principal: Option<Scope<String>>,
    agent: Option<Scope<String>>,
    /// Overrides, and which principal or API key id uses which.
    overrides: Vec<Scope<String>>,
    by_principal: HashMap<String, usize>,
    by_key: HashMap<String, usize>,
    /// The cost of each method, by [`Method::index`].
    costs: [u32; Method::ALL.len()],
    /// Who the client is: `client_ip_header` from trusted proxies, IPv6 keys by prefix.
    addressing: super::ClientAddressing,
    shared: Option<SharedGcra>,
    /// How often stale keys are dropped ([`RateLimiter::start_eviction`]).
    evict_every: Duration,
}

/// The per-agent limit alone: what the domain service checks once a send is routed (the IP and
/// principal limits are the request pipeline's).
#[derive(Clone)]
pub struct AgentLimit(Arc<RateLimiter>);

impl AgentLimit {
    /// Charges `cost` to `agent`'s bucket; RateLimited when it is empty.
    pub async fn check(&self, agent: &str, cost: u32) -> Result<(), A2aError> {
        self.0.check_agent(agent, cost).await
    }
}

impl RateLimiter {
    /// The limiter `config` asks for, or `None` when it sets no limit. Its eviction of stale
    /// keys is started apart ([`Self::start_eviction`]), by whoever joins it at shutdown.
    pub fn new(config: &RateConfig) -> Option<Arc<Self>> {
        if !config.enabled() {
            return None;
        }
        let mut by_principal = HashMap::new();
        let mut by_key = HashMap::new();
        let mut overrides = Vec::new();
        for (i, o) in config.overrides.iter().enumerate() {
            overrides.push(Scope::new("principal", o.limit()));
            if let Some(p) = &o.principal {
                by_principal.insert(p.clone(), i);
            }
            if let Some(k) = &o.key {
                by_key.insert(k.clone(), i);
            }
        }
        let shared = match (config.backend, &config.redis) {
            (Backend::Redis, Some(target)) => Some(SharedGcra::new(
                target.target.clone(),
                &target.prefix,
                Duration::from_millis(config.redis_timeout_ms),
            )),
            _ => None,
        };
        let limiter = Arc::new(Self {
            ip: config.ip.map(|r| Scope::new("ip", r)),
            principal: config.principal.map(|r| Scope::new("principal", r)),
            agent: config.agent.map(|r| Scope::new("agent", r)),
            overrides,
            by_principal,
            by_key,
            costs: Method::ALL.map(|m| config.cost(m)),
            addressing: config.addressing(),
            shared,
            evict_every: Duration::from_secs(config.evict_interval_secs),
        });
        Some(limiter)
    }

    /// Drops stale keys every `evict_interval_secs` until `shutdown` (or until the limiter is
    /// gone). Must be called inside a tokio runtime.
    pub fn start_eviction(self: &Arc<Self>, shutdown: CancellationToken) -> JoinHandle<()> {
        tokio::spawn(evict_stale_keys(
            Arc::downgrade(self),
            self.evict_every,
            shutdown,
        ))
    }

    /// The per-agent limit for the service, when one is set.
    pub fn agent_limit(self: &Arc<Self>) -> Option<AgentLimit> {
        self.agent.is_some().then(|| AgentLimit(self.clone()))
    }

    /// Whether a per-IP limit is set (the server then records each connection's peer).
    pub fn limits_ips(&self) -> bool {
        self.ip.is_some()
    }

    /// What a call of `method` costs; a call whose method is unknown (refused before it was
    /// read, or naming no A2A method) costs 1.
    pub fn cost(&self, method: Option<Method>) -> u32 {
        method.map_or(1, |m| self.costs[m.index()])
    }

    /// The client's address (see [`super::ClientAddressing::client_ip`]): from
    /// `client_ip_header` when the peer is a trusted proxy, else the TCP peer's.
    pub fn client_ip(&self, headers: &HeaderMap, peer: Option<IpAddr>) -> Option<IpAddr> {
        self.addressing.client_ip(headers, peer)
    }

    /// The per-IP limit (before authentication); `Ok(None)` when it is off. An IPv6 client
    /// counts under its network (`ipv6_prefix`).
    pub async fn check_ip(&self, ip: IpAddr, cost: u32) -> Result<Option<Allowance>, A2aError> {
        let Some(scope) = &self.ip else {
            return Ok(None);
        };
        let ip = self.addressing.key(ip);
        self.check(scope, &ip, || ip.to_string(), cost)
            .await
            .map(Some)
    }

    /// The per-principal limit (or the principal's override) of an authenticated caller.
    pub async fn check_principal(
        &self,
        owner: &String,
        cost: u32,
    ) -> Result<Option<Allowance>, A2aError> {
        let Some(scope) = self.principal_scope(owner) else {
            return Ok(None);
        };
        self.check(scope, owner, || owner.clone(), cost)
            .await
            .map(Some)
    }

    /// The per-agent limit, for a send routed to `agent`.
    pub async fn check_agent(&self, agent: &str, cost: u32) -> Result<(), A2aError> {
        let Some(scope) = &self.agent else {
            return Ok(());
        };
        let key = agent.to_owned();
        self.check(scope, &key, || key.clone(), cost)
            .await
            .map(|_| ())
    }

    fn principal_scope(&self, owner: &str) -> Option<&Scope<String>> {
        if !self.overrides.is_empty() {
            let i = self
                .by_principal
                .get(owner)
                .or_else(|| api_key_id(owner).and_then(|id| self.by_key.get(id)));
            if let Some(i) = i {
                return self.overrides.get(*i);
            }
        }
        self.principal.as_ref()
    }

    async fn check<K: Hash + Eq + Clone>(
        &self,
        scope: &Scope<K>,
        key: &K,
        shared_key: impl FnOnce() -> String,
        cost: u32,
    ) -> Result<Allowance, A2aError> {
        let policy = scope.policy;
        let shared = match &self.shared {
            Some(shared) => {
                let verdict = shared
                    .check(policy.scope, &shared_key(), &policy, cost)
                    .await;
                if verdict.is_none() {
                    metrics::counter!("a2a_rate_limit_fail_open_total").increment(1);
                }
                verdict
            }
            None => None,
        };
        match shared.unwrap_or_else(|| scope.check_local(key, cost)) {
            Verdict::Allowed { remaining } => Ok(Allowance {
                policy,
                remaining,
                policy_item: scope.policy_item.clone(),
            }),
            Verdict::Refused { retry_after } => {
                metrics::counter!("a2a_rate_limited_total", "scope" => policy.scope).increment(1);
                Err(A2aError::RateLimited {
                    scope: policy.scope.to_owned(),
                    limit: policy.burst,
                    window_secs: policy.window_secs(),
                    retry_after_ms: retry_after.as_millis().max(1) as u64,
                })
            }
        }
    }

    /// Drops the keys whose buckets are full again, in every local limiter.
    fn evict(&self) {
        if let Some(s) = &self.ip {
            s.evict();
        }
        for s in self
            .principal
            .iter()
            .chain(&self.agent)
            .chain(&self.overrides)
        {
            s.evict();
        }
    }

    /// Keys held by the local limiters (for tests).
    pub fn keys(&self) -> usize {
        self.ip.as_ref().map_or(0, |s| s.local.len())
            + self
                .principal
                .iter()
                .chain(&self.agent)
                .chain(&self.overrides)
                .map(|s| s.local.len())
                .sum::<usize>()
    }
}

/// Seconds rounded up, but not for the last bits of a division (30.000000000000004 is 30).
fn whole_secs(secs: f64) -> u64 {
    (secs - 1e-9).ceil().max(0.0) as u64
}

/// The id of an API key principal (`apikey:<scheme>:<source>:<id>`; the scheme is written
/// with `:` escaped, see `auth::api_key_principal`).
fn api_key_id(owner: &str) -> Option<&str> {
    owner.strip_prefix("apikey:")?.splitn(3, ':').nth(2)
}

async fn evict_stale_keys(
    limiter: std::sync::Weak<RateLimiter>,
    every: Duration,
    shutdown: CancellationToken,
) {
    let mut tick = tokio::time::interval(every);
    tick.tick().await;
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            _ = tick.tick() => {}
        }
        let Some(limiter) = limiter.upgrade() else {
            return;
        };
        limiter.evict();
    }
}

#[cfg(test)]
mod tests;
