//! A JSON-RPC request body: the envelope, then the params of its method, as the binding decodes
//! them before calling the service. An error must carry an id JSON-RPC allows (string, number
//! or null).
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fuzz_target!(|body: &[u8]| {
    let id = match a2a_gateway::fuzzing::jsonrpc_request(body) {
        Ok((id, _)) => id,
        Err((id, _)) => id,
    };
    assert!(matches!(
        id,
        Value::Null | Value::String(_) | Value::Number(_)
    ));
});
