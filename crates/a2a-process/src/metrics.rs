//! The process-wide Prometheus recorder both binaries export through: the `metrics` facade
//! records, `metrics-exporter-prometheus` renders, and each binary serves the text from its own
//! `/metrics` route (the exporter's HTTP listener is off).
//!
//! *Invariant*: the recorder is installed at most once per process ([`install`] is idempotent),
//! so many gateways in one test process share it; tests assert on deltas or on labels of their
//! own. Until something calls [`install`], every `metrics::` macro is a no-op.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};
#[cfg(feature = "export")]
use std::time::Duration;

#[cfg(feature = "export")]
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

/// Upper bounds (seconds) of every latency histogram's buckets: 100 µs (an in-memory store
/// read, a rejected request) to 60 s (a long blocking send or upstream turn), roughly ×2.5 per
/// step, so p50/p99 of sub-millisecond and multi-second latencies are both readable.
pub const LATENCY_BUCKETS: [f64; 18] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    5.0, 10.0, 30.0, 60.0,
];

/// Upper bounds (bytes) of the response body size histogram
/// (`a2a_server_response_body_size_bytes`): 100 B to 4 MiB, ×4 per step.
pub const SIZE_BUCKETS: [f64; 9] = [
    100.0,
    400.0,
    1_600.0,
    6_400.0,
    25_600.0,
    102_400.0,
    409_600.0,
    1_638_400.0,
    4_194_304.0,
];

/// Upper bounds of the events-per-stream histogram (`a2a_server_response_sse_events`).
pub const COUNT_BUCKETS: [f64; 10] = [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 1024.0];

/// How often histograms are drained into their rendered form between scrapes.
#[cfg(feature = "export")]
const UPKEEP: Duration = Duration::from_secs(5);

#[cfg(feature = "export")]
static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
/// Set by [`install`] (feature `export`): from then on the global recorder is ours.
static INSTALLED: AtomicBool = AtomicBool::new(false);

/// Installs the recorder (once per process) and returns the handle that renders it. `binary`
/// and `version` label `a2a_build_info`; the commit comes from `A2A_BUILD_COMMIT` at build time.
#[cfg(feature = "export")]
pub fn install(binary: &'static str, version: &'static str) -> PrometheusHandle {
    let handle = HANDLE.get_or_init(|| {
        let recorder = PrometheusBuilder::new()
            .set_buckets(&LATENCY_BUCKETS)
            .expect("the bucket list is not empty")
            .set_buckets_for_metric(
                metrics_exporter_prometheus::Matcher::Full(
                    "a2a_server_response_body_size_bytes".into(),
                ),
                &SIZE_BUCKETS,
            )
            .expect("the bucket list is not empty")
            .set_buckets_for_metric(
                metrics_exporter_prometheus::Matcher::Full("a2a_server_response_sse_events".into()),
                &COUNT_BUCKETS,
            )
            .expect("the bucket list is not empty")
            .build_recorder();
        let handle = recorder.handle();
        if metrics::set_global_recorder(recorder).is_err() {
            tracing::warn!("another metrics recorder is installed; /metrics stays empty");
        }
        // A plain thread: it must outlive whichever tokio runtime installed the recorder.
        let upkeep = handle.clone();
        std::thread::Builder::new()
            .name("metrics-upkeep".into())
            .spawn(move || {
                loop {
                    std::thread::sleep(UPKEEP);
                    upkeep.run_upkeep();
                }
            })
            .expect("a thread for metrics upkeep");
        INSTALLED.store(true, Ordering::Release);
        handle
    });
    metrics::gauge!(
        "a2a_build_info",
        "binary" => binary,
        "version" => version,
        "commit" => option_env!("A2A_BUILD_COMMIT").unwrap_or("unknown"),
    )
    .set(1.0);
    handle.clone()
}

/// Whether [`install`] has run in this process: from then on, every handle resolves to the
/// recorder for good (it cannot be replaced).
pub fn installed() -> bool {
    INSTALLED.load(Ordering::Acquire)
}

/// A metric handle of a fixed label set, resolved once: on the hot paths a registry lookup per
/// sample (building the key, hashing it, allocating its labels) is most of what metrics cost.
/// Nothing is resolved before [`install`] (the macros are no-ops then, and a no-op handle kept
/// for good would hide every later sample), so a call before it resolves `None`.
pub struct Cached<H>(OnceLock<H>);

impl<H> Cached<H> {
    #[allow(clippy::new_without_default)] // `const`: it lives in statics
    pub const fn new() -> Self {
        Self(OnceLock::new())
    }

    /// The handle, resolved by `resolve` on the first call after [`install`].
    #[inline]
    pub fn get(&self, resolve: impl FnOnce() -> H) -> Option<&H> {
        match self.0.get() {
            Some(h) => Some(h),
            None if installed() => Some(self.0.get_or_init(resolve)),
            None => None,
        }
    }
}

/// The Prometheus text of everything recorded, with the process metrics read just now.
#[cfg(feature = "export")]
pub fn render(handle: &PrometheusHandle) -> String {
    process::record();
    handle.render()
}

#[cfg(feature = "export")]
mod process {
    //! `process_*` series as Prometheus' own clients name them, read from `/proc/self` (Linux;
    //! elsewhere they are absent). No crate: three small files.

    /// Kernel clock ticks per second: 100 on every Linux platform we build for (`USER_HZ`).
    const TICKS_PER_SECOND: f64 = 100.0;
    const PAGE_SIZE: f64 = 4096.0;

    pub fn record() {
        if let Ok(stat) = std::fs::read_to_string("/proc/self/stat") {
            // Fields after the command name (which may contain spaces) start at `state` (3).
            if let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) {
                let f: Vec<&str> = rest.split_whitespace().collect();
                let num = |i: usize| f.get(i - 3).and_then(|v| v.parse::<f64>().ok());
                if let (Some(utime), Some(stime)) = (num(14), num(15)) {
                    metrics::gauge!("process_cpu_seconds_total")
                        .set((utime + stime) / TICKS_PER_SECOND);
                }
                if let Some(rss) = num(24) {
                    metrics::gauge!("process_resident_memory_bytes").set(rss * PAGE_SIZE);
                }
            }
        }
        if let Ok(fds) = std::fs::read_dir("/proc/self/fd") {
            metrics::gauge!("process_open_fds").set(fds.count() as f64);
        }
    }
}

#[cfg(all(test, feature = "export"))]
mod tests {
    #[test]
    fn renders_build_info_and_process_metrics() {
        let handle = super::install("test", "0.0.0");
        metrics::histogram!("a2a_test_seconds").record(0.0003);
        let text = super::render(&handle);
        assert!(
            text.contains("a2a_build_info{binary=\"test\",version=\"0.0.0\""),
            "{text}"
        );
        assert!(
            text.contains("a2a_test_seconds_bucket{le=\"0.0005\"} 1"),
            "{text}"
        );
        static CACHED: super::Cached<metrics::Counter> = super::Cached::new();
        for _ in 0..3 {
            let c = CACHED.get(|| metrics::counter!("a2a_test_cached_total", "k" => "v"));
            c.expect("resolved after install").increment(1);
        }
        let text = super::render(&handle);
        assert!(text.contains("a2a_test_cached_total{k=\"v\"} 3"), "{text}");
        if cfg!(target_os = "linux") {
            assert!(text.contains("process_resident_memory_bytes "), "{text}");
            assert!(text.contains("process_open_fds "), "{text}");
        }
    }
}
