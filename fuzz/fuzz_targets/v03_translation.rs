//! The 0.3 ⇄ 1.0 translation toward upstream agents: a JSON value read as a 0.3 stream event,
//! task and agent card, and (when it is a 1.0 SendMessageRequest) written as 0.3 params.
#![no_main]

use a2a_types::v1::SendMessageRequest;
use a2a_types::v03;
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    if let Ok(value) = serde_json::from_slice::<Value>(data) {
        let _ = v03::stream_response(&value);
        let _ = v03::task(&value);
        let _ = v03::card(&value);
    }
    if let Ok(req) = serde_json::from_slice::<SendMessageRequest>(data) {
        if let Ok(params) = v03::send_params(&req) {
            assert!(params.get("message").is_some());
        }
    }
});
