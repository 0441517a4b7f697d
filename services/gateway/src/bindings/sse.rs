//! Server-sent events shared by the HTTP bindings: one `data:` line per event, `id:` = the task
//! event's sequence number (absent for a direct Message reply), keep-alive comments, and an
//! end when the service's stream ends (terminal or interrupted state, error, or shutdown).

use std::convert::Infallible;
use std::time::Duration;

use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::{Stream, StreamExt};

use crate::service::{EventStream, SeqEvent};

/// Renders `events` as SSE; `encode` turns each item (event or final error) into the `data:` JSON.
pub fn respond<F>(events: EventStream, keep_alive: Duration, encode: F) -> Response
where
    F: Fn(Result<&SeqEvent, &a2a_types::A2aError>) -> String + Send + Sync + 'static,
{
    let stream = events.map(move |item| {
        let event = match &item {
            Ok(ev) => {
                let e = Event::default().data(encode(Ok(ev)));
                match ev.seq {
                    Some(seq) => e.id(seq.to_string()),
                    None => e,
                }
            }
            Err(err) => Event::default().event("error").data(encode(Err(err))),
        };
        Ok::<_, Infallible>(event)
    });
    sse_response(stream, keep_alive)
}

fn sse_response<S>(stream: S, keep_alive: Duration) -> Response
where
    S: Stream<Item = Result<Event, Infallible>> + Send + 'static,
{
    let mut response = Sse::new(stream)
        .keep_alive(KeepAlive::new().interval(keep_alive))
        .into_response();
    // Keep proxies from buffering the stream.
    response.headers_mut().insert(
        "x-accel-buffering",
        axum::http::HeaderValue::from_static("no"),
    );
    response
}
