//! Upstream agents: a front gateway routes to real A2A servers (gateways running the built-in
//! agents, a garbage server, a silent one, the official Python SDK) and proxies every turn.

mod credentials;
mod faults;
mod loops;
mod orchestration;
mod proxy;
mod python;
mod recorder;
mod takeover;

use serde_json::{Value, json};

use crate::harness::{TestGateway, script_message};

/// An upstream: a gateway whose default agent is the scriptable `scenario` (plus `extra`).
pub async fn upstream(extra: &str) -> TestGateway {
    TestGateway::with_config(&format!("default_agent = \"scenario\"\n{extra}")).await
}

/// `[[agents]]` entry `name` for the upstream at `card_url`, then `extra` keys of that entry.
pub fn agent(name: &str, card_url: &str, extra: &str) -> String {
    format!(
        "[[agents]]\nname = \"{name}\"\ncard_url = \"{card_url}\"\nhealth_interval_secs = 1\n{extra}\n"
    )
}

/// A front gateway with one upstream agent `up` reached through `upstream`.
pub async fn front(upstream: &TestGateway, extra: &str) -> TestGateway {
    TestGateway::with_config(&agent("up", &upstream.url(""), extra)).await
}

/// SendMessage params for a scenario script, to the agent `tenant`.
pub fn script(tenant: &str, script: Value, configuration: Value) -> Value {
    json!({"tenant": tenant, "message": script_message(script), "configuration": configuration})
}

/// The error object of a JSON-RPC call that must fail.
pub async fn error(gw: &TestGateway, method: &str, params: Value) -> Value {
    let resp = gw.rpc(method, params).await;
    assert!(resp.get("error").is_some(), "{method} should fail: {resp}");
    resp["error"].clone()
}

/// Polls GetTask on `gw` until `done` holds for the task (at most 10 s).
pub async fn task_until(gw: &TestGateway, id: &str, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let task = gw.ok("GetTask", json!({"id": id})).await;
        if done(&task) {
            return task;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "task {id} never got there: {task}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}
