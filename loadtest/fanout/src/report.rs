//! The JSON report of a run (`--json`), built from its [`Stats`], and its text summary.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::stats::Stats;
use crate::thresholds::Verdict;

/// Percentiles of one latency, in milliseconds.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Percentiles {
    pub count: u64,
    pub mean: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub p99_9: f64,
    pub max: f64,
}

impl Percentiles {
    pub fn of(h: &Histogram<u64>) -> Self {
        if h.is_empty() {
            return Self::default();
        }
        let ms = |us: u64| us as f64 / 1000.0;
        Self {
            count: h.len(),
            mean: h.mean() / 1000.0,
            p50: ms(h.value_at_quantile(0.50)),
            p90: ms(h.value_at_quantile(0.90)),
            p99: ms(h.value_at_quantile(0.99)),
            p99_9: ms(h.value_at_quantile(0.999)),
            max: ms(h.max()),
        }
    }
}

/// One second of the measured window.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Point {
    /// Seconds since the end of the warm-up (the start of this second).
    pub t: u64,
    pub ok: u64,
    pub errors: u64,
    pub p50_ms: f64,
    pub p99_ms: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Report {
    /// `send`, `stream`, `baseline-http`...
    pub scenario: String,
    pub target: String,
    pub binding: String,
    /// The load model, e.g. `open loop at 2000/s`.
    pub load: String,
    /// The command line that produced this report.
    pub command: String,
    /// RFC 3339, when the run started.
    pub started_at: String,
    /// The measured window: from the end of the warm-up to the last answer, in seconds.
    pub window_s: f64,
    pub ok: u64,
    pub errors: u64,
    /// Errors of a kind not announced with `--expect-error`: any makes the run fail.
    pub unexpected_errors: u64,
    pub warmup_ok: u64,
    pub warmup_errors: u64,
    /// Successes per second of the measured window.
    pub throughput_rps: f64,
    pub error_rate: f64,
    pub latency_ms: Percentiles,
    /// Secondary latencies by name (`first_event` of a stream...).
    pub extra_ms: BTreeMap<String, Percentiles>,
    pub errors_by_kind: BTreeMap<String, u64>,
    /// The first message of each error kind.
    pub first_errors: BTreeMap<String, String>,
    pub timeline: Vec<Point>,
    /// CPU cores the generator itself used on average (user + system time / wall time).
    pub generator_cores: f64,
    #[serde(default)]
    pub thresholds: Vec<Verdict>,
}

pub struct RunInfo<'a> {
    pub scenario: &'a str,
    pub target: &'a str,
    pub binding: &'a str,
    pub load: String,
    pub started_at: String,
    pub expected_errors: &'a [String],
    pub generator_cores: f64,
}

impl Report {
    pub fn build(
        info: RunInfo<'_>,
        stats: &Stats,
        first_errors: BTreeMap<String, String>,
        window: Duration,
    ) -> Self {
        let ok = stats.ok_count();
        let errors = stats.error_count();
        let unexpected_errors = stats
            .errors
            .iter()
            .filter(|(kind, _)| !info.expected_errors.contains(kind))
            .map(|(_, n)| n)
            .sum();
        let secs = window.as_secs_f64();
        Self {
            scenario: info.scenario.to_owned(),
            target: info.target.to_owned(),
            binding: info.binding.to_owned(),
            load: info.load,
            command: std::env::args()
                .map(|a| shell_word(&a))
                .collect::<Vec<_>>()
                .join(" "),
            started_at: info.started_at,
            window_s: secs,
            ok,
            errors,
            unexpected_errors,
            warmup_ok: stats.warmup_ok,
            warmup_errors: stats.warmup_errors,
            throughput_rps: if secs > 0.0 { ok as f64 / secs } else { 0.0 },
            error_rate: if ok + errors > 0 {
                errors as f64 / (ok + errors) as f64
            } else {
                0.0
            },
            latency_ms: Percentiles::of(&stats.latency()),
            extra_ms: stats
                .extra
                .iter()
                .map(|(k, h)| (k.clone(), Percentiles::of(h)))
                .collect(),
            errors_by_kind: stats.errors.clone(),
            first_errors,
            timeline: stats
                .timeline
                .iter()
                .enumerate()
                .map(|(t, s)| Point {
                    t: t as u64,
                    ok: s.ok,
                    errors: s.errors,
                    p50_ms: s.latency.value_at_quantile(0.5) as f64 / 1000.0,
                    p99_ms: s.latency.value_at_quantile(0.99) as f64 / 1000.0,
                })
                .collect(),
            generator_cores: info.generator_cores,
            thresholds: Vec::new(),
        }
    }

