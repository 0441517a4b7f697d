//! `a2a-loadtest table`: JSON reports as one Markdown table, each row's throughput also as a
//! ratio of a reference row's (a raw limit measured in the same run), with the commands that
//! produced them. `loadtest/publish.sh` builds the published figures with it.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::{Context, Result, bail};

use crate::report::Report;

#[derive(Debug, Clone, clap::Args)]
pub struct TableArgs {
    /// The row whose throughput the others are divided by (its run name: a file's stem, or the
    /// scenario of a report inside a list such as `baseline-http`).
    #[arg(long = "ref", value_name = "RUN")]
    reference: Option<String>,
    /// Only these runs (repeatable; default: every report of the files).
    #[arg(long, value_name = "RUN")]
    only: Vec<String>,
    /// Report files (one report, or a list such as `baseline`'s), one row per report.
    #[arg(required = true)]
    files: Vec<String>,
}

/// A report and the name of its row.
pub struct Row {
    pub name: String,
    pub report: Report,
}

pub fn rows(files: &[String]) -> Result<Vec<Row>> {
    let mut rows = Vec::new();
    for file in files {
        let reports = crate::compare::load(file)?;
        let stem = Path::new(file)
            .file_stem()
            .and_then(|s| s.to_str())
            .with_context(|| format!("{file}: no file name"))?;
        // A list's rows are named by scenario (`baseline-http`), unless two share one
        // (`upstream-overhead`: the same scenario twice), then by the file and position.
        let mut scenarios: Vec<&str> = reports.iter().map(|r| r.scenario.as_str()).collect();
        scenarios.sort_unstable();
        scenarios.dedup();
        let by_scenario = reports.len() > 1 && scenarios.len() == reports.len();
        let single = reports.len() == 1;
        for (i, report) in reports.into_iter().enumerate() {
            let name = if single {
                stem.to_owned()
            } else if by_scenario {
                report.scenario.clone()
            } else {
                format!("{stem}-{}", i + 1)
            };
            rows.push(Row { name, report });
        }
    }
    Ok(rows)
}

fn ms(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0} ms")
    } else if v >= 10.0 {
        format!("{v:.1} ms")
    } else {
        format!("{v:.2} ms")
    }
}

/// Thousands separated by commas, as the README writes rates.
fn rate(v: f64) -> String {
    let digits = format!("{:.0}", v.max(0.0));
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

pub fn render(rows: &[Row], reference: Option<&str>) -> Result<String> {
    let base = match reference {
        Some(name) => Some(
            rows.iter()
                .find(|r| r.name == name)
                .with_context(|| format!("--ref {name}: no such run"))?
                .report
                .throughput_rps,
        ),
        None => None,
    };
    if base == Some(0.0) {
        bail!("--ref {}: a throughput of 0", reference.unwrap_or_default());
    }
    let mut s = String::from(
        "| run | binding | load | req/s | p50 | p99 | p99.9 | errors | ratio |\n\
         |---|---|---|---|---|---|---|---|---|\n",
    );
    for Row { name, report: r } in rows {
        let ratio = match base {
            Some(_) if reference == Some(name.as_str()) => "1".to_owned(),
            Some(b) => format!("{:.2}", r.throughput_rps / b),
            None => String::new(),
        };
        let l = &r.latency_ms;
        let _ = writeln!(
            s,
            "| `{name}` | {} | {} | {} | {} | {} | {} | {} | {ratio} |",
            r.binding,
            r.load,
            rate(r.throughput_rps),
            ms(l.p50),
            ms(l.p99),
            ms(l.p99_9),
            r.errors,
        );
    }
    s.push_str("\n<details><summary>commands</summary>\n\n```sh\n");
    // A list's reports (baseline) share one command: each command once.
    let mut seen = std::collections::HashSet::new();
    for Row { report, .. } in rows {
        if seen.insert(report.command.as_str()) {
            let _ = writeln!(s, "{}", report.command);
        }
    }
    s.push_str("```\n\n</details>\n");
    Ok(s)
}

pub fn run(a: &TableArgs) -> Result<()> {
    let mut rows = rows(&a.files)?;
    if !a.only.is_empty() {
        if let Some(missing) = a.only.iter().find(|n| !rows.iter().any(|r| &r.name == *n)) {
            bail!("--only {missing}: no such run");
        }
        rows.retain(|r| a.only.contains(&r.name));
    }
    print!("{}", render(&rows, a.reference.as_deref())?);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_with_ratios_and_commands() {
        let mut raw = crate::report::tests::sample();
        raw.scenario = "baseline-http".into();
        raw.throughput_rps = 40_000.0;
        raw.command = "a2a-loadtest baseline".into();
        let mut send = crate::report::tests::sample();
        send.throughput_rps = 21_234.4;
        send.command = "a2a-loadtest send --url http://127.0.0.1:8080".into();
        let rows = vec![
            Row {
                name: "baseline-http".into(),
                report: raw,
            },
            Row {
                name: "send-jsonrpc".into(),
                report: send,
            },
        ];
        let md = render(&rows, Some("baseline-http")).unwrap();
        let lines: Vec<&str> = md.lines().collect();
        assert!(
            lines[2].starts_with("| `baseline-http` | JSONRPC |"),
            "{md}"
        );
        assert!(
            lines[2].ends_with("| 40,000 | 1.05 ms | 1.10 ms | 1.10 ms | 1 | 1 |"),
            "{md}"
        );
        assert!(
            lines[3].contains("| 21,234 |") && lines[3].ends_with("| 0.53 |"),
            "{md}"
        );
        assert!(
            md.contains("a2a-loadtest send --url http://127.0.0.1:8080\n"),
            "{md}"
        );
        assert!(render(&rows, Some("nope")).is_err());
        assert!(!render(&rows, None).unwrap().contains("| 0.53 |"));
    }

    #[test]
    fn rows_named_by_file_or_scenario() {
        let dir = std::env::temp_dir().join(format!("a2a-table-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut a = crate::report::tests::sample();
        let b = a.clone();
        let write = |name: &str, json: String| {
            let path = dir.join(name);
            std::fs::write(&path, json).unwrap();
            path.to_string_lossy().into_owned()
        };
        let one = write("send-jsonrpc.json", serde_json::to_string(&a).unwrap());
        let twice = write(
            "upstream-overhead.json",
            serde_json::to_string(&[&a, &b]).unwrap(),
        );
        a.scenario = "baseline-http".into();
        let list = write("baseline.json", serde_json::to_string(&[&a, &b]).unwrap());
        let names: Vec<String> = rows(&[one, twice, list])
            .unwrap()
            .into_iter()
            .map(|r| r.name)
            .collect();
        assert_eq!(
            names,
            [
                "send-jsonrpc",
                "upstream-overhead-1",
                "upstream-overhead-2",
                "baseline-http",
                "send"
            ]
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn rates_with_separators() {
        assert_eq!(rate(0.4), "0");
        assert_eq!(rate(999.0), "999");
        assert_eq!(rate(1000.0), "1,000");
        assert_eq!(rate(1_234_567.8), "1,234,568");
    }
}
