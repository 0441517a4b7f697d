//! `SpanData` → OTLP `ExportTraceServiceRequest` protobuf bytes, written straight into one
//! buffer (field numbers of opentelemetry-proto's `trace.proto`, `common.proto`,
//! `resource.proto` and `trace_service.proto`).
//!
//! Why by hand: the official path converts every span into owned proto structs (a `String` per
//! name, key and string value, a `Vec` per id) and then prost computes each nested message's
//! length again at every level of nesting while encoding. That was 13% of a traced gateway's
//! CPU. Here each value is copied once, from the span into the buffer: a nested message is
//! written after a length placeholder sized by a guess, and the placeholder is patched (the body
//! moved only when the guess was wrong), so no length is computed twice; a key/value pair's
//! length is known up front and written directly.
//!
//! Fields at their proto3 default are left out, as prost does, except those the official
//! conversion always sets (a span's `status`, the `resource` and `scope` messages, an
//! attribute's value), which are written even when empty so that a decoder sees them present.

use std::time::{SystemTime, UNIX_EPOCH};

use opentelemetry::trace::{SpanContext, SpanKind, Status, TraceState};
use opentelemetry::{Array, InstrumentationScope, KeyValue, Value};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::SpanData;

/// Wire types.
const VARINT: u32 = 0;
const FIXED64: u32 = 1;
const LEN: u32 = 2;
const FIXED32: u32 = 5;

/// `SpanFlags`: the W3C trace flags in the low byte, then whether the parent's (or a link's)
/// remoteness is known and whether it is remote.
const HAS_IS_REMOTE: u32 = 0x100;
const IS_REMOTE: u32 = 0x200;

/// The `resource` (field 1) and `schema_url` (field 3) of a `ResourceSpans`, encoded once when
/// the SDK hands the exporter its resource, and copied into every batch.
pub fn resource_fields(resource: &Resource) -> Vec<u8> {
    let mut buf = Vec::with_capacity(256);
    nested(&mut buf, 1, 2, |b| {
        for (k, v) in resource.iter() {
            key_value(b, 1, k.as_str(), v);
        }
    });
    if let Some(url) = resource.schema_url() {
        string(&mut buf, 3, url);
    }
    buf
}

/// `resource_fields` of a resource without attributes (before the SDK sets one).
pub fn empty_resource_fields() -> Vec<u8> {
    vec![tag(1, LEN) as u8, 0]
}

/// Appends one span to `buf` as an entry of a `ScopeSpans`' repeated `spans` (field 2). A
/// batch of spans of one scope is such entries one after another ([`request_of`] wraps them):
/// the processor encodes each span when it ends, and no span waits in memory as `SpanData`.
pub fn span_entry(buf: &mut Vec<u8>, span: &SpanData) {
    nested(buf, 2, 2, |b| self::span(b, span));
}

/// Appends the `ExportTraceServiceRequest` of encoded spans to `buf`: one `ResourceSpans` (the
/// process has one resource) with a `ScopeSpans` for each scope that has spans, their entries
/// ([`span_entry`]) copied as they are.
pub fn request_of(buf: &mut Vec<u8>, resource: &[u8], scopes: &[(InstrumentationScope, Vec<u8>)]) {
    // The lengths are known but for the scope headers' few bytes: placeholders of the right
    // width (the body is moved only when a header pushes a length over a varint boundary).
    let spans: usize = scopes.iter().map(|(_, s)| s.len() + 64).sum();
    nested(buf, 1, varint_len((resource.len() + spans) as u64), |b| {
        b.extend_from_slice(resource);
        for (scope, spans) in scopes.iter().filter(|(_, s)| !s.is_empty()) {
            nested(b, 2, varint_len(spans.len() as u64 + 64), |b| {
                scope_spans(b, scope, spans)
            });
        }
    });
}

/// [`request_of`] for a batch of `SpanData`, grouped by scope in the order each first appears.
#[cfg(test)]
pub fn request(buf: &mut Vec<u8>, resource: &[u8], batch: &[SpanData]) {
    let mut scopes: Vec<(InstrumentationScope, Vec<u8>)> = Vec::new();
    for span in batch {
        let scope = &span.instrumentation_scope;
        let i = match scopes.iter().position(|(s, _)| s == scope) {
            Some(i) => i,
            None => {
                scopes.push((scope.clone(), Vec::new()));
                scopes.len() - 1
            }
        };
        span_entry(&mut scopes[i].1, span);
    }
    request_of(buf, resource, &scopes);
}

