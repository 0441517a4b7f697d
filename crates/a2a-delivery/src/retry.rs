//! How often and how far apart an event is offered to a webhook.

use std::time::Duration;

/// The longest Retry-After honoured by default (`A2A_WORKER_MAX_RETRY_AFTER_SECS`); a receiver
/// asking for more is retried after this. Kept short: a delivery waiting out a Retry-After
/// holds its task's later events (review H4).
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);

/// Attempts per event and webhook, and the backoff between them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    pub max_attempts: u32,
    pub base: Duration,
    pub max: Duration,
    /// The longest Retry-After honoured.
    pub max_retry_after: Duration,
}

impl Default for RetryPolicy {
    /// The worker's defaults (`A2A_WORKER_MAX_ATTEMPTS`, `A2A_WORKER_BACKOFF_*_MS`).
    fn default() -> Self {
        Self {
            max_attempts: 8,
            base: Duration::from_millis(500),
            max: Duration::from_secs(60),
            max_retry_after: MAX_RETRY_AFTER,
        }
    }
}

impl RetryPolicy {
    /// The delay after failed attempt number `attempt` (1-based): `base * 2^(attempt-1)` capped
    /// at `max`, of which the upper half is random (so retries of many deliveries spread out),
    /// or what the receiver's Retry-After asked for, if longer (up to `max_retry_after`).
    pub fn delay(&self, attempt: u32, retry_after: Option<Duration>) -> Duration {
        let exp = self
            .base
            .saturating_mul(1u32 << attempt.saturating_sub(1).min(20))
            .min(self.max);
        let half = exp / 2;
        let jittered = half + half.mul_f64(fastrand::f64());
        match retry_after {
            Some(asked) => asked.min(self.max_retry_after).max(jittered),
            None => jittered,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A receiver asking for 600 s (a tarpit) waits the cap, not 600 s (review H4).
    #[test]
    fn retry_after_is_capped() {
        let p = RetryPolicy::default();
        let d = p.delay(1, Some(Duration::from_secs(600)));
        assert_eq!(d, MAX_RETRY_AFTER);
        let p = RetryPolicy {
            max_retry_after: Duration::from_secs(5),
            ..p
        };
        assert_eq!(p.delay(1, Some(Duration::MAX)), Duration::from_secs(5));
    }
}
