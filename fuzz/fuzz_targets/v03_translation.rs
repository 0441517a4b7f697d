//! The 0.3 ⇄ 1.0 translation, both ways: toward upstream agents (a JSON value read as a 0.3
//! stream event, task and agent card; a 1.0 SendMessageRequest written as 0.3 params), and for
//! serving 0.3 clients (the value read as every 0.3 request of JSON-RPC and HTTP+JSON, and, when
//! it is a 1.0 Task or AgentCard, written in the 0.3 shapes: the combined card must still read
//! as the card it was).
#![no_main]

use a2a_types::v1::{AgentCard, SendMessageRequest, StreamResponse, Task};
use a2a_types::v03;
use a2a_types::v03::serve::StreamEnd;
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    if let Ok(value) = serde_json::from_slice::<Value>(data) {
        let _ = v03::stream_response(&value);
        let _ = v03::task(&value);
        let _ = v03::card(&value);
        let rewrites: [fn(&Value) -> Result<Value, String>; 9] = [
            v03::serve::send_request,
            v03::serve::get_task_request,
            v03::serve::cancel_task_request,
            v03::serve::subscribe_request,
            v03::serve::set_push_config_request,
            v03::serve::get_push_config_request,
            v03::serve::delete_push_config_request,
            v03::serve::list_push_configs_task,
            v03::rest::send_request,
        ];
        for rewrite in rewrites {
            let _ = rewrite(&value);
        }
        let _ = v03::rest::push_config_request(&value, "t");
    }
    if let Ok(req) = serde_json::from_slice::<SendMessageRequest>(data) {
        if let Ok(params) = v03::send_params(&req) {
            assert!(params.get("message").is_some());
        }
    }
    if let Ok(task) = serde_json::from_slice::<Task>(data) {
        assert_eq!(v03::serve::task(&task)["kind"], "task");
        let _ = v03::rest::task(&task);
    }
    if let Ok(ev) = serde_json::from_slice::<StreamResponse>(data) {
        let _ = v03::serve::stream_event(&ev, StreamEnd::Settled);
        let _ = v03::rest::stream_event(&ev, StreamEnd::Terminal);
    }
    if let Ok(card) = serde_json::from_slice::<AgentCard>(data) {
        let combined = v03::card::combined(&card, &["JSONRPC", "HTTP+JSON"]);
        let back: AgentCard = serde_json::from_value(combined).expect("the combined card reads");
        assert_eq!(back, card, "a 1.0 reader sees the card it was");
    }
});
