//! The limit every replica shares (`[limits.rate] backend = "redis"`): one GCRA state per key
//! in Redis, updated by one Lua script in one round trip (EVALSHA, loaded once), on Redis's
//! clock so that replicas with skewed clocks agree.
//!
//! While Redis is unreachable (an error, or no answer within `redis_timeout_ms`), checks are
//! not sent to it for [`PAUSE`]; the caller decides with its local limiter meanwhile (fails
//! open to it) and counts that in `a2a_rate_limit_fail_open_total`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use a2a_bus::{Patience, RedisTarget, SharedConn};

use super::rate::{Policy, Verdict};

/// GCRA on one key. The stored value is the theoretical arrival time (TAT) in microseconds of
/// Redis's clock; `interval` is the time one cost unit takes to earn back, `tolerance` the
/// burst's (interval × burst). A call of `cost` passes when its new TAT is within the
/// tolerance of now. Returns {allowed, remaining units, retry after µs}.
const SCRIPT: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval = tonumber(ARGV[1])
local tolerance = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])
local tat = tonumber(redis.call('GET', KEYS[1]) or now)
if tat < now then tat = now end
local new_tat = tat + interval * cost
local allow_at = new_tat - tolerance
if allow_at > now then
  return {0, 0, allow_at - now}
end
redis.call('SET', KEYS[1], string.format('%d', new_tat), 'PX', math.ceil((new_tat - now) / 1000) + 1)
return {1, math.floor((tolerance - (new_tat - now)) / interval), 0}
";

/// How long checks stay local after Redis failed one.
const PAUSE: Duration = Duration::from_secs(1);
/// At most one warning per this long while Redis stays unreachable.
const WARN_EVERY: Duration = Duration::from_secs(10);

pub struct SharedGcra {
    /// No retries of its own: a check that cannot reach Redis decides locally instead.
    conn: SharedConn,
    script: redis::Script,
    prefix: String,
    timeout: Duration,
    /// Process-relative milliseconds until which Redis is not asked (0 = ask).
    paused_until_ms: AtomicU64,
    last_warning_ms: AtomicU64,
    epoch: Instant,
}

impl SharedGcra {
    /// Opens no connection yet (the first check does). On a cluster each key's state is on its
    /// key's slot (one key per script call).
    pub fn new(target: RedisTarget, prefix: &str, timeout: Duration) -> Self {
        let patience = Patience {
            connect: timeout,
            response: timeout,
            retries: 0,
        };
        Self {
            conn: SharedConn::new(target, patience),
            script: redis::Script::new(SCRIPT),
            prefix: format!("{prefix}ratelimit:"),
            timeout,
            paused_until_ms: AtomicU64::new(0),
            last_warning_ms: AtomicU64::new(0),
            epoch: Instant::now(),
        }
    }

    /// The shared decision for `key` of `scope`, or `None` when Redis cannot give one now (the
    /// caller then decides locally).
    pub async fn check(
        &self,
        scope: &str,
        key: &str,
        policy: &Policy,
        cost: u32,
    ) -> Option<Verdict> {
        let now = self.now_ms();
        if now < self.paused_until_ms.load(Ordering::Relaxed) {
            return None;
        }
        let redis_key = format!("{}{scope}:{key}", self.prefix);
        // Microseconds, as Redis's TIME gives them (and as a Lua number holds exactly): a rate
        // above a million units per second per key counts as a million here.
        let interval_us = (1_000_000.0 / policy.rate).ceil().max(1.0) as u64;
        let tolerance_us = interval_us.saturating_mul(u64::from(policy.burst));
        let call = async {
            let mut conn = self.conn.get().await.map_err(|e| e.to_string())?;
            let answer = self
                .script
                .key(redis_key)
                .arg(interval_us)
                .arg(tolerance_us)
                .arg(cost)
                .invoke_async::<(i64, i64, i64)>(&mut conn)
                .await;
            if let Err(e) = &answer {
                self.conn.failed(e).await;
            }
            answer.map_err(|e| e.to_string())
        };
        let outcome = match tokio::time::timeout(self.timeout, call).await {
            Ok(Ok(answer)) => return Some(verdict(answer)),
            Ok(Err(e)) => e,
            Err(_) => format!("no answer within {} ms", self.timeout.as_millis()),
        };
        self.paused_until_ms
            .store(now + PAUSE.as_millis() as u64, Ordering::Relaxed);
        let last = self.last_warning_ms.load(Ordering::Relaxed);
        if (last == 0 || now >= last + WARN_EVERY.as_millis() as u64)
            && self
                .last_warning_ms
                .compare_exchange(last, now.max(1), Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            tracing::warn!(error = %outcome, "the shared rate limiter's Redis is unreachable; \
                each replica limits on its own meanwhile");
        }
        None
    }

    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }
}

fn verdict((allowed, remaining, retry_us): (i64, i64, i64)) -> Verdict {
    if allowed == 1 {
        Verdict::Allowed {
            remaining: u32::try_from(remaining.max(0)).unwrap_or(u32::MAX),
        }
    } else {
        Verdict::Refused {
            retry_after: Duration::from_micros(u64::try_from(retry_us.max(1)).unwrap_or(1)),
        }
    }
}
