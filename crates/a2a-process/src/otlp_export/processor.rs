//! [`OtlpProcessor`]: the span processor that replaces the SDK's batch processor.
//!
//! A span is encoded into the protobuf bytes of the next export ([`encode::span_entry`]) on the
//! thread that ends it, and its `SpanData` is freed right there, where it was allocated. The SDK's
//! batch processor instead sent each `SpanData` over a channel to its thread, which moved it into
//! a fresh batch vector (new pages every export) and freed it across threads: about 5% of a fully
//! traced gateway's CPU, several times the encoding itself. Protobuf's repeated fields are plain
//! concatenation, so a batch is its spans' entries one after another, per scope, and the export
//! only wraps them in the resource and scope headers.
//!
//! A thread of the processor's own exports: when a batch is full (`OTEL_BSP_MAX_EXPORT_BATCH_SIZE`
//! spans), when the oldest span has waited `OTEL_BSP_SCHEDULE_DELAY`, on `force_flush` and at
//! shutdown. At most `OTEL_BSP_MAX_QUEUE_SIZE` spans wait; more are dropped and counted
//! (`a2a_trace_spans_dropped_total`, and a warning at most every ten seconds), as the
//! specification's batch processor does.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, sync_channel};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use opentelemetry::{Context, InstrumentationScope};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::{OTelSdkError, OTelSdkResult};
use opentelemetry_sdk::trace::{Span, SpanData, SpanProcessor};

use super::{Config, Exporter, Limits, encode};

/// How often a warning about dropped spans or failed exports is logged at most.
const WARN_EVERY: Duration = Duration::from_secs(10);
/// Emptied batches kept for reuse (their buffers stay mapped, see [`super::Spare`]).
const KEEP_FREE: usize = 2;

/// Exports spans to an OTLP collector; see the module documentation.
pub struct OtlpProcessor {
    shared: Arc<Shared>,
    exporter: Arc<Exporter>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl std::fmt::Debug for OtlpProcessor {
    // Not the headers: they may carry credentials.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let c = self.exporter.config();
        f.debug_struct("OtlpProcessor")
            .field("protocol", &c.protocol)
            .field("authority", &c.authority)
            .field("path", &c.path)
            .field("limits", &self.shared.limits)
            .finish_non_exhaustive()
    }
}

struct Shared {
    state: Mutex<State>,
    /// Wakes the export thread: a batch is full, a flush is asked for, or shutdown.
    wake: Condvar,
    limits: Limits,
    /// Spans dropped because the queue was full, since the start.
    dropped: AtomicU64,
}

struct State {
    /// Where ending spans are encoded.
    current: Batch,
    /// Batches of `max_batch` spans waiting for the export thread, oldest first.
    full: Vec<Batch>,
    free: Vec<Batch>,
    /// Spans in `current` and `full`.
    queued: usize,
    /// The `ResourceSpans`' resource fields (set by the SDK before the first span).
    resource: Arc<Vec<u8>>,
    /// Callers of `force_flush` and `shutdown` waiting for what was queued before them to be
    /// exported.
    waiting: Vec<SyncSender<Result<(), String>>>,
    stopping: bool,
}

/// Encoded spans, per instrumentation scope (almost always one).
#[derive(Default)]
struct Batch {
    scopes: Vec<(InstrumentationScope, Vec<u8>)>,
    spans: usize,
}

impl Batch {
    fn push(&mut self, span: &SpanData) {
        let scope = &span.instrumentation_scope;
        let i = match self.scopes.iter().position(|(s, _)| s == scope) {
            Some(i) => i,
            None => {
                self.scopes.push((scope.clone(), Vec::new()));
                self.scopes.len() - 1
            }
        };
        encode::span_entry(&mut self.scopes[i].1, span);
        self.spans += 1;
    }

    /// Empties it, keeping its buffers (and scopes) for the next spans.
    fn clear(&mut self) {
        for (_, spans) in &mut self.scopes {
            spans.clear();
        }
        self.spans = 0;
    }
}

impl OtlpProcessor {
    /// A processor exporting as the standard variables say (`OTEL_EXPORTER_OTLP_*`,
    /// `OTEL_BSP_*`). Call it inside a tokio runtime: the exports run on it, and it must keep
    /// running until the processor is shut down.
    pub fn from_env(env: &dyn Fn(&str) -> Option<String>) -> Result<Self, String> {
        Self::new(Config::from_env(env)?, Limits::from_env(env)?)
    }

