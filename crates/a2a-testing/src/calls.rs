//! Small helpers the test suites of several crates share.

use std::collections::HashMap;

use serde_json::{Value, json};

/// A JSON-RPC call (A2A 1.0) to the gateway at `base` (`http://host:port`); the whole response.
pub async fn jsonrpc(client: &reqwest::Client, base: &str, method: &str, params: Value) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    client
        .post(format!("{base}/a2a/jsonrpc"))
        .header("a2a-version", "1.0")
        .json(&body)
        .send()
        .await
        .expect("the gateway answers")
        .json()
        .await
        .expect("a JSON-RPC response")
}

/// An environment made of `pairs`, in the shape the config loaders take (`fn(&str) -> Option`).
pub fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> + use<> {
    let map: HashMap<String, String> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    move |k| map.get(k).cloned()
}
