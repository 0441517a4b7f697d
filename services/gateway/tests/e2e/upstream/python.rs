//! An upstream agent built on the official Python SDK (`interop/python/upstream_agent.py`,
//! a2a-sdk 1.3.0 in the venv `scripts/interop` creates: `A2A_VENV`, default
//! `~/.cache/a2a-gateway-venv`), behind the gateway over JSON-RPC and HTTP+JSON, and over 0.3
//! JSON-RPC (`message/stream`, the `kind` dialect) on the same endpoint.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use serde_json::json;

use super::{agent, task_until};
use crate::harness::{TestGateway, state, user_message};

/// The Python agent, stopped (by PID) when dropped.
struct PythonAgent {
    child: Child,
    url: String,
}

impl PythonAgent {
    fn start(bindings: &[&str]) -> Self {
        let venv = std::env::var("A2A_VENV").unwrap_or_else(|_| {
            format!("{}/.cache/a2a-gateway-venv", std::env::var("HOME").unwrap())
        });
        let python = format!("{venv}/bin/python");
        assert!(
            std::path::Path::new(&python).exists(),
            "no Python venv at {venv}: run scripts/interop once (it installs \
             interop/python/requirements.txt), or set A2A_VENV"
        );
        let script = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../interop/python/upstream_agent.py"
        );
        let mut child = Command::new(python)
            .arg(script)
            .arg("0")
            .args(bindings)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("the Python agent starts");
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let port = loop {
            let line = lines
                .next()
                .expect(
                    "the Python agent says where it listens (is a2a-sdk[http-server] installed?)",
                )
                .unwrap();
            if let Some(p) = line.strip_prefix("listening on ") {
                break p.trim().to_owned();
            }
        };
        std::thread::spawn(move || for _ in lines {});
        Self {
            child,
            url: format!("http://127.0.0.1:{port}"),
        }
    }
}

impl Drop for PythonAgent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn exercise(gw: &TestGateway, label: &str) {
    // Streaming artifacts.
    let params = json!({"tenant": "py", "message": user_message("chunks please")});
    let events = gw
        .stream("SendStreamingMessage", params)
        .await
        .collect()
        .await;
    let last = &events.last().unwrap().data["result"]["statusUpdate"];
    assert_eq!(
        last["status"]["state"], "TASK_STATE_COMPLETED",
        "{label}: {events:?}"
    );
    let id = events[0].data["result"]["task"]["id"].as_str().unwrap();
    let task = gw.ok("GetTask", json!({"id": id})).await;
    let parts = task["artifacts"][0]["parts"].as_array().unwrap();
    assert_eq!(parts.len(), 3, "{label}: {task}");
    assert_eq!(parts[2]["text"], "chunk 2", "{label}");

    // Multi-turn.
    let asked = gw
        .ok(
            "SendMessage",
            json!({"tenant": "py", "message": user_message("ask me")}),
        )
        .await["task"]
        .clone();
    assert_eq!(
        state(&asked),
        "TASK_STATE_INPUT_REQUIRED",
        "{label}: {asked}"
    );
    let mut reply = user_message("forty-two");
    reply["taskId"] = asked["id"].clone();
    let done = gw.ok("SendMessage", json!({"message": reply})).await["task"].clone();
    assert_eq!(state(&done), "TASK_STATE_COMPLETED", "{label}: {done}");
    assert!(
        done.to_string().contains("thanks: forty-two"),
        "{label}: {done}"
    );

    // Cancel.
    let hung = gw
        .ok(
            "SendMessage",
            json!({"tenant": "py", "message": user_message("hang on"),
                   "configuration": {"returnImmediately": true}}),
        )
        .await["task"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    task_until(gw, &hung, |t| state(t) == "TASK_STATE_WORKING").await;
    let canceled = gw.ok("CancelTask", json!({"id": hung})).await;
    assert_eq!(state(&canceled), "TASK_STATE_CANCELED", "{label}");
}

#[tokio::test]
async fn a_python_sdk_agent_behind_the_gateway_over_each_binding() {
    for binding in ["JSONRPC", "HTTP+JSON"] {
        let py = PythonAgent::start(&[binding]);
        let gw = TestGateway::with_config(&agent("py", &py.url, "")).await;
        exercise(&gw, binding).await;
        gw.stop().await;
    }
}

#[tokio::test]
async fn a_python_sdk_agent_over_0_3_json_rpc() {
    let py = PythonAgent::start(&["JSONRPC"]);
    let gw = TestGateway::with_config(&agent("py", &py.url, "protocol = \"0.3\"")).await;
    exercise(&gw, "0.3").await;
}
