//! Serving connections: plaintext HTTP/1.1 and h2c (gRPC) on one port, each connection handed
//! to hyper's HTTP/1 or HTTP/2 server after a look at its first bytes; or TLS, where ALPN
//! decides. Every connection is admitted first (a cap in total and per client address), then
//! bounded in time: its first bytes and every request head (`header_read_timeout_ms`), a TLS
//! handshake (`tls_handshake_timeout_ms`, `max_tls_handshakes` at once), a request body
//! (`body_read_timeout_ms`), and an HTTP/2 connection with no open stream (`idle_timeout_ms`);
//! HTTP/2 streams, header lists and resets are capped (README, Security).
//!
//! This replaces `axum::serve` for what an open connection costs. hyper-util's version
//! detection *reads* the first 24 bytes and hands them to hyper's HTTP/1 server ahead of the
//! socket; hyper then reads the request into a buffer that already holds those 24 bytes and grows
//! it to 16 KiB, which it keeps for as long as the connection is open (10,000 idle SSE
//! subscribers, one connection each, held 160 MiB of read buffers). Peeking leaves the bytes in
//! the socket, so hyper reads the whole request into its first 8 KiB buffer.
//!
//! Metrics (README, Metrics): `a2a_connections_open{listener}`,
//! `a2a_connections_refused_total{listener,reason}` and
//! `a2a_connections_closed_total{listener,reason}`.
//!
//! Here: accepting, sniffing and driving connections. `policy.rs` admits them and holds the
//! listener's limits, `request.rs` is the per-request service (the peer's extensions, the body's
//! read deadline), `activity.rs` the HTTP/2 idle timeout's count of requests in flight.

use std::net::SocketAddr;
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::tls::{ServerTls, TlsPeer};

mod activity;
mod policy;
mod request;

use activity::Activity;
pub(crate) use policy::Policy;
use request::service;

/// The first bytes of every HTTP/2 connection with prior knowledge (RFC 9113 §3.4).
const H2_PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// How long the sniff waits before it looks again at a connection whose first bytes are only
/// the start of the HTTP/2 preface.
const SNIFF_RETRY: Duration = Duration::from_millis(5);

/// How requests learn about their connection.
#[derive(Clone)]
enum Peer {
    /// Plaintext: `ConnectInfo<SocketAddr>` when asked for (a per-IP rate limit reads it).
    Plain {
        remote: SocketAddr,
        connect_info: bool,
    },
    /// TLS: `ConnectInfo<TlsPeer>` and `ConnectInfo<SocketAddr>`, always.
    Tls(TlsPeer),
}

