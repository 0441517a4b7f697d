//! Push delivery's metrics, recorded through the `metrics` facade. The worker exports them on
//! `/metrics` (`A2A_WORKER_LISTEN`), an embedded gateway on its admin listener; the names are
//! the worker's since its first release (README, `a2a-worker`). Nothing is recorded until the
//! process installs its recorder (`a2a_process::metrics::install`).

use std::time::Duration;

/// One HTTP attempt ended (connect to end of response) with `outcome`: `delivered`, `retry`
/// or `failed` (`a2a_worker_attempts_total`, `a2a_worker_attempt_duration_seconds`).
pub fn attempt(outcome: &'static str, latency: Duration) {
    metrics::counter!("a2a_worker_attempts_total", "outcome" => outcome).increment(1);
    metrics::histogram!("a2a_worker_attempt_duration_seconds").record(latency.as_secs_f64());
}

/// An event reached a webhook; `since_event` is the time since its stream entry, when known
/// (`a2a_worker_deliveries_total{outcome="delivered"}`, `a2a_worker_event_to_delivery_seconds`).
pub fn delivered(since_event: Option<Duration>) {
    metrics::counter!("a2a_worker_deliveries_total", "outcome" => "delivered").increment(1);
    if let Some(d) = since_event {
        metrics::histogram!("a2a_worker_event_to_delivery_seconds").record(d.as_secs_f64());
    }
}

/// A delivery gave up and was written as a dead letter.
pub fn dead_lettered() {
    metrics::counter!("a2a_worker_deliveries_total", "outcome" => "dead_lettered").increment(1);
    metrics::counter!("a2a_worker_dead_letters_total").increment(1);
}

/// Entries this process holds and has not acknowledged yet.
pub fn in_flight(entries: usize) {
    metrics::gauge!("a2a_worker_in_flight").set(entries as f64);
}

/// The consumer group's state (XINFO GROUPS): entries not read yet (`lag`) and read but not
/// acknowledged (`pending`), -1 when unknown.
pub fn group(lag: Option<i64>, pending: Option<i64>) {
    metrics::gauge!("a2a_worker_consumer_lag").set(lag.map_or(-1.0, |v| v as f64));
    metrics::gauge!("a2a_worker_group_pending").set(pending.map_or(-1.0, |v| v as f64));
}

/// Entries taken over from stalled consumers (XAUTOCLAIM).
pub fn reclaimed(entries: usize) {
    metrics::counter!("a2a_worker_reclaimed_total").increment(entries as u64);
}

/// Delivery-log rows deleted as older than the retention.
pub fn log_pruned(rows: u64) {
    metrics::counter!("a2a_worker_log_pruned_total").increment(rows);
}
