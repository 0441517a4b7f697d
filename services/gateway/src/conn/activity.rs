//! The requests in flight on an HTTP/2 connection, which its idle timeout watches.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// The requests in flight on an HTTP/2 connection, for its idle timeout: plain counters the
/// requests update, read by the connection's one timer (a request never wakes it).
pub(super) struct Activity {
    in_flight: AtomicUsize,
    /// Whether a request ever came.
    served: std::sync::atomic::AtomicBool,
    /// When the last request ended, in milliseconds since `opened`.
    last_end_ms: std::sync::atomic::AtomicU64,
    opened: std::time::Instant,
}

impl Default for Activity {
    fn default() -> Self {
        Self {
            in_flight: AtomicUsize::new(0),
            served: std::sync::atomic::AtomicBool::new(false),
            last_end_ms: std::sync::atomic::AtomicU64::new(0),
            opened: std::time::Instant::now(),
        }
    }
}

impl Activity {
    pub(super) fn start(self: &Arc<Self>) -> InFlight {
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        self.served.store(true, Ordering::Release);
        InFlight(self.clone())
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.opened.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Returns once no request has been in flight for `idle` (for `first` while none has
    /// come yet), with whether one ever came. Wakes once per period, not per request.
    pub(super) async fn idle_for(&self, first: Duration, idle: Duration) -> bool {
        let mut wait = first.min(idle);
        loop {
            tokio::time::sleep(wait).await;
            let served = self.served.load(Ordering::Acquire);
            let limit = if served { idle } else { first };
            if self.in_flight.load(Ordering::Acquire) > 0 {
                wait = limit;
                continue;
            }
            let since = Duration::from_millis(
                self.now_ms()
                    .saturating_sub(self.last_end_ms.load(Ordering::Acquire)),
            );
            if since >= limit {
                return served;
            }
            wait = limit - since;
        }
    }
}

/// One request in flight, until its response body is dropped.
pub(super) struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        let activity = &self.0;
        activity
            .last_end_ms
            .fetch_max(activity.now_ms(), Ordering::AcqRel);
        activity.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}
