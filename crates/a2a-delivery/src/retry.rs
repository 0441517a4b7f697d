//! How often and how far apart an event is offered to a webhook.

use std::time::Duration;

/// The longest Retry-After honoured; a receiver asking for more is retried after this.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(600);

/// Attempts per event and webhook, and the backoff between them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    pub max_attempts: u32,
    pub base: Duration,
    pub max: Duration,
}

impl Default for RetryPolicy {
    /// The worker's defaults (`A2A_WORKER_MAX_ATTEMPTS`, `A2A_WORKER_BACKOFF_*_MS`).
    fn default() -> Self {
        Self {
            max_attempts: 8,
            base: Duration::from_millis(500),
            max: Duration::from_secs(60),
        }
    }
}

impl RetryPolicy {
    /// The delay after failed attempt number `attempt` (1-based): `base * 2^(attempt-1)` capped
    /// at `max`, of which the upper half is random (so retries of many deliveries spread out),
    /// or what the receiver's Retry-After asked for, if longer (up to [`MAX_RETRY_AFTER`]).
    pub fn delay(&self, attempt: u32, retry_after: Option<Duration>) -> Duration {
        let exp = self
            .base
            .saturating_mul(1u32 << attempt.saturating_sub(1).min(20))
            .min(self.max);
        let half = exp / 2;
        let jittered = half + half.mul_f64(fastrand::f64());
        match retry_after {
            Some(asked) => asked.min(MAX_RETRY_AFTER).max(jittered),
            None => jittered,
        }
    }
}