/// A `ScopeSpans`' fields: the scope, the encoded spans, the schema URL.
fn scope_spans(buf: &mut Vec<u8>, scope: &InstrumentationScope, spans: &[u8]) {
    nested(buf, 1, 1, |b| {
        string(b, 1, scope.name());
        string(b, 2, scope.version().unwrap_or_default());
        for kv in scope.attributes() {
            key_value(b, 3, kv.key.as_str(), &kv.value);
        }
    });
    buf.extend_from_slice(spans);
    if let Some(url) = scope.schema_url() {
        string(buf, 3, url);
    }
}

fn span(buf: &mut Vec<u8>, span: &SpanData) {
    let cx = &span.span_context;
    ids(buf, cx);
    trace_state(buf, 3, cx.trace_state());
    if span.parent_span_id != opentelemetry::trace::SpanId::INVALID {
        bytes(buf, 4, &span.parent_span_id.to_bytes());
    }
    string(buf, 5, &span.name);
    let kind = match span.span_kind {
        SpanKind::Internal => 1,
        SpanKind::Server => 2,
        SpanKind::Client => 3,
        SpanKind::Producer => 4,
        SpanKind::Consumer => 5,
    };
    uint(buf, 6, kind);
    fixed64(buf, 7, nanos(span.start_time));
    fixed64(buf, 8, nanos(span.end_time));
    for kv in &span.attributes {
        key_value(buf, 9, kv.key.as_str(), &kv.value);
    }
    uint(buf, 10, span.dropped_attributes_count.into());
    for event in &span.events.events {
        nested(buf, 11, 1, |b| {
            fixed64(b, 1, nanos(event.timestamp));
            string(b, 2, &event.name);
            attributes(b, 3, &event.attributes);
            uint(b, 4, event.dropped_attributes_count.into());
        });
    }
    uint(buf, 12, span.events.dropped_count.into());
    for link in &span.links.links {
        nested(buf, 13, 1, |b| {
            ids(b, &link.span_context);
            trace_state(b, 3, link.span_context.trace_state());
            attributes(b, 4, &link.attributes);
            uint(b, 5, link.dropped_attributes_count.into());
            fixed32(
                b,
                6,
                flags(&link.span_context, link.span_context.is_remote()),
            );
        });
    }
    uint(buf, 14, span.links.dropped_count.into());
    // Always present (the official conversion sets it, `Unset` included).
    nested(buf, 15, 1, |b| match &span.status {
        Status::Unset => {}
        Status::Ok => uint(b, 3, 1),
        Status::Error { description } => {
            string(b, 2, description);
            uint(b, 3, 2);
        }
    });
    fixed32(buf, 16, flags(cx, span.parent_span_is_remote));
}

/// A span's or a link's `trace_id` (1) and `span_id` (2).
fn ids(buf: &mut Vec<u8>, cx: &SpanContext) {
    bytes(buf, 1, &cx.trace_id().to_bytes());
    bytes(buf, 2, &cx.span_id().to_bytes());
}

fn flags(cx: &SpanContext, remote: bool) -> u32 {
    u32::from(cx.trace_flags().to_u8()) | HAS_IS_REMOTE | if remote { IS_REMOTE } else { 0 }
}

fn trace_state(buf: &mut Vec<u8>, field: u32, state: &TraceState) {
    // Nearly always empty: build the header (an allocation) only when it is not.
    if *state != TraceState::NONE {
        string(buf, field, &state.header());
    }
}

fn attributes(buf: &mut Vec<u8>, field: u32, attributes: &[KeyValue]) {
    for kv in attributes {
        key_value(buf, field, kv.key.as_str(), &kv.value);
    }
}

