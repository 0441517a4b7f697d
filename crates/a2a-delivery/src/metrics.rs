//! The worker's Prometheus metrics, served as text on `/metrics`. A handful of atomics: the
//! worker exports six series, which does not earn a metrics framework.

use std::fmt::Write;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering::Relaxed};
use std::time::Duration;

/// Upper bounds (seconds) of the latency histograms' buckets.
const BUCKETS: [f64; 14] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

#[derive(Default)]
pub struct Histogram {
    buckets: [AtomicU64; BUCKETS.len()],
    count: AtomicU64,
    sum_us: AtomicU64,
}

impl Histogram {
    pub fn observe(&self, d: Duration) {
        let secs = d.as_secs_f64();
        if let Some(i) = BUCKETS.iter().position(|b| secs <= *b) {
            self.buckets[i].fetch_add(1, Relaxed);
        }
        self.count.fetch_add(1, Relaxed);
        self.sum_us
            .fetch_add(u64::try_from(d.as_micros()).unwrap_or(u64::MAX), Relaxed);
    }

    fn render(&self, out: &mut String, name: &str, help: &str) {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
        let mut cumulative = 0;
        for (bound, n) in BUCKETS.iter().zip(&self.buckets) {
            cumulative += n.load(Relaxed);
            let _ = writeln!(out, "{name}_bucket{{le=\"{bound}\"}} {cumulative}");
        }
        let count = self.count.load(Relaxed);
        let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {count}");
        let sum = self.sum_us.load(Relaxed) as f64 / 1e6;
        let _ = writeln!(out, "{name}_sum {sum}\n{name}_count {count}");
    }
}

/// Every series the worker exports.
#[derive(Default)]
pub struct Metrics {
    /// Attempts by outcome (`a2a_worker_attempts_total{outcome}`).
    pub attempts_delivered: AtomicU64,
    pub attempts_retry: AtomicU64,
    pub attempts_failed: AtomicU64,
    /// Final outcome per event and webhook (`a2a_worker_deliveries_total{outcome}`).
    pub delivered: AtomicU64,
    pub dead_lettered: AtomicU64,
    /// One HTTP attempt, connect to end of response.
    pub attempt_latency: Histogram,
    /// From the event's entry in the stream to its successful delivery.
    pub event_latency: Histogram,
    /// Entries of the stream not yet read by the group (XINFO GROUPS `lag`); -1 = unknown.
    pub consumer_lag: AtomicI64,
    /// Entries read by the group but not yet acknowledged, all consumers (`pending`).
    pub group_pending: AtomicI64,
    /// Entries this worker holds and has not acknowledged yet.
    pub in_flight: AtomicI64,
    /// Entries taken over from other consumers (XAUTOCLAIM).
    pub reclaimed: AtomicU64,
    /// Delivery log rows deleted by retention (`A2A_WORKER_LOG_RETENTION_HOURS`).
    pub log_pruned: AtomicU64,
}

impl Metrics {
    pub fn render(&self) -> String {
        let mut out = String::with_capacity(4096);
        let counter = |out: &mut String, name: &str, help: &str, rows: &[(&str, u64)]| {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter");
            for (labels, v) in rows {
                let _ = writeln!(out, "{name}{labels} {v}");
            }
        };
        let gauge = |out: &mut String, name: &str, help: &str, v: i64| {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {v}");
        };
        counter(
            &mut out,
            "a2a_worker_deliveries_total",
            "Events offered to a webhook, by final outcome",
            &[
                ("{outcome=\"delivered\"}", self.delivered.load(Relaxed)),
                (
                    "{outcome=\"dead_lettered\"}",
                    self.dead_lettered.load(Relaxed),
                ),
            ],
        );
        counter(
            &mut out,
            "a2a_worker_attempts_total",
            "HTTP delivery attempts, by outcome",
            &[
                (
                    "{outcome=\"delivered\"}",
                    self.attempts_delivered.load(Relaxed),
                ),
                ("{outcome=\"retry\"}", self.attempts_retry.load(Relaxed)),
                ("{outcome=\"failed\"}", self.attempts_failed.load(Relaxed)),
            ],
        );
        counter(
            &mut out,
            "a2a_worker_dead_letters_total",
            "Dead letters written",
            &[("", self.dead_lettered.load(Relaxed))],
        );
        counter(
            &mut out,
            "a2a_worker_reclaimed_total",
            "Stream entries taken over from stalled consumers",
            &[("", self.reclaimed.load(Relaxed))],
        );
        counter(
            &mut out,
            "a2a_worker_log_pruned_total",
            "Delivery log rows this worker deleted as older than the retention",
            &[("", self.log_pruned.load(Relaxed))],
        );
        self.attempt_latency.render(
            &mut out,
            "a2a_worker_attempt_duration_seconds",
            "Duration of one delivery attempt",
        );
        self.event_latency.render(
            &mut out,
            "a2a_worker_event_to_delivery_seconds",
            "From the event's stream entry to its delivery",
        );
        gauge(
            &mut out,
            "a2a_worker_consumer_lag",
            "Stream entries the consumer group has not read yet (-1 unknown)",
            self.consumer_lag.load(Relaxed),
        );
        gauge(
            &mut out,
            "a2a_worker_group_pending",
            "Entries read by the group and not acknowledged yet (-1 unknown)",
            self.group_pending.load(Relaxed),
        );
        gauge(
            &mut out,
            "a2a_worker_in_flight",
            "Entries this worker holds unacknowledged",
            self.in_flight.load(Relaxed),
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_prometheus_text() {
        let m = Metrics::default();
        m.delivered.fetch_add(3, Relaxed);
        m.log_pruned.fetch_add(7, Relaxed);
        m.attempt_latency.observe(Duration::from_millis(3));
        m.attempt_latency.observe(Duration::from_secs(100));
        let text = m.render();
        assert!(text.contains("a2a_worker_deliveries_total{outcome=\"delivered\"} 3"));
        assert!(text.contains(
            "# TYPE a2a_worker_log_pruned_total counter\na2a_worker_log_pruned_total 7\n"
        ));
        assert!(text.contains("a2a_worker_attempt_duration_seconds_bucket{le=\"0.005\"} 1"));
        assert!(text.contains("a2a_worker_attempt_duration_seconds_bucket{le=\"+Inf\"} 2"));
        assert!(text.contains("a2a_worker_attempt_duration_seconds_count 2"));
    }
}
