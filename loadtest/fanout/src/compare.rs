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

/// The second run's figures beside the first's: their ratio and their difference.
pub fn compare(a: &Report, b: &Report) -> String {
    table(&format!("{} vs {}", a.scenario, b.scenario), a, b)
}

/// [`compare`] under a title of the caller's (`upstream-overhead`: direct vs through).
pub fn table(title: &str, a: &Report, b: &Report) -> String {
    let mut s = format!(
        "{title:<16} {:>14} {:>14} {:>8} {:>12}\n",
        "A", "B", "B/A", "B-A"
    );
    let mut row = |name: &str, x: f64, y: f64| {
        let ratio = if x != 0.0 {
            format!("{:.2}", y / x)
        } else {
            "-".into()
        };
        let _ = writeln!(
            s,
            "{name:<16} {x:>14.3} {y:>14.3} {ratio:>8} {:>12.3}",
            y - x
        );
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

    /// The cells of the row named `name` after its name: A, B, B/A, B-A.
    fn row(out: &str, name: &str) -> Vec<String> {
        let line = out.lines().find(|l| l.starts_with(name)).unwrap();
        line[name.len()..]
            .split_whitespace()
            .map(str::to_owned)
            .collect()
    }

    #[test]
    fn ratios_and_differences_of_b_to_a() {
        let a = crate::report::tests::sample();
        let mut b = a.clone();
        b.throughput_rps *= 2.0;
        b.latency_ms.p99 = a.latency_ms.p99 + 1.5;
        let out = compare(&a, &b);
        assert!(out.starts_with("send vs send"), "{out}");
        assert_eq!(row(&out, "req/s")[2..], ["2.00", "1000.000"], "{out}");
        assert_eq!(row(&out, "p50 ms")[2..], ["1.00", "0.000"], "{out}");
        assert_eq!(row(&out, "p99 ms")[3], "1.500", "{out}");
        let out = table("direct vs gateway", &a, &b);
        assert!(out.starts_with("direct vs gateway"), "{out}");
    }
}
