//! The decoders the gateway runs on untrusted input, in one place for the fuzz targets
//! (`fuzz/`) and the binding-equivalence property tests. Each item is the production code path
//! itself, re-exported, never a copy. Not a stable API.

use axum::http::{HeaderMap, HeaderName, HeaderValue};

pub use crate::bindings::jsonrpc::decode_request as jsonrpc_request;
pub use crate::bindings::jsonrpc::{Request, decode_params as jsonrpc_params};
pub use crate::bindings::rest::fuzzing as rest;
pub use crate::config::FileConfig;
pub use crate::service::validate_push_config as push_config;

/// The A2A service parameters (`A2A-Version`, `A2A-Extensions`, the SSE `Last-Event-ID` or gRPC
/// `a2a-last-event-id` resume point, `Idempotency-Key`, `traceparent`) of a request with these
/// headers and this query string, as every binding reads them. Pairs that are not a valid header
/// name or value are skipped, as an HTTP server would have refused them.
pub fn request_context(
    headers: &[(&[u8], &[u8])],
    query: Option<&str>,
) -> Result<crate::service::RequestContext, a2a_types::A2aError> {
    let mut map = HeaderMap::new();
    for (name, value) in headers {
        if let (Ok(name), Ok(value)) =
            (HeaderName::from_bytes(name), HeaderValue::from_bytes(value))
        {
            map.append(name, value);
        }
    }
    crate::bindings::request_context(&map, query)
}
