//! The live progress line on a terminal: once a second, the last second's rate, p50/p99 and
//! errors, and what is in flight.

use std::io::{IsTerminal, Write};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::load::Recorder;

pub fn spawn(rec: Arc<Recorder>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        if !std::io::stderr().is_terminal() {
            return;
        }
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        tick.tick().await;
        loop {
            tick.tick().await;
            let elapsed = rec.t0.elapsed();
            let in_flight = rec.in_flight.load(Ordering::Relaxed);
            let line = if elapsed < rec.measure_from - rec.t0 {
                format!("warm-up {:.0?}  in flight {in_flight}", elapsed)
            } else {
                let stats = rec.snapshot();
                // The last full second.
                let i = (rec.measure_from.elapsed().as_secs() as usize).saturating_sub(1);
                match stats.timeline.get(i) {
                    Some(s) => format!(
                        "{:>4}s  {:>8} req/s  p50 {:.2} ms  p99 {:.2} ms  errors {} ({} total)  in flight {in_flight}",
                        i + 1,
                        s.ok,
                        s.latency.value_at_quantile(0.5) as f64 / 1000.0,
                        s.latency.value_at_quantile(0.99) as f64 / 1000.0,
                        s.errors,
                        stats.error_count(),
                    ),
                    None => format!("{:>4}s  waiting for answers, in flight {in_flight}", i + 1),
                }
            };
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r\x1b[2K{line}");
            let _ = err.flush();
        }
    })
}

/// Clears the progress line before the summary.
pub fn clear() {
    let mut err = std::io::stderr();
    if err.is_terminal() {
        let _ = write!(err, "\r\x1b[2K");
        let _ = err.flush();
    }
}
