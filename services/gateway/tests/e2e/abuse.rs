//! The abuse suite (README, Security): what one hostile caller tries against the public
//! listener, each answered within a bounded time and counted. A header bomb of distinct
//! `A2A-Extensions` values, connections that send nothing or half a head, a body trickled a
//! byte at a time, more connections than one client (or all together) may hold, HTTP/2 streams
//! beyond the cap and rapidly reset, an HTTP/2 connection left idle, deeply nested JSON, and
//! rate-limit keys rotated through an IPv6 /64 or forged with `X-Forwarded-For`. The TLS
//! listener's slow clients are in `tls`, the refusal to start open beyond loopback in `binary`.
//! Timeouts are configured short so the suite stays fast.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::harness::*;
use crate::metrics::Scrape;

/// Reads until the peer closes (EOF or reset); `Some(elapsed)` if it did within `within`.
async fn closed_within(tcp: &mut TcpStream, within: Duration) -> Option<Duration> {
    let start = Instant::now();
    let mut buf = [0u8; 4096];
    tokio::time::timeout(within, async {
        loop {
            match tcp.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    })
    .await
    .ok()
    .map(|()| start.elapsed())
}

/// Everything the server sends until it closes (or `within` passes).
async fn read_all(tcp: &mut TcpStream, within: Duration) -> String {
    let mut out = Vec::new();
    let _ = tokio::time::timeout(within, tcp.read_to_end(&mut out)).await;
    String::from_utf8_lossy(&out).into_owned()
}

fn closed_total(s: &Scrape, reason: &str) -> f64 {
    s.value(
        "a2a_connections_closed_total",
        &[("listener", "public"), ("reason", reason)],
    )
}

fn refused_total(s: &Scrape, reason: &str) -> f64 {
    s.value(
        "a2a_connections_refused_total",
        &[("listener", "public"), ("reason", reason)],
    )
}

/// H1: one request whose head holds ~400 KB of distinct `A2A-Extensions` values (what hyper's
/// default 408 KB head allowed, 7 s of CPU in the quadratic de-duplication) is refused by the
/// head cap at once (431); one within the head cap but over the extension cap is refused by
/// the pipeline in the binding's format (JSON-RPC -32602, HTTP 400, gRPC INVALID_ARGUMENT).
#[tokio::test]
async fn a_header_bomb_is_refused_at_once() {
    let gw = TestGateway::with_admin("").await;
    let before = Scrape::take(&gw).await;
    let bomb: String = (0..100_000)
        .map(|i| format!("{i:x}"))
        .collect::<Vec<_>>()
        .join(",");
    assert!(bomb.len() > 400_000);
    let started = Instant::now();
    let mut tcp = TcpStream::connect(gw.addr).await.unwrap();
    let head = format!(
        "POST /a2a/jsonrpc HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n\
         a2a-extensions: {bomb}\r\ncontent-length: 2\r\n\r\n{{}}"
    );
    // The server may close before it has read everything: a failed write is fine.
    let _ = tcp.write_all(head.as_bytes()).await;
    let answer = read_all(&mut tcp, Duration::from_secs(5)).await;
    assert!(answer.starts_with("HTTP/1.1 431"), "{answer:.200}");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    let after = Scrape::take(&gw).await;
    assert!(closed_total(&after, "head_too_large") > closed_total(&before, "head_too_large"));

    // 2,000 distinct URIs (about 20 KB, within the head cap): over max_extensions (32).
    let many: String = (0..2_000)
        .map(|i| format!("urn:x:{i}"))
        .collect::<Vec<_>>()
        .join(",");
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "t"}});
    let started = Instant::now();
    let rpc: Value = gw
        .client
        .post(gw.url("/a2a/jsonrpc"))
        .header("a2a-version", "1.0")
        .header("a2a-extensions", &many)
        .json(&body)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(rpc["error"]["code"], -32602, "{rpc}");
    let rest = gw
        .client
        .get(gw.url("/a2a/rest/tasks/t"))
        .header("a2a-version", "1.0")
        .header("a2a-extensions", &many)
        .send()
        .await
        .unwrap();
    assert_eq!(rest.status(), 400);
    let mut grpc = grpc_client(&gw).await;
    let mut req = tonic::Request::new(a2a_types::v1::GetTaskRequest {
        id: "t".into(),
        ..Default::default()
    });
    req.metadata_mut()
        .insert("a2a-extensions", many.parse().unwrap());
    let status = grpc.get_task(req).await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::InvalidArgument, "{status:?}");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    // The same URIs a few times over, within the cap: accepted.
    let few = "urn:a, urn:b, urn:a, urn:b";
    let ok: Value = gw
        .client
        .post(gw.url("/a2a/jsonrpc"))
        .header("a2a-version", "1.0")
        .header("a2a-extensions", few)
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
                      "params": {"message": user_message("hi")}}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(ok["result"].is_object(), "{ok}");
    gw.stop().await;
}

