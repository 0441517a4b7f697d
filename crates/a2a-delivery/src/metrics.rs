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

/// A task's runner found its lease held by another worker and left `entries` to it
/// (`a2a_worker_left_to_holder_total`).
pub fn left_to_holder(entries: usize) {
    metrics::counter!("a2a_worker_left_to_holder_total").increment(entries as u64);
}

/// A holder kept a task's lease because its log went on past what it delivered, and goes on
/// from the log (`a2a_worker_lease_kept_total`).
pub fn lease_kept() {
    metrics::counter!("a2a_worker_lease_kept_total").increment(1);
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

/// A per-task runner panicked (or failed for good): its entries were dead-lettered or
/// acknowledged and its task released (`a2a_worker_runner_failures_total{kind}`: `panic` or
/// `error`).
pub fn runner_failed(kind: &'static str) {
    metrics::counter!("a2a_worker_runner_failures_total", "kind" => kind).increment(1);
}

/// Events of a task that is gone (retention deleted it, or it never existed), which therefore
/// cannot be delivered: counted, not skipped silently (`a2a_worker_vanished_total`).
pub fn vanished(events: u64) {
    metrics::counter!("a2a_worker_vanished_total").increment(events);
}

/// Entries acknowledged without being queued, left to the reconciliation sweep (the ledger
/// holds them): `reason` is `queue_full` (the pipeline's queue), `task_full` (the task's own
/// queue; its later events are read from the log) or `owner_share` (the owner has its share of
/// tasks in delivery) (`a2a_worker_deferred_total{reason}`).
pub fn deferred(reason: &'static str, entries: u64) {
    metrics::counter!("a2a_worker_deferred_total", "reason" => reason).increment(entries);
}

/// What the pipeline holds: events queued in memory and tasks in delivery
/// (`a2a_worker_queued_events`, `a2a_worker_tasks_in_delivery`).
pub fn queued(events: usize, tasks: usize) {
    metrics::gauge!("a2a_worker_queued_events").set(events as f64);
    metrics::gauge!("a2a_worker_tasks_in_delivery").set(tasks as f64);
}

/// Destinations with attempts in progress or waiting, and attempts waiting for a slot
/// (`a2a_worker_destinations_active`, `a2a_worker_attempts_waiting`).
pub fn gates(destinations: usize, waiting: usize) {
    metrics::gauge!("a2a_worker_destinations_active").set(destinations as f64);
    metrics::gauge!("a2a_worker_attempts_waiting").set(waiting as f64);
}

/// One pass of the reconciliation sweep: tasks found behind their event log, and progress rows
/// of vanished tasks deleted (`a2a_worker_sweep_behind_total`, `a2a_worker_vanished_total`).
pub fn swept(behind: usize, vanished_tasks: u64) {
    metrics::counter!("a2a_worker_sweep_behind_total").increment(behind as u64);
    metrics::counter!("a2a_worker_sweep_runs_total").increment(1);
    if vanished_tasks > 0 {
        vanished(vanished_tasks);
    }
}

/// The consumer group was missing (Redis restarted without it) and was created again
/// (`a2a_worker_group_recreated_total`).
pub fn group_recreated() {
    metrics::counter!("a2a_worker_group_recreated_total").increment(1);
}

/// Events the bounded tap of an embedded gateway could not take (its push delivery was full);
/// the embedded sweep delivers them from the store (`a2a_push_tap_dropped_total`).
pub fn tap_dropped() {
    metrics::counter!("a2a_push_tap_dropped_total").increment(1);
}

/// Attempts waiting for the delivery log's writer (its channel holds at most 8,000)
/// (`a2a_worker_log_queue_depth`).
pub fn log_queue(depth: usize) {
    metrics::gauge!("a2a_worker_log_queue_depth").set(depth as f64);
}