    /// The text summary printed at the end of a run.
    pub fn summary(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "{} {} ({}), {}: {:.2} s measured",
            self.scenario, self.target, self.binding, self.load, self.window_s
        );
        let _ = writeln!(
            s,
            "  requests   {} ok, {} errors ({:.3}%), {} during the warm-up",
            self.ok,
            self.errors,
            self.error_rate * 100.0,
            self.warmup_ok + self.warmup_errors
        );
        let _ = writeln!(
            s,
            "  throughput {:.1} req/s (generator used {:.2} cores)",
            self.throughput_rps, self.generator_cores
        );
        let line = |name: &str, p: &Percentiles| {
            format!(
                "  {name:<10} p50 {:.3} ms  p90 {:.3} ms  p99 {:.3} ms  p99.9 {:.3} ms  max {:.3} ms\n",
                p.p50, p.p90, p.p99, p.p99_9, p.max
            )
        };
        s.push_str(&line("latency", &self.latency_ms));
        for (name, p) in &self.extra_ms {
            s.push_str(&line(name, p));
        }
        for (kind, n) in &self.errors_by_kind {
            let first = self
                .first_errors
                .get(kind)
                .map(String::as_str)
                .unwrap_or("");
            let _ = writeln!(s, "  error      {kind}: {n} (first: {first})");
        }
        for v in &self.thresholds {
            let _ = writeln!(
                s,
                "  threshold  {} {} (actual {}): {}",
                v.name,
                v.limit,
                v.actual,
                if v.passed { "passed" } else { "MISSED" }
            );
        }
        s
    }
}

/// `arg` as a POSIX shell reads it back: as is when it is plain, else in single quotes.
fn shell_word(arg: &str) -> String {
    let plain = !arg.is_empty()
        && arg
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:=@%+,".contains(c));
    if plain {
        arg.to_owned()
    } else {
        format!("'{}'", arg.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn sample() -> Report {
        let mut stats = Stats::default();
        for i in 0..3000u64 {
            stats.ok(
                Duration::from_millis(i),
                Duration::from_micros(1000 + i % 100),
            );
        }
        stats.error(Duration::from_millis(10), "transport");
        stats.extra("first_event", Duration::from_millis(1));
        Report::build(
            RunInfo {
                scenario: "send",
                target: "http://127.0.0.1:1",
                binding: "JSONRPC",
                load: "closed loop, 1 concurrent".into(),
                started_at: "2026-11-24T00:00:00Z".into(),
                expected_errors: &[],
                generator_cores: 0.5,
            },
            &stats,
            [("transport".to_owned(), "refused".to_owned())].into(),
            Duration::from_secs(3),
        )
    }

    #[test]
    fn commands_quote_what_the_shell_would_split() {
        assert_eq!(shell_word("--rate"), "--rate");
        assert_eq!(shell_word("http://127.0.0.1:8080"), "http://127.0.0.1:8080");
        assert_eq!(shell_word(r#"{"chunks": 10}"#), r#"'{"chunks": 10}'"#);
        assert_eq!(shell_word("it's"), r"'it'\''s'");
        assert_eq!(shell_word(""), "''");
    }

    #[test]
    fn counts_rates_and_percentiles() {
        let r = sample();
        assert_eq!((r.ok, r.errors, r.unexpected_errors), (3000, 1, 1));
        assert!((r.throughput_rps - 1000.0).abs() < 1e-9);
        assert_eq!(r.timeline.len(), 3);
        assert_eq!(r.timeline.iter().map(|p| p.ok).sum::<u64>(), r.ok);
        assert!(r.latency_ms.p50 >= 1.0 && r.latency_ms.p50 <= 1.1);
        assert!(r.latency_ms.max >= 1.099);
        let json = serde_json::to_string(&r).unwrap();
        let back: Report = serde_json::from_str(&json).unwrap();
        assert_eq!(back, r);
        let text = r.summary();
        assert!(text.contains("3000 ok, 1 errors"), "{text}");
        assert!(text.contains("transport: 1 (first: refused)"), "{text}");
        assert!(text.contains("first_event"), "{text}");
    }
}