async fn grpc_client(
    gw: &TestGateway,
) -> a2a_types::v1::a2a_service_client::A2aServiceClient<tonic::transport::Channel> {
    let channel = tonic::transport::Channel::from_shared(format!("http://{}", gw.addr))
        .unwrap()
        .connect()
        .await
        .unwrap();
    a2a_types::v1::a2a_service_client::A2aServiceClient::new(channel)
}

/// M2: connections that send nothing, half a request head, or half the HTTP/2 preface are
/// closed within the header-read timeout (they were held until shutdown), and a kept-alive
/// HTTP/1.1 connection is closed once idle that long.
#[tokio::test]
async fn silent_and_half_head_connections_are_closed_within_the_header_read_timeout() {
    let gw = TestGateway::with_admin("[limits.connections]\nheader_read_timeout_ms = 400\n").await;
    let before = Scrape::take(&gw).await;
    let mut conns = Vec::new();
    for first in [
        &b""[..],
        b"POST /a2a/jsonrpc HTTP/1.1\r\nhost: x\r\n",
        b"PRI * HTTP/2.0\r\n",
        b"G",
    ] {
        for _ in 0..5 {
            let mut tcp = TcpStream::connect(gw.addr).await.unwrap();
            tcp.write_all(first).await.unwrap();
            conns.push(tcp);
        }
    }
    for tcp in &mut conns {
        let closed = closed_within(tcp, Duration::from_secs(3)).await;
        assert!(closed.is_some(), "still open after 3 s");
    }
    // A kept-alive connection: one request answered, then nothing.
    let mut kept = TcpStream::connect(gw.addr).await.unwrap();
    kept.write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n")
        .await
        .unwrap();
    let started = Instant::now();
    let answer = read_all(&mut kept, Duration::from_secs(3)).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "the kept-alive connection is closed once idle for the header-read timeout"
    );
    // The admin listener is held to the same timeout.
    let admin = gw.admin.expect("an admin listener");
    let mut silent_admin = TcpStream::connect(admin).await.unwrap();
    assert!(
        closed_within(&mut silent_admin, Duration::from_secs(3))
            .await
            .is_some(),
        "a silent admin connection is closed"
    );
    let after = Scrape::take(&gw).await;
    assert!(
        closed_total(&after, "header_timeout") - closed_total(&before, "header_timeout") >= 20.0,
        "{}",
        closed_total(&after, "header_timeout")
    );
    gw.stop().await;
}

/// M2: a request body trickled at a few bytes a second is cut at the body-read timeout, the
/// connection closed; a body sent whole is served as before.
#[tokio::test]
async fn a_trickled_body_is_cut() {
    let gw = TestGateway::with_admin("[limits.connections]\nbody_read_timeout_ms = 500\n").await;
    let before = Scrape::take(&gw).await;
    let mut tcp = TcpStream::connect(gw.addr).await.unwrap();
    tcp.write_all(
        b"POST /a2a/jsonrpc HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n\
          content-length: 100\r\n\r\n{",
    )
    .await
    .unwrap();
    let started = Instant::now();
    let trickle = async {
        for _ in 0..50 {
            tokio::time::sleep(Duration::from_millis(200)).await;
            if tcp.write_all(b" ").await.is_err() {
                break;
            }
            let mut probe = [0u8; 1];
            // Stop once the server has answered or closed.
            if let Ok(Ok(n)) =
                tokio::time::timeout(Duration::from_millis(1), tcp.peek(&mut probe)).await
            {
                let _ = n;
                break;
            }
        }
    };
    trickle.await;
    let answer = read_all(&mut tcp, Duration::from_secs(3)).await;
    let elapsed = started.elapsed();
    assert!(
        elapsed < Duration::from_secs(4),
        "cut after {elapsed:?}: {answer}"
    );
    assert!(
        closed_within(&mut tcp, Duration::from_secs(1))
            .await
            .is_some(),
        "the connection is closed"
    );
    let after = Scrape::take(&gw).await;
    assert!(closed_total(&after, "body_timeout") > closed_total(&before, "body_timeout"));
    // A whole body is served.
    let ok = gw
        .rpc("SendMessage", json!({"message": user_message("whole")}))
        .await;
    assert!(ok["result"].is_object(), "{ok}");
    gw.stop().await;
}