/// Serves `router` on `listener` until `shutdown` fires; then stops accepting, lets every
/// connection finish its in-flight requests (open streams end on the same token) and returns
/// once all are closed. With `connect_info`, each request carries its peer's
/// `ConnectInfo<SocketAddr>`, as `into_make_service_with_connect_info` gives it. With `tls`,
/// every connection is a TLS one (HTTP/1.1 or HTTP/2 by ALPN) and each request carries its
/// `ConnectInfo<TlsPeer>` as well.
pub(crate) async fn serve(
    mut listener: TcpListener,
    router: Router,
    connect_info: bool,
    tls: Option<ServerTls>,
    policy: Policy,
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
        // Admission first: a refused connection costs an accept and a close.
        let Some(admitted) = policy.admit(remote.ip()) else {
            drop(tcp);
            continue;
        };
        // No Nagle: a stream's events are small writes, and a write held back until the
        // previous one is acknowledged meets the peer's delayed ACK (40 ms per gRPC stream
        // event, measured with `a2a-loadtest stream --binding grpc`).
        let _ = tcp.set_nodelay(true);
        // One `Arc` per connection: `axum::serve` given a bare `Router` rebuilt the route table
        // for every connection (12 KiB, kept while it is open).
        let router = router.clone();
        let shutdown = shutdown.clone();
        let open = open_rx.clone();
        let policy = policy.clone();
        let tls = tls.clone();
        tokio::spawn(async move {
            match tls {
                None => {
                    let peer = Peer::Plain {
                        remote,
                        connect_info,
                    };
                    plain(tcp, peer, router, &policy, &shutdown).await;
                }
                Some(tls) => secure(tcp, remote, tls, router, &policy, &shutdown).await,
            }
            drop(admitted);
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
    /// Closed, failed, or silent until the header-read timeout: nothing to serve.
    Nothing,
}

/// Peeks at the first bytes until they tell HTTP/2's preface from anything else (HTTP/1), or
/// until `deadline`.
async fn sniff(tcp: &TcpStream, deadline: tokio::time::Instant) -> Sniffed {
    let mut first = [0u8; H2_PREFACE.len()];
    loop {
        let peeked = tokio::time::timeout_at(deadline, tcp.peek(&mut first)).await;
        match peeked {
            Ok(Ok(n)) if n == first.len() && first == *H2_PREFACE => return Sniffed::Http2,
            Ok(Ok(n)) if n > 0 && first[..n] != H2_PREFACE[..n] => return Sniffed::Http1,
            // The start of the preface: look again once more bytes may have come.
            Ok(Ok(n)) if n > 0 => {
                if tokio::time::timeout_at(deadline, tokio::time::sleep(SNIFF_RETRY))
                    .await
                    .is_err()
                {
                    return Sniffed::Nothing;
                }
            }
            Ok(_) => return Sniffed::Nothing,
            Err(_) => return Sniffed::Nothing,
        }
    }
}

async fn plain(
    tcp: TcpStream,
    peer: Peer,
    router: Router,
    policy: &Policy,
    shutdown: &CancellationToken,
) {
    let deadline = tokio::time::Instant::now() + policy.inner.limits.header_read_timeout();
    let sniffed = tokio::select! {
        sniffed = sniff(&tcp, deadline) => sniffed,
        () = shutdown.cancelled() => return,
    };
    match sniffed {
        Sniffed::Http1 => http1_conn(TokioIo::new(tcp), peer, router, policy, shutdown).await,
        // Boxed, so the task of every HTTP/1 connection (the common case, and one per SSE
        // subscriber) is only as large as hyper's HTTP/1 state.
        Sniffed::Http2 => {
            Box::pin(http2_conn(
                TokioIo::new(tcp),
                peer,
                router,
                policy,
                shutdown,
            ))
            .await
        }
        Sniffed::Nothing => {
            if tokio::time::Instant::now() >= deadline {
                policy.closed("header_timeout");
            }
        }
    }
}

/// A TLS connection: the handshake (at most `max_tls_handshakes` at once, each within
/// `tls_handshake_timeout_ms`), then HTTP/1.1 or HTTP/2 as ALPN chose.
async fn secure(
    tcp: TcpStream,
    remote: SocketAddr,
    tls: ServerTls,
    router: Router,
    policy: &Policy,
    shutdown: &CancellationToken,
) {
    let Ok(permit) = policy.inner.handshakes.clone().try_acquire_owned() else {
        policy.refused("tls_handshakes");
        return;
    };
    let loaded = tls.loaded();
    let acceptor = tokio_rustls::TlsAcceptor::from(loaded.server);
    let timeout = policy.inner.limits.tls_handshake_timeout();
    let handshake = tokio::time::timeout(timeout, acceptor.accept(tcp));
    let stream = tokio::select! {
        done = handshake => done,
        () = shutdown.cancelled() => return,
    };
    drop(permit);
    let stream = match stream {
        Ok(Ok(stream)) => stream,
        Ok(Err(e)) => {
            metrics::counter!("a2a_tls_handshake_failures_total", "reason" => "failed")
                .increment(1);
            tracing::debug!(%remote, error = %e, "TLS handshake failed");
            return;
        }
        Err(_) => {
            metrics::counter!("a2a_tls_handshake_failures_total", "reason" => "timeout")
                .increment(1);
            tracing::debug!(%remote, "TLS handshake timed out");
            return;
        }
    };
    let h2 = TlsPeer::is_h2(&stream);
    let peer = Peer::Tls(TlsPeer::of(
        &stream,
        remote,
        loaded.client_anchors.as_deref(),
    ));
    let io = TokioIo::new(stream);
    if h2 {
        Box::pin(http2_conn(io, peer, router, policy, shutdown)).await
    } else {
        Box::pin(http1_conn(io, peer, router, policy, shutdown)).await
    }
}

async fn http1_conn<I>(
    io: TokioIo<I>,
    peer: Peer,
    router: Router,
    policy: &Policy,
    shutdown: &CancellationToken,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let service = service(peer, router, policy, None);
    let conn = policy.http1().serve_connection(io, service);
    drive(conn, shutdown, |c| c.graceful_shutdown(), None, policy).await
}

async fn http2_conn<I>(
    io: TokioIo<I>,
    peer: Peer,
    router: Router,
    policy: &Policy,
    shutdown: &CancellationToken,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let activity = Arc::new(Activity::default());
    let service = service(peer, router, policy, Some(activity.clone()));
    let conn = policy.http2().serve_connection(io, service);
    drive(
        conn,
        shutdown,
        |c| c.graceful_shutdown(),
        Some(activity),
        policy,
    )
    .await
}

/// Runs `conn` to its end; when `shutdown` fires first, asks it to close gracefully (in-flight
/// requests finish, idle keep-alive connections close) and waits for that. An HTTP/2
/// connection (`activity`) with no request in flight is closed the same way after the idle
/// timeout, or the header-read timeout while it has not sent a request yet (its preface
/// included); since nothing is in flight then, the close is given the header-read timeout too.
async fn drive<C>(
    conn: C,
    shutdown: &CancellationToken,
    graceful: fn(Pin<&mut C>),
    activity: Option<Arc<Activity>>,
    policy: &Policy,
) where
    C: Future<Output = hyper::Result<()>>,
{
    let mut conn = pin!(conn);
    let limits = &policy.inner.limits;
    let idle_wait = async {
        match &activity {
            Some(activity) => {
                activity
                    .idle_for(limits.header_read_timeout(), limits.idle_timeout())
                    .await
            }
            None => std::future::pending().await,
        }
    };
    let result = tokio::select! {
        result = conn.as_mut() => result,
        () = shutdown.cancelled() => {
            graceful(conn.as_mut());
            conn.await
        }
        served = idle_wait => {
            policy.closed(if served { "idle_timeout" } else { "header_timeout" });
            graceful(conn.as_mut());
            // hyper closes a connection still in its handshake only once the handshake is
            // done: a client that never sends its preface is dropped here.
            match tokio::time::timeout(limits.header_read_timeout(), conn).await {
                Ok(result) => result,
                Err(_) => return,
            }
        }
    };
    if let Err(e) = result {
        // What hyper refused on its own: a head too slow or too large.
        if e.is_timeout() {
            policy.closed("header_timeout");
        } else if e.is_parse_too_large() {
            policy.closed("head_too_large");
        }
        tracing::trace!(error = %e, "connection ended with an error");
    }
}

#[cfg(test)]
mod tests;
