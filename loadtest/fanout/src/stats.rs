//! What a run measured: latencies in HDR histograms (microseconds), one per second of the run so
//! the report can show latency and throughput over time, and errors counted by kind.

use std::collections::BTreeMap;
use std::time::Duration;

use hdrhistogram::Histogram;

/// Largest latency a histogram holds (longer ones are recorded as this): one hour, in µs.
const MAX_MICROS: u64 = 3_600_000_000;

/// A latency histogram in microseconds, 3 significant digits (0.1% resolution).
pub fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, MAX_MICROS, 3).expect("valid histogram bounds")
}

pub fn record(h: &mut Histogram<u64>, d: Duration) {
    h.saturating_record((d.as_micros() as u64).clamp(1, MAX_MICROS));
}

/// One second of the measured window (by the time each answer arrived).
#[derive(Clone)]
pub struct Second {
    pub ok: u64,
    pub errors: u64,
    pub latency: Histogram<u64>,
}

impl Default for Second {
    fn default() -> Self {
        Self {
            ok: 0,
            errors: 0,
            latency: histogram(),
        }
    }
}

/// Everything one run (or one part of it) saw; parts merge into the whole.
#[derive(Clone, Default)]
pub struct Stats {
    /// Per second of the measured window; the run's latency is their merge.
    pub timeline: Vec<Second>,
    /// Secondary latencies by name (e.g. `first_event` of a stream), measured window only.
    pub extra: BTreeMap<String, Histogram<u64>>,
    /// Errors by kind (A2A reason such as `TASK_NOT_FOUND`, `transport`, `check:state`...),
    /// measured window only.
    pub errors: BTreeMap<String, u64>,
    /// Answers during the warm-up, not part of any figure but the totals.
    pub warmup_ok: u64,
    pub warmup_errors: u64,
}

impl Stats {
    fn second(&mut self, at: Duration) -> &mut Second {
        let i = at.as_secs() as usize;
        if self.timeline.len() <= i {
            self.timeline.resize_with(i + 1, Second::default);
        }
        &mut self.timeline[i]
    }

    /// A success answered `at` into the measured window after `latency`.
    pub fn ok(&mut self, at: Duration, latency: Duration) {
        let s = self.second(at);
        s.ok += 1;
        record(&mut s.latency, latency);
    }

    pub fn extra(&mut self, name: &str, latency: Duration) {
        let h = self.extra.entry(name.to_owned()).or_insert_with(histogram);
        record(h, latency);
    }

    pub fn error(&mut self, at: Duration, kind: &str) {
        self.second(at).errors += 1;
        *self.errors.entry(kind.to_owned()).or_default() += 1;
    }

    pub fn ok_count(&self) -> u64 {
        self.timeline.iter().map(|s| s.ok).sum()
    }

    pub fn error_count(&self) -> u64 {
        self.errors.values().sum()
    }

    /// The latency of every success of the measured window.
    pub fn latency(&self) -> Histogram<u64> {
        let mut all = histogram();
        for s in &self.timeline {
            all.add(&s.latency).expect("histograms of the same bounds");
        }
        all
    }

    /// Adds `other` (another worker's or another part's stats) to these, second by second.
    pub fn merge(&mut self, other: &Stats) {
        if self.timeline.len() < other.timeline.len() {
            self.timeline
                .resize_with(other.timeline.len(), Second::default);
        }
        for (mine, theirs) in self.timeline.iter_mut().zip(&other.timeline) {
            mine.ok += theirs.ok;
            mine.errors += theirs.errors;
            mine.latency
                .add(&theirs.latency)
                .expect("histograms of the same bounds");
        }
        for (name, h) in &other.extra {
            self.extra
                .entry(name.clone())
                .or_insert_with(histogram)
                .add(h)
                .expect("histograms of the same bounds");
        }
        for (kind, n) in &other.errors {
            *self.errors.entry(kind.clone()).or_default() += n;
        }
        self.warmup_ok += other.warmup_ok;
        self.warmup_errors += other.warmup_errors;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn merged_parts_equal_the_whole() {
        let (mut a, mut b, mut whole) = (Stats::default(), Stats::default(), Stats::default());
        for i in 1..=1000u64 {
            let (at, lat) = (ms(i * 2), ms(i));
            if i % 2 == 0 { &mut a } else { &mut b }.ok(at, lat);
            whole.ok(at, lat);
        }
        a.error(ms(100), "transport");
        b.error(ms(2500), "transport");
        b.error(ms(10), "TASK_NOT_FOUND");
        b.extra("first_event", ms(4));
        a.warmup_ok = 7;
        a.merge(&b);
        assert_eq!(a.ok_count(), 1000);
        assert_eq!(a.error_count(), 3);
        assert_eq!(a.errors["transport"], 2);
        assert_eq!(a.timeline.len(), 3, "seconds 0, 1 and 2");
        assert_eq!(a.timeline[2].errors, 1);
        assert_eq!(a.extra["first_event"].len(), 1);
        assert_eq!(a.warmup_ok, 7);
        let (merged, all) = (a.latency(), whole.latency());
        assert_eq!(merged.len(), 1000);
        for q in [0.5, 0.9, 0.99, 0.999, 1.0] {
            assert_eq!(
                merged.value_at_quantile(q),
                all.value_at_quantile(q),
                "q={q}"
            );
        }
        // 3 significant digits: p50 of 1..=1000 ms is 500 ms within 0.1%.
        let p50 = merged.value_at_quantile(0.5) as f64;
        assert!((p50 - 500_000.0).abs() <= 500.0, "{p50}");
    }

    #[test]
    fn latencies_outside_the_bounds_are_clamped_not_lost() {
        let mut s = Stats::default();
        s.ok(ms(0), Duration::ZERO);
        s.ok(ms(0), Duration::from_secs(7200));
        let h = s.latency();
        assert_eq!(h.len(), 2);
        assert_eq!(h.min(), 1);
        assert!(h.max() >= MAX_MICROS);
    }
}
