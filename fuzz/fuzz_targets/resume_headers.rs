//! The A2A service parameters of a request: lines `name: value` become headers (SSE
//! `Last-Event-ID`, gRPC `a2a-last-event-id`, `A2A-Version`, `A2A-Extensions`,
//! `Idempotency-Key`, `traceparent`); a line `?...` is the query string. A resume point that is
//! accepted is the number a resume header carried (`06` is 6).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut headers = Vec::new();
    let mut query = None;
    for line in data.split(|&b| b == b'\n') {
        if let Some(q) = line.strip_prefix(b"?") {
            query = std::str::from_utf8(q).ok();
        } else if let Some(i) = line.iter().position(|&b| b == b':') {
            let value = &line[i + 1..];
            let value = value.strip_prefix(b" ").unwrap_or(value);
            headers.push((&line[..i], value));
        }
    }
    if let Ok(ctx) = a2a_gateway::fuzzing::request_context(&headers, query) {
        if let Some(seq) = ctx.last_event_id {
            let named = headers.iter().any(|(name, value)| {
                (name.eq_ignore_ascii_case(b"last-event-id")
                    || name.eq_ignore_ascii_case(b"a2a-last-event-id"))
                    && std::str::from_utf8(value).is_ok_and(|v| v.trim().parse() == Ok(seq))
            });
            assert!(named, "resume point {seq} not in the headers");
        }
    }
});