    pub fn new(config: Config, mut limits: Limits) -> Result<Self, String> {
        // What `Limits::from_env` refuses, made harmless here too: a zero delay would spin.
        limits.max_queue = limits.max_queue.max(1);
        limits.max_batch = limits.max_batch.clamp(1, limits.max_queue);
        limits.delay = limits.delay.max(Duration::from_millis(1));
        let exporter = Arc::new(Exporter::new(config)?);
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                current: Batch::default(),
                full: Vec::new(),
                free: Vec::new(),
                queued: 0,
                resource: Arc::new(encode::empty_resource_fields()),
                waiting: Vec::new(),
                stopping: false,
            }),
            wake: Condvar::new(),
            limits,
            dropped: AtomicU64::new(0),
        });
        let thread = std::thread::Builder::new()
            .name("otlp-export".into())
            .spawn({
                let (shared, exporter) = (shared.clone(), exporter.clone());
                move || {
                    let _dead = Stopped(&shared);
                    export_loop(&shared, &exporter);
                }
            })
            .map_err(|e| format!("cannot start the trace export thread: {e}"))?;
        Ok(Self {
            shared,
            exporter,
            thread: Mutex::new(Some(thread)),
        })
    }

    /// Asks the export thread to export everything queued, and returns the receiver of its
    /// answer; `stop` also ends the thread afterwards.
    fn ask(&self, stop: bool) -> Result<Receiver<Result<(), String>>, OTelSdkError> {
        let (tx, rx) = sync_channel(1);
        let mut state = self.shared.lock();
        if state.stopping {
            return Err(OTelSdkError::AlreadyShutdown);
        }
        state.waiting.push(tx);
        state.stopping |= stop;
        drop(state);
        self.shared.wake.notify_one();
        Ok(rx)
    }

    /// Spans dropped so far because the queue was full (also `a2a_trace_spans_dropped_total`).
    pub fn dropped(&self) -> u64 {
        self.shared.dropped.load(Ordering::Relaxed)
    }
}

/// Stops the processor when the export thread ends, however it ends (a panic included): later
/// spans are dropped and counted, and callers waiting for an export get an error instead of
/// waiting forever.
struct Stopped<'a>(&'a Shared);

impl Drop for Stopped<'_> {
    fn drop(&mut self) {
        let mut state = self.0.lock();
        state.stopping = true;
        // Dropping the senders answers their receivers with an error.
        state.waiting.clear();
    }
}