/// M2: one client holds at most `per_ip` connections, everyone together `max`; beyond, a new
/// connection is closed at once and counted; a freed slot admits again.
#[tokio::test]
async fn connection_caps_refuse_and_count() {
    for (toml, reason, cap) in [
        ("[limits.connections]\nper_ip = 3\n", "per_ip", 3),
        ("[limits.connections]\nmax = 4\n", "max_connections", 4),
    ] {
        let gw = TestGateway::with_admin(toml).await;
        let before = Scrape::take(&gw).await;
        let mut held = Vec::new();
        for _ in 0..cap {
            let mut tcp = TcpStream::connect(gw.addr).await.unwrap();
            // Each is admitted and served (keep-alive: it stays open).
            tcp.write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n")
                .await
                .unwrap();
            let mut buf = [0u8; 256];
            let n = tcp.read(&mut buf).await.unwrap();
            assert!(buf[..n].starts_with(b"HTTP/1.1 200"), "{reason}");
            held.push(tcp);
        }
        let mut over = TcpStream::connect(gw.addr).await.unwrap();
        let _ = over
            .write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n")
            .await;
        let answer = read_all(&mut over, Duration::from_secs(2)).await;
        assert_eq!(answer, "", "{reason}: refused without an answer");
        let after = Scrape::take(&gw).await;
        assert_eq!(
            refused_total(&after, reason) - refused_total(&before, reason),
            1.0,
            "{reason}"
        );
        assert!(
            after.value("a2a_connections_open", &[("listener", "public")]) >= cap as f64,
            "{reason}"
        );
        // One freed: a new connection is served.
        drop(held.pop());
        let mut served = false;
        for _ in 0..50 {
            if gw.client.get(gw.url("/healthz")).send().await.is_ok() {
                served = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(served, "{reason}: a freed slot admits again");
        drop(held);
        gw.stop().await;
    }
}

/// HTTP/2: the server announces the stream cap; a client that opens and resets streams faster
/// than they are served (rapid reset) loses the connection; an idle connection is closed.
#[tokio::test]
async fn h2_streams_are_capped_resets_and_idleness_end_the_connection() {
    let gw = TestGateway::with_admin(
        "[limits.connections]\nh2_max_concurrent_streams = 3\n\
         h2_max_pending_accept_reset_streams = 5\nidle_timeout_ms = 500\n",
    )
    .await;
    let before = Scrape::take(&gw).await;
    // The cap, as SETTINGS says it.
    let tcp = TcpStream::connect(gw.addr).await.unwrap();
    let (h2, conn) = h2::client::handshake(tcp).await.unwrap();
    let conn_task = tokio::spawn(conn);
    let h2 = h2.ready().await.unwrap();
    let request = || {
        http::Request::get(format!("http://{}/healthz", gw.addr))
            .body(())
            .unwrap()
    };
    let (response, _) = h2.clone().send_request(request(), true).unwrap();
    assert_eq!(response.await.unwrap().status(), 200);
    assert_eq!(h2.current_max_send_streams(), 3);
    // Idle for longer than idle_timeout_ms: the server ends the connection.
    let ended = tokio::time::timeout(Duration::from_secs(3), conn_task).await;
    assert!(ended.is_ok(), "the idle HTTP/2 connection is closed");
    drop(h2);
    let after = Scrape::take(&gw).await;
    assert!(closed_total(&after, "idle_timeout") > closed_total(&before, "idle_timeout"));

    gw.stop().await;

    // Rapid reset: streams opened and reset at once, many more than the pending-reset cap (on a
    // gateway whose idle timeout cannot be what ends the connection).
    let gw = TestGateway::with_config(
        "[limits.connections]\nh2_max_pending_accept_reset_streams = 5\nidle_timeout_ms = 60000\n",
    )
    .await;
    let tcp = TcpStream::connect(gw.addr).await.unwrap();
    let (h2, conn) = h2::client::handshake(tcp).await.unwrap();
    let conn_task = tokio::spawn(conn);
    let mut h2 = h2.ready().await.unwrap();
    let mut refused = false;
    for _ in 0..500 {
        match h2.clone().ready().await {
            Ok(ready) => h2 = ready,
            Err(_) => {
                refused = true;
                break;
            }
        }
        let body = http::Request::post(format!("http://{}/a2a/jsonrpc", gw.addr))
            .body(())
            .unwrap();
        match h2.send_request(body, false) {
            // Dropped at once: RST_STREAM(CANCEL) before the server accepted the stream.
            Ok((response, stream)) => drop((response, stream)),
            Err(_) => {
                refused = true;
                break;
            }
        }
    }
    let ended = tokio::time::timeout(Duration::from_secs(3), conn_task).await;
    assert!(
        refused || ended.is_ok(),
        "a rapid-reset connection is closed by the server"
    );
    gw.stop().await;
}

/// JSON nesting is bounded by the decoders (serde_json's depth limit of 128, on every JSON
/// binding; the envelope's params are skipped iteratively): 100,000 levels are refused at
/// once, and the gateway serves on.
#[tokio::test]
async fn deeply_nested_json_is_refused() {
    let gw = TestGateway::start().await;
    let depth = 100_000;
    let nested = format!("{}1{}", "[".repeat(depth), "]".repeat(depth));
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{{"message":{{"messageId":"m","role":"ROLE_USER","parts":[{{"data":{nested}}}]}}}}}}"#
    );
    let started = Instant::now();
    let rpc: Value = gw.post_raw(body).await.json().await.unwrap();
    let code = rpc["error"]["code"].as_i64().unwrap();
    assert!(code == -32700 || code == -32602, "{rpc}");
    let rest_body = format!(
        r#"{{"message":{{"messageId":"m","role":"ROLE_USER","parts":[{{"data":{nested}}}]}}}}"#
    );
    let rest = gw
        .client
        .post(gw.url("/a2a/rest/message:send"))
        .header("a2a-version", "1.0")
        .header("content-type", "application/json")
        .body(rest_body)
        .send()
        .await
        .unwrap();
    assert_eq!(rest.status(), 400);
    assert!(started.elapsed() < Duration::from_secs(5));
    let ok = gw
        .rpc(
            "SendMessage",
            json!({"message": user_message("still here")}),
        )
        .await;
    assert!(ok["result"].is_object(), "{ok}");
    gw.stop().await;
}

