//! What the two HTTP bindings share: the reqwest client, service-parameter headers, bounded body
//! reads, ProtoJSON decoding, and turning an SSE response into [`StreamEvent`]s.

use futures::StreamExt;
use serde::de::DeserializeOwned;

use crate::error::ClientError;
use crate::sse::SseEvent;
use crate::{Common, EventStream};

pub(crate) fn default_client() -> Result<reqwest::Client, ClientError> {
    client_builder()
        .build()
        .map_err(|e| ClientError::transport("building the HTTP client", e))
}

/// The settings every client of the HTTP bindings shares (TLS adds to them, see `tls.rs`).
pub(crate) fn client_builder() -> reqwest::ClientBuilder {
    reqwest::Client::builder().connect_timeout(std::time::Duration::from_secs(10))
}

/// Parses a base URL the client appends to.
pub(crate) fn parse_url(url: &str) -> Result<url::Url, ClientError> {
    let u = url::Url::parse(url).map_err(|e| ClientError::Config(format!("URL {url:?}: {e}")))?;
    if !matches!(u.scheme(), "http" | "https") || u.cannot_be_a_base() {
        return Err(ClientError::Config(format!(
            "URL {url:?}: must be an absolute http(s) URL"
        )));
    }
    Ok(u)
}

/// Adds the service parameters (`A2A-Version`, `A2A-Extensions`, extra headers).
pub(crate) fn with_params(
    mut req: reqwest::RequestBuilder,
    common: &Common,
) -> reqwest::RequestBuilder {
    for (name, value) in common.service_params() {
        req = req.header(name, value);
    }
    req
}

pub(crate) async fn send(
    req: reqwest::RequestBuilder,
    context: &str,
) -> Result<reqwest::Response, ClientError> {
    req.send()
        .await
        .map_err(|e| ClientError::transport(context.to_owned(), e))
}

/// The whole body, refusing more than `limit` bytes.
pub(crate) async fn read_body(
    resp: reqwest::Response,
    limit: usize,
    context: &str,
) -> Result<Vec<u8>, ClientError> {
    if resp.content_length().is_some_and(|n| n > limit as u64) {
        return Err(too_large(context, limit));
    }
    let mut body = Vec::new();
    let mut chunks = resp.bytes_stream();
    while let Some(chunk) = chunks.next().await {
        let chunk = chunk.map_err(|e| ClientError::transport(context.to_owned(), e))?;
        if body.len() + chunk.len() > limit {
            return Err(too_large(context, limit));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

fn too_large(context: &str, limit: usize) -> ClientError {
    ClientError::decode(
        context,
        format!("the response is larger than {limit} bytes"),
    )
}

/// ProtoJSON bytes into a wire type, naming the offending path on failure.
pub(crate) fn decode_json<T: DeserializeOwned>(
    bytes: &[u8],
    context: &str,
) -> Result<T, ClientError> {
    // The fast path: plain serde_json (path tracking costs on every field, a load generator's
    // every answer), again with the path only to explain a failure.
    if let Ok(value) = serde_json::from_slice(bytes) {
        return Ok(value);
    }
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value: T = serde_path_to_error::deserialize(&mut de)
        .map_err(|e| ClientError::decode(context, format!("at {}: {}", e.path(), e.inner())))?;
    de.end().map_err(|e| ClientError::decode(context, e))?;
    Ok(value)
}

/// Whether a response is an event stream (as opposed to an error answered before streaming).
pub(crate) fn is_event_stream(resp: &reqwest::Response) -> bool {
    resp.headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.trim_start()
                .to_ascii_lowercase()
                .starts_with("text/event-stream")
        })
}

/// The SSE events of `resp`, each mapped by `decode` (which sees the `event:` name and the data).
pub(crate) fn sse_stream<F>(resp: reqwest::Response, common: &Common, decode: F) -> EventStream
where
    F: Fn(&SseEvent) -> Result<a2a_types::v1::StreamResponse, ClientError> + Send + Sync + 'static,
{
    let events = crate::sse::events(resp.bytes_stream(), common.limits.max_event_bytes);
    let mut failed = false;
    events
        .map(move |item| {
            let ev = item?;
            let response = decode(&ev)?;
            Ok(crate::StreamEvent {
                response,
                id: ev.id,
            })
        })
        // Nothing follows an error: the server closes the stream after it.
        .take_while(move |item| {
            let keep = !failed;
            failed |= item.is_err();
            futures::future::ready(keep)
        })
        .boxed()
}
