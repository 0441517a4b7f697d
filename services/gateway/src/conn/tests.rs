use super::*;
use crate::limits::{ClientAddressing, ConnectionsConfig, EdgeConfig};
use axum::extract::ConnectInfo;
use axum::routing::get;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

async fn start() -> (SocketAddr, CancellationToken, tokio::task::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let peer = |ConnectInfo(peer): ConnectInfo<SocketAddr>| async move { peer.ip().to_string() };
    let router = Router::new().route("/peer", get(peer).post(peer));
    let shutdown = CancellationToken::new();
    let policy = Policy::new(
        "public",
        &ConnectionsConfig::default(),
        &EdgeConfig::default(),
        ClientAddressing::default(),
    );
    let served = tokio::spawn(serve(
        listener,
        router,
        true,
        None,
        policy,
        shutdown.clone(),
    ));
    (addr, shutdown, served)
}

async fn http1_by_hand(addr: SocketAddr, first: &[u8]) -> String {
    let mut tcp = TcpStream::connect(addr).await.unwrap();
    let request =
        b"POST /peer HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
    // The first bytes alone, then the rest: the peek sees only them.
    tcp.write_all(first).await.unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    tcp.write_all(&request[first.len()..]).await.unwrap();
    let mut answer = String::new();
    tcp.read_to_string(&mut answer).await.unwrap();
    answer
}

#[tokio::test]
async fn http1_whole_or_in_pieces_and_h2c_are_served_with_the_peer_address() {
    let (addr, shutdown, served) = start().await;
    // "P" may still be the HTTP/2 preface (hyper-util reads on and decides); "PO" and the
    // whole line are not (hyper's HTTP/1 server gets the socket untouched).
    for first in [&b"P"[..], b"PO", b"POST /peer HTTP/1.1\r\n"] {
        let answer = http1_by_hand(addr, first).await;
        assert!(answer.starts_with("HTTP/1.1 200"), "{first:?}: {answer}");
        assert!(answer.ends_with("127.0.0.1"), "{answer}");
    }
    // h2c with prior knowledge (as gRPC clients speak it).
    let tcp = TcpStream::connect(addr).await.unwrap();
    let (h2, conn) = h2::client::handshake(tcp).await.unwrap();
    tokio::spawn(conn);
    let mut h2 = h2.ready().await.unwrap();
    let request = http::Request::get(format!("http://{addr}/peer"))
        .body(())
        .unwrap();
    let (response, _) = h2.send_request(request, true).unwrap();
    let response = response.await.unwrap();
    assert_eq!(response.status(), 200);
    let mut body = response.into_body();
    let mut text = Vec::new();
    while let Some(chunk) = body.data().await {
        text.extend_from_slice(&chunk.unwrap());
    }
    assert_eq!(text, b"127.0.0.1");
    drop(h2);
    shutdown.cancel();
    served.await.unwrap();
}

#[tokio::test]
async fn shutdown_closes_idle_connections_then_returns() {
    let (addr, shutdown, served) = start().await;
    // One connection that has sent nothing, one idle between keep-alive requests.
    let _silent = TcpStream::connect(addr).await.unwrap();
    let mut kept = TcpStream::connect(addr).await.unwrap();
    kept.write_all(b"GET /peer HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let mut answer = Vec::new();
    while !answer.ends_with(b"127.0.0.1") {
        let mut chunk = [0u8; 512];
        let n = kept.read(&mut chunk).await.unwrap();
        assert!(n > 0, "closed before answering");
        answer.extend_from_slice(&chunk[..n]);
    }
    shutdown.cancel();
    tokio::time::timeout(std::time::Duration::from_secs(5), served)
        .await
        .expect("serve returns once every connection is closed")
        .unwrap();
    assert_eq!(kept.read(&mut [0u8; 16]).await.unwrap(), 0, "closed");
    assert!(
        TcpStream::connect(addr).await.is_err(),
        "no longer accepting"
    );
}