fn nanos(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// A `KeyValue` message as field `field`; its length is known before it is written.
fn key_value(buf: &mut Vec<u8>, field: u32, key: &str, value: &Value) {
    let Some(value_len) = scalar_len(value) else {
        // An array: a nested message of nested messages, patched afterwards.
        nested(buf, field, 1, |b| {
            string(b, 1, key);
            nested(b, 2, 1, |b| any_value(b, value));
        });
        return;
    };
    let key_len = if key.is_empty() {
        0
    } else {
        1 + varint_len(key.len() as u64) + key.len()
    };
    let len = key_len + 1 + varint_len(value_len as u64) + value_len;
    tag_len(buf, field, len);
    string(buf, 1, key);
    tag_len(buf, 2, value_len);
    any_value(buf, value);
}

/// The encoded length of an `AnyValue` holding `value`, unless it is an array.
fn scalar_len(value: &Value) -> Option<usize> {
    Some(match value {
        Value::Bool(_) => 2,
        Value::I64(i) => 1 + varint_len(*i as u64),
        Value::F64(_) => 9,
        Value::String(s) => {
            let n = s.as_str().len();
            1 + varint_len(n as u64) + n
        }
        _ => return None,
    })
}

/// The fields of an `AnyValue` (its oneof: always written, even at its default).
fn any_value(buf: &mut Vec<u8>, value: &Value) {
    match value {
        Value::Bool(b) => bool_value(buf, *b),
        Value::I64(i) => int_value(buf, *i),
        Value::F64(f) => double_value(buf, *f),
        Value::String(s) => string_value(buf, s.as_str()),
        Value::Array(array) => nested(buf, 5, 2, |b| match array {
            Array::Bool(v) => each(b, v, |b, x| bool_value(b, *x)),
            Array::I64(v) => each(b, v, |b, x| int_value(b, *x)),
            Array::F64(v) => each(b, v, |b, x| double_value(b, *x)),
            Array::String(v) => each(b, v, |b, x| string_value(b, x.as_str())),
            // A kind of array added to the API later: its text rather than nothing.
            other => {
                let text = other.to_string();
                nested(b, 1, 1, |b| string_value(b, &text));
            }
        }),
        // A kind of value added to the API later: its text rather than a failed export.
        other => string_value(buf, &other.to_string()),
    }
}

/// The `values` (field 1) of an `ArrayValue`, one `AnyValue` each.
fn each<T>(buf: &mut Vec<u8>, values: &[T], one: impl Fn(&mut Vec<u8>, &T)) {
    for v in values {
        nested(buf, 1, 1, |b| one(b, v));
    }
}

fn bool_value(buf: &mut Vec<u8>, b: bool) {
    varint(buf, tag(2, VARINT));
    buf.push(u8::from(b));
}

fn int_value(buf: &mut Vec<u8>, i: i64) {
    varint(buf, tag(3, VARINT));
    varint(buf, i as u64);
}

fn double_value(buf: &mut Vec<u8>, f: f64) {
    varint(buf, tag(4, FIXED64));
    buf.extend_from_slice(&f.to_le_bytes());
}

fn string_value(buf: &mut Vec<u8>, s: &str) {
    tag_len(buf, 1, s.len());
    buf.extend_from_slice(s.as_bytes());
}

/// A nested message as field `field`: its body written by `body` after a length placeholder of
/// `guess` bytes, then the length patched in (the body moved when it needs more or fewer).
fn nested(buf: &mut Vec<u8>, field: u32, guess: usize, body: impl FnOnce(&mut Vec<u8>)) {
    varint(buf, tag(field, LEN));
    let at = buf.len();
    buf.resize(at + guess, 0);
    body(buf);
    let len = buf.len() - at - guess;
    let need = varint_len(len as u64);
    if need > guess {
        buf.resize(buf.len() + need - guess, 0);
        buf.copy_within(at + guess..at + guess + len, at + need);
    } else if need < guess {
        buf.copy_within(at + guess..at + guess + len, at + need);
        buf.truncate(at + need + len);
    }
    let mut v = len as u64;
    for slot in &mut buf[at..at + need] {
        *slot = (v as u8 & 0x7f) | 0x80;
        v >>= 7;
    }
    buf[at + need - 1] &= 0x7f;
}

fn tag(field: u32, wire_type: u32) -> u64 {
    u64::from((field << 3) | wire_type)
}

fn tag_len(buf: &mut Vec<u8>, field: u32, len: usize) {
    varint(buf, tag(field, LEN));
    varint(buf, len as u64);
}

fn string(buf: &mut Vec<u8>, field: u32, s: &str) {
    bytes(buf, field, s.as_bytes());
}

fn bytes(buf: &mut Vec<u8>, field: u32, b: &[u8]) {
    if !b.is_empty() {
        tag_len(buf, field, b.len());
        buf.extend_from_slice(b);
    }
}

fn uint(buf: &mut Vec<u8>, field: u32, v: u64) {
    if v != 0 {
        varint(buf, tag(field, VARINT));
        varint(buf, v);
    }
}

fn fixed64(buf: &mut Vec<u8>, field: u32, v: u64) {
    if v != 0 {
        varint(buf, tag(field, FIXED64));
        buf.extend_from_slice(&v.to_le_bytes());
    }
}

fn fixed32(buf: &mut Vec<u8>, field: u32, v: u32) {
    if v != 0 {
        varint(buf, tag(field, FIXED32));
        buf.extend_from_slice(&v.to_le_bytes());
    }
}

fn varint(buf: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        buf.push(v as u8 | 0x80);
        v >>= 7;
    }
    buf.push(v as u8);
}

fn varint_len(v: u64) -> usize {
    (64 - (v | 1).leading_zeros() as usize).div_ceil(7)
}
