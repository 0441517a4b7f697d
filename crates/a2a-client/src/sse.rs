//! A small, bounded server-sent-events parser (the WHATWG `text/event-stream` rules the A2A
//! streams use): lines end in LF, CRLF or CR; `data:` lines join with LF; `id:` and `event:` are
//! kept per event; comments (`:`) and unknown fields are ignored; a blank line dispatches an event
//! when it has data. One event (its pending line plus its data) may not exceed `max_event_bytes`.

use bytes::Bytes;
use futures::stream::{BoxStream, Stream, StreamExt};

use crate::error::ClientError;

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SseEvent {
    /// The `event:` field, when the event had one.
    pub event: Option<String>,
    /// The `id:` field set in this event (not inherited from earlier events).
    pub id: Option<String>,
    pub data: String,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SseError {
    #[error("an SSE event is larger than {0} bytes")]
    TooLarge(usize),
    #[error("an SSE line is not UTF-8")]
    NotUtf8,
}

/// Incremental parser: feed bytes with [`SseParser::push`], collect events as they complete.
#[derive(Debug)]
pub struct SseParser {
    max_event_bytes: usize,
    line: Vec<u8>,
    /// The previous chunk ended in CR: a LF at the start of the next one belongs to it.
    skip_lf: bool,
    current: SseEvent,
    has_data: bool,
    /// Bytes held for the event being built (data + pending line).
    held: usize,
}

impl SseParser {
    pub fn new(max_event_bytes: usize) -> Self {
        Self {
            max_event_bytes,
            line: Vec::new(),
            skip_lf: false,
            current: SseEvent::default(),
            has_data: false,
            held: 0,
        }
    }

    /// Feeds a chunk; returns the events it completed, in order.
    pub fn push(&mut self, mut chunk: &[u8]) -> Result<Vec<SseEvent>, SseError> {
        let mut out = Vec::new();
        if self.skip_lf {
            self.skip_lf = false;
            if let Some(rest) = chunk.strip_prefix(b"\n") {
                chunk = rest;
            }
        }
        while !chunk.is_empty() {
            match chunk.iter().position(|b| *b == b'\n' || *b == b'\r') {
                None => {
                    self.hold(chunk.len())?;
                    self.line.extend_from_slice(chunk);
                    break;
                }
                Some(i) => {
                    self.hold(i)?;
                    self.line.extend_from_slice(&chunk[..i]);
                    let cr = chunk[i] == b'\r';
                    chunk = &chunk[i + 1..];
                    if cr {
                        match chunk.first() {
                            Some(b'\n') => chunk = &chunk[1..],
                            Some(_) => {}
                            None => self.skip_lf = true,
                        }
                    }
                    let line = std::mem::take(&mut self.line);
                    if let Some(ev) = self.line_done(&line)? {
                        out.push(ev);
                    }
                }
            }
        }
        Ok(out)
    }

    fn hold(&mut self, n: usize) -> Result<(), SseError> {
        self.held += n;
        if self.held > self.max_event_bytes {
            Err(SseError::TooLarge(self.max_event_bytes))
        } else {
            Ok(())
        }
    }

    fn line_done(&mut self, line: &[u8]) -> Result<Option<SseEvent>, SseError> {
        if line.is_empty() {
            let ev = std::mem::take(&mut self.current);
            let dispatch = std::mem::take(&mut self.has_data);
            self.held = 0;
            return Ok(dispatch.then_some(ev));
        }
        if line[0] == b':' {
            self.held -= line.len();
            return Ok(None);
        }
        let line = std::str::from_utf8(line).map_err(|_| SseError::NotUtf8)?;
        let (field, value) = match line.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (line, ""),
        };
        match field {
            "data" => {
                if self.has_data {
                    self.current.data.push('\n');
                    self.hold(1)?;
                }
                self.current.data.push_str(value);
                self.has_data = true;
            }
            "id" if !value.contains('\0') => self.current.id = Some(value.to_owned()),
            "event" => self.current.event = Some(value.to_owned()),
            _ => {}
        }
        Ok(None)
    }
}

