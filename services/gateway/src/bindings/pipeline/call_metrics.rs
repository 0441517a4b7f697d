//! The metrics a [`Call`](super::Call) records: the per binding × method handles, resolved
//! once (they are recorded on every call), the semantic conventions' histograms, and what a
//! stream records while it is open and when it drops.

use std::time::Instant;

use a2a_process::metrics::Cached;
use a2a_types::Method;
use metrics::{Counter, Histogram};

use super::{Binding, UNKNOWN_METHOD};

/// The request metrics of each binding × method (the `ok` counter and the latency histogram),
/// resolved once: they are recorded on every call.
pub(super) static REQUEST_METRICS: [[Cached<(Counter, Histogram)>; Method::ALL.len() + 1]; 3] =
    [const { [const { Cached::new() }; Method::ALL.len() + 1] }; 3];

/// The A2A semantic conventions' server metrics (OpenTelemetry draft, Prometheus naming;
/// README, Metrics) of each binding × method, each resolved once, when first recorded (so a
/// unary method has no empty streaming series).
#[derive(Clone, Copy)]
pub(super) enum Semconv {
    /// A success's operation duration (failures carry `error_type` and are looked up).
    Duration,
    /// The JSON body of a success (the HTTP bindings').
    BodySize,
    /// From the request's arrival to its stream's first event.
    FirstEvent,
    /// SSE events a stream carried, recorded when it drops.
    Events,
}

type Handles = [[Cached<Histogram>; Method::ALL.len() + 1]; 3];

static SEMCONV_METRICS: [Handles; 4] =
    [const { [const { [const { Cached::new() }; Method::ALL.len() + 1] }; 3] }; 4];

pub(super) fn semconv(
    which: Semconv,
    binding: Binding,
    method: usize,
) -> Option<&'static Histogram> {
    let name = Method::ALL
        .get(method)
        .map_or(UNKNOWN_METHOD, |m| m.as_str());
    let b = binding.protocol_binding();
    SEMCONV_METRICS[which as usize][binding.index()][method].get(|| {
        let metric = match which {
            Semconv::Duration => "a2a_server_operation_duration_seconds",
            Semconv::BodySize => "a2a_server_response_body_size_bytes",
            Semconv::FirstEvent => "a2a_server_response_time_to_first_event_seconds",
            Semconv::Events => "a2a_server_response_sse_events",
        };
        metrics::histogram!(metric, "a2a_method_name" => name, "a2a_protocol_binding" => b)
    })
}

/// A stream's events so far and when its call started, for the streaming metrics (recorded
/// when the stream drops: the client went away or the stream ended).
pub(super) struct StreamMeter {
    pub(super) binding: Binding,
    pub(super) method: usize,
    pub(super) started: Instant,
    pub(super) events: u64,
}

impl StreamMeter {
    pub(super) fn event(&mut self) {
        if self.events == 0
            && let Some(h) = semconv(Semconv::FirstEvent, self.binding, self.method)
        {
            h.record(self.started.elapsed().as_secs_f64());
        }
        self.events += 1;
    }
}

impl Drop for StreamMeter {
    fn drop(&mut self) {
        // The draft counts SSE events only ("SHOULD NOT be reported otherwise"): gRPC streams
        // are left out.
        if self.binding != Binding::Grpc
            && let Some(h) = semconv(Semconv::Events, self.binding, self.method)
        {
            h.record(self.events as f64);
        }
    }
}

/// One open stream in `a2a_open_streams{binding}`, for as long as it lives.
pub(super) struct OpenStream(Binding);

impl OpenStream {
    pub(super) fn new(binding: Binding) -> Self {
        metrics::gauge!("a2a_open_streams", "binding" => binding.as_str()).increment(1.0);
        Self(binding)
    }
}

impl Drop for OpenStream {
    fn drop(&mut self) {
        metrics::gauge!("a2a_open_streams", "binding" => self.0.as_str()).decrement(1.0);
    }
}