impl Drop for OtlpProcessor {
    /// Without a shutdown (the SDK's provider always calls it), the thread is told to export
    /// what is queued and end, without waiting for it.
    fn drop(&mut self) {
        self.shared.lock().stopping = true;
        self.shared.wake.notify_one();
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // Only a bug in the encoding could panic while holding the lock (leaving a partial span
        // in its batch, which the collector would refuse): recovering keeps the process's other
        // spans flowing rather than losing every later one.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl SpanProcessor for OtlpProcessor {
    fn on_start(&self, _span: &mut Span, _cx: &Context) {}

    fn on_end(&self, span: SpanData) {
        let limits = &self.shared.limits;
        let mut state = self.shared.lock();
        if state.stopping || state.queued >= limits.max_queue {
            drop(state);
            self.shared.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        state.current.push(&span);
        state.queued += 1;
        let full = state.current.spans >= limits.max_batch;
        if full {
            let next = state.free.pop().unwrap_or_default();
            let batch = std::mem::replace(&mut state.current, next);
            state.full.push(batch);
        }
        drop(state);
        if full {
            self.shared.wake.notify_one();
        }
        // `span` is freed here, on the thread that built it.
    }

    fn force_flush(&self) -> OTelSdkResult {
        let answer = self.ask(false)?;
        // Bounded: each batch's export is bounded by the exporter's timeout, and a thread that
        // died drops the sender (`Stopped`).
        match answer.recv() {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(OTelSdkError::InternalFailure(e)),
            Err(_) => Err(OTelSdkError::InternalFailure(
                "the trace export thread stopped".into(),
            )),
        }
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        let answer = self.ask(true)?;
        let result = match answer.recv_timeout(timeout) {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(OTelSdkError::InternalFailure(e)),
            Err(RecvTimeoutError::Timeout) => Err(OTelSdkError::Timeout(timeout)),
            Err(RecvTimeoutError::Disconnected) => Err(OTelSdkError::InternalFailure(
                "the trace export thread stopped".into(),
            )),
        };
        // The thread returns right after answering; joined only when it has, so that shutdown
        // never waits past its timeout (else it is left to end on its own).
        if let Some(thread) = self.thread.lock().ok().and_then(|mut t| t.take())
            && thread.is_finished()
        {
            let _ = thread.join();
        }
        self.exporter.close();
        result
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.shared.lock().resource = Arc::new(encode::resource_fields(resource));
    }
}

/// The export thread: waits for a full batch, the schedule delay, a flush or shutdown, then
/// exports what is queued (batch by batch) outside the lock, so spans keep being encoded
/// meanwhile.
fn export_loop(shared: &Shared, exporter: &Exporter) {
    let delay = shared.limits.delay;
    let mut due = Instant::now() + delay;
    let mut warnings = Warnings::default();
    let mut dropped_before = 0;
    loop {
        let mut state = shared.lock();
        while state.full.is_empty() && state.waiting.is_empty() && !state.stopping {
            let now = Instant::now();
            if now >= due {
                break;
            }
            state = shared
                .wake
                .wait_timeout(state, due - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        let mut batches = std::mem::take(&mut state.full);
        // The partial batch goes too when it is due, or when a flush or shutdown asks.
        let timer = Instant::now() >= due;
        if (timer || !state.waiting.is_empty() || state.stopping) && state.current.spans > 0 {
            let next = state.free.pop().unwrap_or_default();
            batches.push(std::mem::replace(&mut state.current, next));
        }
        if timer {
            due = Instant::now() + delay;
        }
        state.queued -= batches.iter().map(|b| b.spans).sum::<usize>();
        let waiting = std::mem::take(&mut state.waiting);
        let stopping = state.stopping;
        let resource = state.resource.clone();
        drop(state);

        let mut result = Ok(());
        for mut batch in batches {
            match exporter.export(&resource, &batch.scopes) {
                Ok(()) => metrics::counter!("a2a_trace_spans_exported_total")
                    .increment(batch.spans as u64),
                Err(e) => {
                    metrics::counter!("a2a_trace_exports_failed_total").increment(1);
                    warnings.failed(batch.spans, &e);
                    result = Err(e);
                }
            }
            batch.clear();
            let mut state = shared.lock();
            if state.free.len() < KEEP_FREE {
                state.free.push(batch);
            }
        }
        let dropped_now = shared.dropped.load(Ordering::Relaxed);
        let dropped = dropped_now - std::mem::replace(&mut dropped_before, dropped_now);
        if dropped > 0 {
            metrics::counter!("a2a_trace_spans_dropped_total").increment(dropped);
            warnings.dropped(dropped, shared.limits.max_queue);
        }
        if stopping {
            // Before answering: the caller may exit right after.
            warnings.flush(shared.limits.max_queue);
        }
        for waiter in waiting {
            let _ = waiter.send(result.clone());
        }
        if stopping {
            return;
        }
    }
}

/// Warnings about lost spans, at most one of each kind every [`WARN_EVERY`], with what was
/// lost since the last one.
#[derive(Default)]
struct Warnings {
    dropped: u64,
    dropped_at: Option<Instant>,
    failed: u64,
    failed_at: Option<Instant>,
    last_error: String,
}

impl Warnings {
    fn due(at: &mut Option<Instant>) -> bool {
        let now = Instant::now();
        if at.is_some_and(|t| now < t + WARN_EVERY) {
            return false;
        }
        *at = Some(now);
        true
    }

    fn dropped(&mut self, spans: u64, max_queue: usize) {
        self.dropped += spans;
        if Self::due(&mut self.dropped_at) {
            self.report_dropped(max_queue);
        }
    }

    fn report_dropped(&mut self, max_queue: usize) {
        if self.dropped > 0 {
            tracing::warn!(
                spans = self.dropped,
                max_queue,
                "spans dropped: the export queue was full (OTEL_BSP_MAX_QUEUE_SIZE, \
                 OTEL_BSP_SCHEDULE_DELAY, or a slow collector)"
            );
            self.dropped = 0;
        }
    }

    fn failed(&mut self, spans: usize, error: &str) {
        self.failed += spans as u64;
        error.clone_into(&mut self.last_error);
        if Self::due(&mut self.failed_at) {
            self.report_failed();
        }
    }

    fn report_failed(&mut self) {
        if self.failed > 0 {
            tracing::warn!(spans = self.failed, error = %self.last_error, "trace export failed: spans lost");
            self.failed = 0;
        }
    }

    /// What was not reported yet, at shutdown.
    fn flush(&mut self, max_queue: usize) {
        self.report_dropped(max_queue);
        self.report_failed();
    }
}