async fn send_from(gw: &TestGateway, forwarded: &str) -> u16 {
    gw.client
        .get(gw.url("/a2a/rest/tasks?pageSize=1"))
        .header("a2a-version", "1.0")
        .header("x-forwarded-for", forwarded)
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

/// L1: IPv6 clients share one per-IP bucket per /64, so rotating addresses within it gains
/// nothing; another /64 has its own.
#[tokio::test]
async fn ipv6_clients_are_limited_per_64() {
    let gw = TestGateway::with_config(
        "[limits.rate]\nip = { rate = 0.1, burst = 5 }\n\
         client_ip_header = \"X-Forwarded-For\"\ntrusted_proxies = [\"127.0.0.1\"]\n",
    )
    .await;
    for i in 1..=5 {
        assert_eq!(send_from(&gw, &format!("2001:db8:1:2::{i:x}")).await, 200);
    }
    assert_eq!(send_from(&gw, "2001:db8:1:2:ffff::6").await, 429);
    assert_eq!(send_from(&gw, "2001:db8:1:3::1").await, 200);
    gw.stop().await;
}

/// L1: `client_ip_header` is believed only from `trusted_proxies`; from anyone else the TCP
/// peer is the key, so forged addresses share the forger's bucket. Behind a trusted proxy the
/// client is the right-most untrusted address, not what the client wrote on the left.
#[tokio::test]
async fn forwarded_addresses_are_believed_from_trusted_proxies_only() {
    let untrusted = TestGateway::with_config(
        "[limits.rate]\nip = { rate = 0.1, burst = 5 }\n\
         client_ip_header = \"X-Forwarded-For\"\ntrusted_proxies = [\"10.0.0.0/8\"]\n",
    )
    .await;
    for i in 1..=5 {
        assert_eq!(send_from(&untrusted, &format!("198.51.100.{i}")).await, 200);
    }
    assert_eq!(send_from(&untrusted, "198.51.100.77").await, 429);
    untrusted.stop().await;

    let trusted = TestGateway::with_config(
        "[limits.rate]\nip = { rate = 0.1, burst = 5 }\n\
         client_ip_header = \"X-Forwarded-For\"\ntrusted_proxies = [\"127.0.0.1\", \"10.0.0.0/8\"]\n",
    )
    .await;
    // The client writes a new address on the left each time; the proxies (10.1.1.1 and the
    // peer) appended 203.0.113.9, the address they saw.
    for i in 1..=5 {
        let forged = format!("192.0.2.{i}, 203.0.113.9, 10.1.1.1");
        assert_eq!(send_from(&trusted, &forged).await, 200);
    }
    assert_eq!(
        send_from(&trusted, "192.0.2.99, 203.0.113.9, 10.1.1.1").await,
        429
    );
    assert_eq!(send_from(&trusted, "203.0.113.10").await, 200);
    trusted.stop().await;
}

/// JSON `[[[…]]]` `depth` levels deep around a number.
fn nested_json(depth: usize) -> Value {
    let mut v = json!(1);
    for _ in 0..depth {
        v = json!([v]);
    }
    v
}

/// A poison pill the JSON decoders let through: a value nested deeper than prost decodes (100
/// messages, two per JSON level) but within serde_json's 128 levels was stored on PostgreSQL
/// and then unreadable. Every binding now refuses values nested beyond 32 levels, naming the
/// field; one within the bound is stored and read back.
#[tokio::test]
async fn values_nested_beyond_the_bound_are_refused_before_they_are_stored() {
    let db = a2a_testing::TestDatabase::create().await;
    let gw = TestGateway::with_database("", db.url()).await;
    let send = |data: Value| {
        json!({"message": {"messageId": uuid::Uuid::new_v4().to_string(), "role": "ROLE_USER",
                           "parts": [{"data": data}]}})
    };
    let refused = gw.rpc("SendMessage", send(nested_json(60))).await;
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    let rest = gw
        .client
        .post(gw.url("/a2a/rest/message:send"))
        .header("a2a-version", "1.0")
        .json(&send(nested_json(40)))
        .send()
        .await
        .unwrap();
    assert_eq!(rest.status(), 400);
    let meta = json!({"message": {"messageId": "m-meta", "role": "ROLE_USER",
                                  "parts": [{"text": "hi"}]},
                      "metadata": {"deep": nested_json(40)}});
    let refused = gw.rpc("SendMessage", meta).await;
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    // Within the bound: stored, and read back from PostgreSQL.
    let sent = gw.rpc("SendMessage", send(nested_json(30))).await;
    let id = sent["result"]["task"]["id"]
        .as_str()
        .expect("a task")
        .to_owned();
    let got = gw.rpc("GetTask", json!({"id": id})).await;
    assert!(got["result"]["id"].is_string(), "{got}");
    gw.stop().await;
}

/// A trusted proxy (a load balancer, whose connections all come from its few addresses) is
/// exempt from the per-client connection cap; the total cap still holds.
#[tokio::test]
async fn trusted_proxies_are_exempt_from_the_per_client_cap() {
    let gw = TestGateway::with_config(
        "[limits.connections]\nper_ip = 2\n[limits.rate]\ntrusted_proxies = [\"127.0.0.0/8\"]\n",
    )
    .await;
    let mut held = Vec::new();
    for _ in 0..6 {
        let mut tcp = TcpStream::connect(gw.addr).await.unwrap();
        tcp.write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n")
            .await
            .unwrap();
        let mut buf = [0u8; 256];
        let n = tcp.read(&mut buf).await.unwrap();
        assert!(buf[..n].starts_with(b"HTTP/1.1 200"));
        held.push(tcp);
    }
    drop(held);
    gw.stop().await;
}
