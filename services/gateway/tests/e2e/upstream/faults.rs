//! Upstreams that fail: down from the start, stopping under the gateway, silent, and answering
//! with garbage. Each gives the client a clear error, and health checks keep traffic away from
//! an agent that is down until it is back.

use std::time::Duration;

use axum::routing::post;
use serde_json::{Value, json};

use super::{error, front, script, upstream};
use crate::harness::{TestGateway, state};

fn is_unavailable(e: &Value) -> bool {
    e["code"] == -32603 && e["data"][0]["reason"] == "UNAVAILABLE"
}

/// A port nobody listens on.
fn closed_port() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    drop(l);
    format!("http://{addr}")
}

#[tokio::test]
async fn an_upstream_that_is_down_is_unavailable() {
    let gw = TestGateway::with_config(&super::agent("up", &closed_port(), "")).await;
    let e = error(&gw, "SendMessage", script("up", json!({}), json!({}))).await;
    assert!(is_unavailable(&e), "{e}");
    assert!(e["message"].as_str().unwrap().contains("up"), "{e}");
    // The rest of the gateway works.
    assert_eq!(state(&gw.send_text("hi").await), "TASK_STATE_COMPLETED");
    let card = gw
        .client
        .get(gw.url("/agents/up/.well-known/agent-card.json"))
        .send()
        .await
        .unwrap();
    assert_eq!(card.status(), 404, "no card was ever fetched");
}

#[tokio::test]
async fn an_upstream_that_stops_is_unavailable_then_back() {
    let up = upstream("").await;
    let addr = up.addr;
    let gw = front(&up, "").await;
    let ok = gw
        .ok("SendMessage", script("up", json!({}), json!({})))
        .await;
    assert_eq!(state(&ok["task"]), "TASK_STATE_COMPLETED");
    up.stop().await;
    let e = error(&gw, "SendMessage", script("up", json!({}), json!({}))).await;
    assert!(is_unavailable(&e), "{e}");

    // The same address comes back: the heartbeat (backing off from 1 s) sees it again.
    let listener = loop {
        match tokio::net::TcpListener::bind(addr).await {
            Ok(l) => break l,
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    };
    let again = TestGateway::on_listener(listener, "default_agent = \"scenario\"").await;
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    loop {
        let resp = gw
            .rpc("SendMessage", script("up", json!({}), json!({})))
            .await;
        if resp.get("result").is_some() {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "never healthy again: {resp}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    drop(again);
}

/// An upstream that accepts connections and never answers: the call times out as unavailable.
#[tokio::test]
async fn a_silent_upstream_times_out() {
    let up = upstream("").await;
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let silent_url = format!("http://{}/a2a/jsonrpc", silent.local_addr().unwrap());
    let hold = tokio::spawn(async move {
        let mut open = Vec::new();
        while let Ok((socket, _)) = silent.accept().await {
            open.push(socket);
        }
    });
    // Inline card: JSON-RPC at the silent server; heartbeats go there too, so probe rarely.
    let toml = format!(
        "[[agents]]\nname = \"slow\"\ntimeout_secs = 1\nhealth_interval_secs = 3600\n\
         card = {{ name = \"slow\", version = \"1\", description = \"\", \
         supportedInterfaces = [{{ url = \"{silent_url}\", protocolBinding = \"JSONRPC\", protocolVersion = \"1.0\" }}] }}\n"
    );
    drop(up);
    let gw = TestGateway::with_config(&toml).await;
    let started = std::time::Instant::now();
    let e = error(&gw, "SendMessage", script("slow", json!({}), json!({}))).await;
    assert!(is_unavailable(&e), "{e}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "bounded by timeout_secs"
    );
    hold.abort();
}

/// An upstream answering SendMessage with JSON of the wrong shape: InvalidAgentResponse.
#[tokio::test]
async fn an_upstream_returning_garbage_is_an_invalid_agent_response() {
    async fn garbage(body: String) -> String {
        let req: Value = serde_json::from_str(&body).unwrap_or_default();
        if req["method"] == "GetTask" {
            // Heartbeats: a proper TaskNotFound.
            return json!({"jsonrpc": "2.0", "id": req["id"], "error": {"code": -32001,
                "message": "task not found"}})
            .to_string();
        }
        json!({"jsonrpc": "2.0", "id": req["id"], "result": {"task": {"id": 42, "status": "??"}}})
            .to_string()
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/rpc", listener.local_addr().unwrap());
    let server = tokio::spawn(async move {
        axum::serve(listener, axum::Router::new().route("/rpc", post(garbage)))
            .await
            .unwrap();
    });
    let toml = format!(
        "[[agents]]\nname = \"junk\"\nhealth_interval_secs = 1\n\
         card = {{ name = \"junk\", version = \"1\", description = \"\", \
         supportedInterfaces = [{{ url = \"{url}\", protocolBinding = \"JSONRPC\", protocolVersion = \"1.0\" }}] }}\n"
    );
    let gw = TestGateway::with_config(&toml).await;
    let e = error(&gw, "SendMessage", script("junk", json!({}), json!({}))).await;
    assert_eq!(e["code"], -32006, "InvalidAgentResponse: {e}");
    assert!(e["message"].as_str().unwrap().contains("junk"), "{e}");
    server.abort();
}
