//! `--compare a.json b.json`: the second run's figures as ratios of the first's.

use std::fmt::Write as _;

use anyhow::{Context, Result};

use crate::report::Report;

pub fn load(path: &str) -> Result<Vec<Report>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {path}"))?;
    // A report file holds one run, or a list (baseline).
    serde_json::from_str::<Vec<Report>>(&text)
        .or_else(|_| serde_json::from_str::<Report>(&text).map(|r| vec![r]))
        .with_context(|| format!("{path}: not an a2a-loadtest JSON report"))
}

pub fn compare(a: &Report, b: &Report) -> String {
    let mut s = format!(
        "{:<16} {:>14} {:>14} {:>8}\n",
        format!("{} vs {}", a.scenario, b.scenario),
        "A",
        "B",
        "B/A"
    );
    let mut row = |name: &str, x: f64, y: f64| {
        let ratio = if x != 0.0 {
            format!("{:.2}", y / x)
        } else {
            "-".into()
        };
        let _ = writeln!(s, "{name:<16} {x:>14.3} {y:>14.3} {ratio:>8}");
    };
    row("req/s", a.throughput_rps, b.throughput_rps);
    row("p50 ms", a.latency_ms.p50, b.latency_ms.p50);
    row("p90 ms", a.latency_ms.p90, b.latency_ms.p90);
    row("p99 ms", a.latency_ms.p99, b.latency_ms.p99);
    row("p99.9 ms", a.latency_ms.p99_9, b.latency_ms.p99_9);
    row("max ms", a.latency_ms.max, b.latency_ms.max);
    row("error rate %", a.error_rate * 100.0, b.error_rate * 100.0);
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratios_of_b_to_a() {
        let a = crate::report::tests::sample();
        let mut b = a.clone();
        b.throughput_rps *= 2.0;
        let out = compare(&a, &b);
        let rps = out.lines().find(|l| l.starts_with("req/s")).unwrap();
        assert!(rps.trim_end().ends_with("2.00"), "{out}");
        let p50 = out.lines().find(|l| l.starts_with("p50")).unwrap();
        assert!(p50.trim_end().ends_with("1.00"), "{out}");
    }
}
