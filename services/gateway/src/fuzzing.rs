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
    crate::bindings::request_context(
        &map,
        query,
        crate::service::Dialects::V1_ONLY,
        &crate::limits::EdgeConfig::default(),
    )
}

/// The binding-equivalence properties: the JSON-RPC, HTTP+JSON and gRPC decoders read the same
/// request into the same canonical value, and the two JSON decoders accept the same bodies.
#[cfg(test)]
mod equivalence {
    use a2a_types::testing::message;
    use a2a_types::v1::{
        CancelTaskRequest, SendMessageRequest, SubscribeToTaskRequest, TaskPushNotificationConfig,
    };
    use proptest::prelude::*;
    use prost::Message as _;
    use serde_json::{Value, json};

    use super::{Request, jsonrpc_request, rest};

    fn jsonrpc(method: &str, params: &Value) -> Result<Request, a2a_types::A2aError> {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        jsonrpc_request(body.to_string().as_bytes())
            .map(|(_, r)| r)
            .map_err(|(_, e)| e)
    }

    /// A JSON leaf of any type.
    fn leaf() -> impl Strategy<Value = Value> {
        prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            (-1e6f64..1e6).prop_map(Value::from),
            "[A-Z_a-z0-9:/.-]{0,10}".prop_map(Value::from),
            Just(json!([])),
            Just(json!({})),
        ]
    }

    const FIELDS: &[&str] = &[
        "message",
        "role",
        "parts",
        "messageId",
        "text",
        "data",
        "raw",
        "url",
        "configuration",
        "historyLength",
        "returnImmediately",
        "metadata",
        "taskId",
        "id",
        "tenant",
        "token",
        "authentication",
        "unknownField",
    ];

    /// A request body near the valid ones: a generated SendMessageRequest, a field (at the top,
    /// in the message or in its first part) set to an arbitrary leaf.
    fn near_valid() -> impl Strategy<Value = Value> {
        (
            message(),
            0..3usize,
            proptest::sample::select(FIELDS),
            leaf(),
            any::<bool>(),
        )
            .prop_map(|(message, depth, field, leaf, mutate)| {
                let req = SendMessageRequest {
                    message: Some(message),
                    ..Default::default()
                };
                let mut v = serde_json::to_value(&req).unwrap();
                if mutate {
                    let target = match depth {
                        0 => Some(&mut v),
                        1 => v.get_mut("message"),
                        _ => v.pointer_mut("/message/parts/0"),
                    };
                    if let Some(Value::Object(o)) = target {
                        o.insert(field.to_owned(), leaf);
                    }
                }
                v
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]

        #[test]
        fn three_bindings_decode_a_send_alike(message in message()) {
            let req = SendMessageRequest { message: Some(message), ..Default::default() };
            let params = serde_json::to_value(&req).unwrap();
            prop_assert_eq!(jsonrpc("SendMessage", &params).unwrap(), Request::SendMessage(req.clone()));
            prop_assert_eq!(&rest::body::<SendMessageRequest>(params.to_string().as_bytes()).unwrap(), &req);
            prop_assert_eq!(&SendMessageRequest::decode(req.encode_to_vec().as_slice()).unwrap(), &req);
        }

        #[test]
        fn json_bindings_accept_the_same_bodies(body in near_valid()) {
            prop_assume!(!body.is_null());
            let text = body.to_string();
            let bytes = text.as_bytes();
            let pairs = [
                ("SendMessage", rest::body::<SendMessageRequest>(bytes).is_ok()),
                ("CancelTask", rest::body::<CancelTaskRequest>(bytes).is_ok()),
                ("SubscribeToTask", rest::body::<SubscribeToTaskRequest>(bytes).is_ok()),
                ("CreateTaskPushNotificationConfig", rest::body::<TaskPushNotificationConfig>(bytes).is_ok()),
            ];
            for (method, rest_ok) in pairs {
                prop_assert_eq!(jsonrpc(method, &body).is_ok(), rest_ok, "{} {}", method, text);
            }
        }
    }
}
