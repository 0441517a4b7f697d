//! Serving plaintext connections: HTTP/1.1 and h2c (gRPC) on one port, each connection handed
//! to hyper's HTTP/1 or HTTP/2 server after a look at its first bytes.
//!
//! This replaces `axum::serve` for what an open connection costs. hyper-util's version
//! detection *reads* the first 24 bytes and hands them to hyper's HTTP/1 server ahead of the
//! socket; hyper then reads the request into a buffer that already holds those 24 bytes and grows
//! it to 16 KiB, which it keeps for as long as the connection is open (10,000 idle SSE
//! subscribers, one connection each, held 160 MiB of read buffers). Peeking leaves the bytes in
//! the socket, so hyper reads the whole request into its first 8 KiB buffer.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::{Pin, pin};

use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use hyper::body::Incoming;
use hyper::server::conn::{http1, http2};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tower::Service as _;

/// The first bytes of every HTTP/2 connection with prior knowledge (RFC 9113 §3.4).
const H2_PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Serves `router` on `listener` until `shutdown` fires; then stops accepting, lets every
/// connection finish its in-flight requests (open streams end on the same token) and returns
/// once all are closed. With `connect_info`, each request carries its peer's
/// `ConnectInfo<SocketAddr>`, as `into_make_service_with_connect_info` gives it.
pub(crate) async fn serve(
    mut listener: TcpListener,
    router: Router,
    connect_info: bool,
    shutdown: CancellationToken,
) {
    // Every connection holds a receiver; the sender sees them all dropped.
    let (open_tx, open_rx) = watch::channel(());
    loop {
        // axum's accept retries (after a pause on errors such as EMFILE) and never fails.
        let (tcp, remote) = tokio::select! {
            accepted = axum::serve::Listener::accept(&mut listener) => accepted,
            () = shutdown.cancelled() => break,
        };
        // No Nagle: a stream's events are small writes, and a write held back until the
        // previous one is acknowledged meets the peer's delayed ACK (40 ms per gRPC stream
        // event, measured with `a2a-loadtest stream --binding grpc`). TLS does the same.
        let _ = tcp.set_nodelay(true);
        // One `Arc` per connection: `axum::serve` given a bare `Router` rebuilt the route table
        // for every connection (12 KiB, kept while it is open).
        let router = router.clone();
        let shutdown = shutdown.clone();
        let open = open_rx.clone();
        tokio::spawn(async move {
            connection(tcp, remote, router, connect_info, &shutdown).await;
            drop(open);
        });
    }
    drop(listener);
    drop(open_rx);
    open_tx.closed().await;
}

/// What a connection's first bytes say it speaks.
enum Sniffed {
    Http1,
    Http2,
    /// Nothing yet, a partial preface, or an error: hyper-util reads and decides.
    Unsure,
}

async fn sniff(tcp: &TcpStream) -> Sniffed {
    let mut first = [0u8; H2_PREFACE.len()];
    match tcp.peek(&mut first).await {
        Ok(n) if n == first.len() && first == *H2_PREFACE => Sniffed::Http2,
        Ok(n) if n > 0 && first[..n] != H2_PREFACE[..n] => Sniffed::Http1,
        _ => Sniffed::Unsure,
    }
}

async fn connection(
    tcp: TcpStream,
    remote: SocketAddr,
    router: Router,
    connect_info: bool,
    shutdown: &CancellationToken,
) {
    let service = hyper::service::service_fn(move |req: hyper::Request<Incoming>| {
        let mut req = req.map(Body::new);
        if connect_info {
            req.extensions_mut().insert(ConnectInfo(remote));
        }
        router.clone().call(req)
    });
    let sniffed = tokio::select! {
        sniffed = sniff(&tcp) => sniffed,
        () = shutdown.cancelled() => return,
    };
    let io = TokioIo::new(tcp);
    // The HTTP/2 and undecided connections are boxed, so the task of every HTTP/1 connection
    // (the common case, and one per SSE subscriber) is only as large as hyper's HTTP/1 state.
    match sniffed {
        Sniffed::Http1 => {
            let conn = http1::Builder::new().serve_connection(io, service);
            drive(conn, shutdown, |c| c.graceful_shutdown()).await
        }
        Sniffed::Http2 => {
            let conn = http2::Builder::new(TokioExecutor::new()).serve_connection(io, service);
            Box::pin(drive(conn, shutdown, |c| c.graceful_shutdown())).await
        }
        Sniffed::Unsure => {
            Box::pin(async move {
                let builder = auto::Builder::new(TokioExecutor::new());
                let conn = builder.serve_connection(io, service);
                drive(conn, shutdown, |c| c.graceful_shutdown()).await
            })
            .await
        }
    }
}

/// Runs `conn` to its end; when `shutdown` fires first, asks it to close gracefully (in-flight
/// requests finish, idle keep-alive connections close) and waits for that.
async fn drive<C, E>(conn: C, shutdown: &CancellationToken, graceful: fn(Pin<&mut C>))
where
    C: Future<Output = Result<(), E>>,
    E: std::fmt::Display,
{
    let mut conn = pin!(conn);
    let result = tokio::select! {
        result = conn.as_mut() => result,
        () = shutdown.cancelled() => {
            graceful(conn.as_mut());
            conn.await
        }
    };
    if let Err(e) = result {
        tracing::trace!(error = %e, "connection ended with an error");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::routing::get;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    async fn start() -> (SocketAddr, CancellationToken, tokio::task::JoinHandle<()>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let peer =
            |ConnectInfo(peer): ConnectInfo<SocketAddr>| async move { peer.ip().to_string() };
        let router = Router::new().route("/peer", get(peer).post(peer));
        let shutdown = CancellationToken::new();
        let served = tokio::spawn(serve(listener, router, true, shutdown.clone()));
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
}
