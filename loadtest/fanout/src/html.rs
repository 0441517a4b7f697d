//! `--report report.html`: one self-contained page (inline SVG, no script, no network) with the
//! summary, latency over time and throughput over time of each run.

use std::fmt::Write as _;

use crate::report::Report;

const W: f64 = 720.0;
const H: f64 = 220.0;
const PAD: f64 = 44.0;

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A line chart of `series` (name, colour, y per second) with axes from 0 to the maximum.
fn chart(title: &str, unit: &str, series: &[(&str, &str, Vec<f64>)]) -> String {
    let n = series.iter().map(|s| s.2.len()).max().unwrap_or(0).max(2);
    let top = series
        .iter()
        .flat_map(|s| s.2.iter().copied())
        .fold(0.0f64, f64::max)
        .max(1e-9)
        * 1.1;
    let x = |i: usize| PAD + (W - 2.0 * PAD) * i as f64 / (n - 1) as f64;
    let y = |v: f64| H - PAD + (2.0 * PAD - H) * v / top;
    let mut svg = format!(
        r#"<figure><figcaption>{}</figcaption><svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" role="img">"#,
        esc(title)
    );
    let _ = write!(
        svg,
        r##"<line x1="{PAD}" y1="{b}" x2="{r}" y2="{b}" stroke="#888"/><line x1="{PAD}" y1="{PAD}" x2="{PAD}" y2="{b}" stroke="#888"/>"##,
        b = H - PAD,
        r = W - PAD
    );
    for frac in [0.0, 0.5, 1.0] {
        let v = top / 1.1 * frac;
        let _ = write!(
            svg,
            r##"<text x="{}" y="{:.1}" font-size="11" text-anchor="end" fill="#444">{v:.1} {unit}</text>"##,
            PAD - 4.0,
            y(v) + 4.0
        );
    }
    let _ = write!(
        svg,
        r##"<text x="{}" y="{}" font-size="11" text-anchor="end" fill="#444">{} s</text>"##,
        W - PAD,
        H - PAD + 16.0,
        n - 1
    );
    for (k, (name, colour, ys)) in series.iter().enumerate() {
        let points: Vec<String> = ys
            .iter()
            .enumerate()
            .map(|(i, v)| format!("{:.1},{:.1}", x(i), y(*v)))
            .collect();
        let _ = write!(
            svg,
            r#"<polyline fill="none" stroke="{colour}" stroke-width="1.5" points="{}"/><text x="{}" y="{}" font-size="11" fill="{colour}">{}</text>"#,
            points.join(" "),
            PAD + 8.0 + 110.0 * k as f64,
            PAD - 10.0,
            esc(name)
        );
    }
    svg.push_str("</svg></figure>");
    svg
}

fn run_section(r: &Report) -> String {
    let mut s = format!(
        "<section><h2>{} — {} ({})</h2><p><code>{}</code></p><pre>{}</pre>",
        esc(&r.scenario),
        esc(&r.target),
        esc(&r.binding),
        esc(&r.command),
        esc(&r.summary())
    );
    // The window's whole seconds only: a last bucket past them holds the answers that arrived
    // after the window ended (requests in flight at its end), a fraction of a second's worth,
    // which a chart of rates would show as a collapse. They still count in the summary.
    let whole = (r.window_s.floor() as usize).max(1);
    let timeline = &r.timeline[..r.timeline.len().min(whole)];
    let col = |f: fn(&crate::report::Point) -> f64| timeline.iter().map(f).collect::<Vec<_>>();
    s.push_str(&chart(
        "Latency over time (per second of the measured window)",
        "ms",
        &[
            ("p50", "#1f77b4", col(|p| p.p50_ms)),
            ("p99", "#d62728", col(|p| p.p99_ms)),
        ],
    ));
    s.push_str(&chart(
        "Throughput over time",
        "/s",
        &[
            ("ok/s", "#2ca02c", col(|p| p.ok as f64)),
            ("errors/s", "#d62728", col(|p| p.errors as f64)),
        ],
    ));
    s.push_str("</section>");
    s
}

pub fn render(runs: &[Report]) -> String {
    let mut page = String::from(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>a2a-loadtest report</title>\
         <style>body{font-family:sans-serif;max-width:800px;margin:2em auto}pre{background:#f4f4f4;padding:8px;overflow-x:auto}figcaption{font-weight:bold}</style>\
         </head><body><h1>a2a-loadtest report</h1>",
    );
    if let Some(first) = runs.first() {
        let _ = write!(page, "<p>Started {}</p>", esc(&first.started_at));
    }
    for r in runs {
        page.push_str(&run_section(r));
    }
    page.push_str("</body></html>\n");
    page
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_self_contained_page_with_both_charts() {
        let mut r = crate::report::tests::sample();
        r.target = "http://x/?a=<b>".into();
        let page = render(&[r]);
        assert!(page.starts_with("<!doctype html>"));
        assert_eq!(page.matches("<svg").count(), 2);
        assert_eq!(page.matches("<polyline").count(), 4);
        assert!(page.contains("Latency over time") && page.contains("Throughput over time"));
        assert!(page.contains("http://x/?a=&lt;b&gt;"), "escaped");
        assert!(
            !page.contains("<script") && !page.contains("src="),
            "no network, no script"
        );
        // One point per second of the timeline.
        assert_eq!(points_of(&page, 1).split(' ').count(), 3);
    }

    /// The `points` of the page's `n`th polyline (from 1).
    fn points_of(page: &str, n: usize) -> &str {
        let line = page.split("<polyline").nth(n).unwrap();
        line.split("points=\"")
            .nth(1)
            .unwrap()
            .split('"')
            .next()
            .unwrap()
    }

    #[test]
    fn answers_after_the_window_are_not_charted_as_a_second() {
        let mut r = crate::report::tests::sample();
        // Requests in flight when the 3 s window ended, answered just after it.
        r.timeline.push(crate::report::Point {
            t: 3,
            ok: 5,
            errors: 0,
            p50_ms: 1.0,
            p99_ms: 1.0,
        });
        let page = render(&[r]);
        // The third line: ok/s.
        assert_eq!(
            points_of(&page, 3).split(' ').count(),
            3,
            "seconds 0, 1 and 2 only"
        );
    }
}
