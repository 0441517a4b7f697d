//! Pass/fail limits for CI (`--max-p99 50ms --min-rps 5000 --max-error-rate 0.1%`).

use serde::{Deserialize, Serialize};
use std::time::Duration;

use crate::report::Report;

#[derive(Debug, Clone, Default)]
pub struct Thresholds {
    pub max_p50: Option<Duration>,
    pub max_p99: Option<Duration>,
    pub max_p999: Option<Duration>,
    pub min_rps: Option<f64>,
    pub max_error_rate: Option<f64>,
}

/// One limit checked against a run.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Verdict {
    pub name: String,
    pub limit: String,
    pub actual: String,
    pub passed: bool,
}

impl Thresholds {
    pub fn evaluate(&self, r: &Report) -> Vec<Verdict> {
        let mut out = Vec::new();
        let mut latency = |name: &str, limit: Option<Duration>, actual_ms: f64| {
            if let Some(limit) = limit {
                let limit_ms = limit.as_secs_f64() * 1000.0;
                out.push(Verdict {
                    name: name.into(),
                    limit: format!("{limit_ms} ms"),
                    actual: format!("{actual_ms:.3} ms"),
                    // No success at all has no latency to pass with.
                    passed: r.ok > 0 && actual_ms <= limit_ms,
                });
            }
        };
        latency("max-p50", self.max_p50, r.latency_ms.p50);
        latency("max-p99", self.max_p99, r.latency_ms.p99);
        latency("max-p99.9", self.max_p999, r.latency_ms.p99_9);
        if let Some(min) = self.min_rps {
            out.push(Verdict {
                name: "min-rps".into(),
                limit: format!("{min} req/s"),
                actual: format!("{:.1} req/s", r.throughput_rps),
                passed: r.throughput_rps >= min,
            });
        }
        if let Some(max) = self.max_error_rate {
            out.push(Verdict {
                name: "max-error-rate".into(),
                limit: format!("{}%", max * 100.0),
                actual: format!("{:.4}%", r.error_rate * 100.0),
                passed: r.error_rate <= max,
            });
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::Percentiles;

    fn report(p99: f64, rps: f64, ok: u64, errors: u64) -> Report {
        let mut r: Report = serde_json::from_value(serde_json::json!({
            "scenario": "send", "target": "t", "binding": "JSONRPC", "load": "l",
            "command": "c", "started_at": "s", "window_s": 1.0, "ok": ok, "errors": errors,
            "unexpected_errors": 0, "warmup_ok": 0, "warmup_errors": 0, "throughput_rps": rps,
            "error_rate": errors as f64 / (ok + errors).max(1) as f64,
            "latency_ms": Percentiles::default(), "extra_ms": {}, "errors_by_kind": {},
            "first_errors": {}, "timeline": [], "generator_cores": 0.0
        }))
        .unwrap();
        r.latency_ms.p99 = p99;
        r
    }

    #[test]
    fn each_limit_passes_at_the_limit_and_fails_past_it() {
        let t = Thresholds {
            max_p99: Some(Duration::from_millis(50)),
            min_rps: Some(5000.0),
            max_error_rate: Some(0.001),
            ..Default::default()
        };
        let pass = t.evaluate(&report(50.0, 5000.0, 1000, 1));
        assert_eq!(pass.len(), 3);
        assert!(pass.iter().all(|v| v.passed), "{pass:?}");
        let fail = t.evaluate(&report(50.1, 4999.9, 998, 2));
        assert!(fail.iter().all(|v| !v.passed), "{fail:?}");
        assert_eq!(fail[0].name, "max-p99");
        assert_eq!(fail[0].actual, "50.100 ms");
        // A run with no success fails a latency limit rather than passing it with p99 = 0.
        assert!(!t.evaluate(&report(0.0, 0.0, 0, 5))[0].passed);
        assert!(
            Thresholds::default()
                .evaluate(&report(1.0, 1.0, 1, 0))
                .is_empty()
        );
    }
}