/// Turns a response body into its SSE events. A body that ends mid-event drops that event (the
/// server closed the stream); a transport error or an oversized event ends the stream with an
/// error.
pub fn events<S, E>(
    body: S,
    max_event_bytes: usize,
) -> BoxStream<'static, Result<SseEvent, ClientError>>
where
    S: Stream<Item = Result<Bytes, E>> + Send + 'static,
    E: std::error::Error + Send + Sync + 'static,
{
    let state = (
        Box::pin(body),
        SseParser::new(max_event_bytes),
        std::collections::VecDeque::new(),
        false,
    );
    futures::stream::unfold(
        state,
        |(mut body, mut parser, mut queue, mut done)| async move {
            loop {
                if let Some(ev) = queue.pop_front() {
                    return Some((Ok(ev), (body, parser, queue, done)));
                }
                if done {
                    return None;
                }
                match body.next().await {
                    None => return None,
                    Some(Err(e)) => {
                        done = true;
                        let err = ClientError::transport("reading the event stream", e);
                        return Some((Err(err), (body, parser, queue, done)));
                    }
                    Some(Ok(chunk)) => match parser.push(&chunk) {
                        Ok(evs) => queue.extend(evs),
                        Err(e) => {
                            done = true;
                            let err = ClientError::decode("event stream", e);
                            return Some((Err(err), (body, parser, queue, done)));
                        }
                    },
                }
            }
        },
    )
    .boxed()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_all(chunks: &[&[u8]]) -> Vec<SseEvent> {
        let mut p = SseParser::new(1024);
        chunks.iter().flat_map(|c| p.push(c).unwrap()).collect()
    }

    fn ev(id: Option<&str>, event: Option<&str>, data: &str) -> SseEvent {
        SseEvent {
            event: event.map(str::to_owned),
            id: id.map(str::to_owned),
            data: data.to_owned(),
        }
    }

    #[test]
    fn basic_events_with_ids_and_types() {
        let evs = parse_all(&[b"id: 1\ndata: {\"a\":1}\n\nevent: error\ndata: x\n\n"]);
        assert_eq!(
            evs,
            [
                ev(Some("1"), None, "{\"a\":1}"),
                ev(None, Some("error"), "x")
            ]
        );
    }

    #[test]
    fn comments_keep_alives_and_unknown_fields_are_ignored() {
        let evs = parse_all(&[b": keep-alive\n\nretry: 10\nfoo: bar\ndata:x\n\n: ping\n\n"]);
        assert_eq!(evs, [ev(None, None, "x")]);
    }

    #[test]
    fn multi_line_data_joins_with_lf() {
        let evs = parse_all(&[b"data: a\ndata: b\ndata\n\n"]);
        assert_eq!(evs, [ev(None, None, "a\nb\n")]);
    }

    #[test]
    fn crlf_and_cr_line_ends_even_split_across_chunks() {
        let evs = parse_all(&[b"data: a\r", b"\n\r", b"\ndata: b\r\r", b"data: c\n", b"\n"]);
        assert_eq!(
            evs,
            [
                ev(None, None, "a"),
                ev(None, None, "b"),
                ev(None, None, "c")
            ]
        );
    }

    #[test]
    fn events_split_at_every_byte() {
        let input = b"id: 7\r\ndata: {\"x\": \"\xc3\xa9\"}\r\n\r\n";
        let mut p = SseParser::new(1024);
        let mut out = Vec::new();
        for b in input.iter() {
            out.extend(p.push(std::slice::from_ref(b)).unwrap());
        }
        assert_eq!(out, [ev(Some("7"), None, "{\"x\": \"é\"}")]);
    }

    #[test]
    fn an_event_without_data_is_not_dispatched() {
        assert!(parse_all(&[b"id: 3\nevent: x\n\n"]).is_empty());
    }

    #[test]
    fn oversized_events_are_refused() {
        let mut p = SseParser::new(16);
        assert_eq!(
            p.push(b"data: 0123456789abcdef\n"),
            Err(SseError::TooLarge(16))
        );
        let mut p = SseParser::new(16);
        p.push(b"data: 0123456\n").unwrap();
        assert_eq!(p.push(b"data: 0123456\n"), Err(SseError::TooLarge(16)));
        // The limit is per event: many small events are fine.
        let mut p = SseParser::new(16);
        for _ in 0..100 {
            assert_eq!(p.push(b"data: 0123456\n\n").unwrap().len(), 1);
        }
    }

    #[test]
    fn invalid_utf8_is_an_error() {
        let mut p = SseParser::new(64);
        assert_eq!(p.push(b"data: \xff\n"), Err(SseError::NotUtf8));
    }

    #[tokio::test]
    async fn the_stream_adapter_ends_with_the_body() {
        let chunks: Vec<Result<Bytes, std::io::Error>> = vec![
            Ok(Bytes::from_static(b"data: 1\n\nda")),
            Ok(Bytes::from_static(b"ta: 2\n\ndata: partial")),
        ];
        let evs: Vec<_> = events(futures::stream::iter(chunks), 1024)
            .collect::<Vec<_>>()
            .await;
        let data: Vec<_> = evs.into_iter().map(|e| e.unwrap().data).collect();
        assert_eq!(data, ["1", "2"]);
    }
}
