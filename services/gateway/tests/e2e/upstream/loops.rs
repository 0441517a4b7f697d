//! Loop protection: every upstream send carries `A2A-Hop-Count` (one more than the request
//! that started the turn), and a request beyond `[limits] max_hops` is refused before it runs.

use std::time::{Duration, Instant};

use serde_json::json;

use super::agent;
use crate::harness::{TestGateway, user_message};

/// Two gateways, each the other's only upstream (`default_agent = "up"`), over `binding`.
async fn pair(binding: &str) -> (TestGateway, TestGateway) {
    let la = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let lb = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let (a, b) = (la.local_addr().unwrap(), lb.local_addr().unwrap());
    let config = |to: std::net::SocketAddr| {
        format!(
            "default_agent = \"up\"\n{}",
            agent(
                "up",
                &format!("http://{to}"),
                &format!("bindings = [\"{binding}\"]")
            )
        )
    };
    // B's port closed while A starts: A's first card fetch is refused at once (instead of
    // waiting out the start's bound on a listener nobody serves) and retried a second later.
    drop(lb);
    let ga = TestGateway::on_listener(la, &config(b)).await;
    let lb = tokio::net::TcpListener::bind(b).await.unwrap();
    let gb = TestGateway::on_listener(lb, &config(a)).await;
    (ga, gb)
}

#[tokio::test]
async fn two_gateways_routing_to_each_other_answer_a_loop_error_quickly() {
    for binding in ["JSONRPC", "HTTP+JSON", "GRPC"] {
        let (a, b) = pair(binding).await;
        let send = || async {
            let started = Instant::now();
            let resp = a
                .rpc(
                    "SendMessage",
                    json!({"message": user_message("hello"), "configuration": {"returnImmediately": false}}),
                )
                .await;
            (resp, started.elapsed())
        };
        // Until each has read the other's card (refreshed every second while it fails).
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            let (resp, _) = send().await;
            if resp.to_string().contains("request loop") {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{binding}: no loop error: {resp}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let (resp, took) = send().await;
        let text = resp.to_string();
        assert!(text.contains("request loop"), "{binding}: {resp}");
        assert!(text.contains("A2A-Hop-Count"), "{binding}: {resp}");
        assert!(took < Duration::from_secs(1), "{binding}: took {took:?}");
        a.stop().await;
        b.stop().await;
    }
}

#[tokio::test]
async fn a_request_beyond_the_hop_limit_is_refused_on_each_http_binding() {
    let gw = TestGateway::with_config("[limits]\nmax_hops = 3").await;
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
        "params": {"message": user_message("hi")}});
    // At the limit: served.
    let ok: serde_json::Value = gw
        .client
        .post(gw.url("/a2a/jsonrpc"))
        .header("A2A-Version", "1.0")
        .header("A2A-Hop-Count", "3")
        .json(&body)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(ok.get("result").is_some(), "{ok}");
    // Beyond it: JSON-RPC InvalidRequest (-32600), before the message reaches an agent.
    let before = gw.task_count().await;
    let refused: serde_json::Value = gw
        .client
        .post(gw.url("/a2a/jsonrpc"))
        .header("A2A-Version", "1.0")
        .header("A2A-Hop-Count", "4")
        .json(&body)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(refused["error"]["code"], -32600, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("request loop"),
        "{refused}"
    );
    assert_eq!(gw.task_count().await, before, "no task for a refused loop");
    // HTTP+JSON: 400 with the google.rpc.Status body naming INVALID_REQUEST.
    let resp = gw
        .client
        .post(gw.url("/a2a/rest/message:send"))
        .header("A2A-Version", "1.0")
        .header("A2A-Hop-Count", "4")
        .json(&json!({"message": user_message("hi")}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 400);
    let text = resp.text().await.unwrap();
    assert!(text.contains("request loop"), "{text}");
    // A malformed count is refused too (it cannot be used to slip past the limit).
    let bad: serde_json::Value = gw
        .client
        .post(gw.url("/a2a/jsonrpc"))
        .header("A2A-Version", "1.0")
        .header("A2A-Hop-Count", "-1")
        .json(&body)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(bad["error"]["code"], -32602, "{bad}");
}
