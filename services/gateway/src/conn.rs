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

use std::collections::HashMap;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::pin::{Pin, pin};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use bytes::Bytes;
use hyper::body::{Frame, Incoming, SizeHint};
use hyper::server::conn::{http1, http2};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, watch};
use tokio_util::sync::CancellationToken;
use tower::Service as _;

use crate::limits::{ClientAddressing, ConnectionsConfig, EdgeConfig};
use crate::tls::{ServerTls, TlsPeer};

/// The first bytes of every HTTP/2 connection with prior knowledge (RFC 9113 §3.4).
const H2_PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// How long the sniff waits before it looks again at a connection whose first bytes are only
/// the start of the HTTP/2 preface.
const SNIFF_RETRY: Duration = Duration::from_millis(5);

/// One listener's connection policy: its name (the `listener` label), the limits, and the
/// connections it holds now.
#[derive(Clone)]
pub(crate) struct Policy {
    inner: Arc<PolicyInner>,
}

struct PolicyInner {
    listener: &'static str,
    limits: ConnectionsConfig,
    max_header_bytes: usize,
    max_headers: usize,
    addressing: ClientAddressing,
    /// Connections open now, in all.
    open: AtomicUsize,
    /// Connections open now by client key (entries live while their count is positive, so the
    /// map holds at most `limits.max` entries).
    by_client: Mutex<HashMap<IpAddr, usize>>,
    /// TLS handshakes in progress.
    handshakes: Arc<Semaphore>,
}

impl Policy {
    pub(crate) fn new(
        listener: &'static str,
        limits: &ConnectionsConfig,
        edge: &EdgeConfig,
        addressing: ClientAddressing,
    ) -> Self {
        Self {
            inner: Arc::new(PolicyInner {
                listener,
                limits: limits.clone(),
                max_header_bytes: edge.max_header_bytes,
                max_headers: edge.max_headers,
                addressing,
                open: AtomicUsize::new(0),
                by_client: Mutex::new(HashMap::new()),
                handshakes: Arc::new(Semaphore::new(limits.max_tls_handshakes)),
            }),
        }
    }

    /// Admits a connection from `peer`, or refuses it (counted) when the listener holds `max`
    /// connections, or this client `per_ip` (trusted proxies are exempt from the latter).
    fn admit(&self, peer: IpAddr) -> Option<Admitted> {
        let inner = &self.inner;
        if inner.open.fetch_add(1, Ordering::AcqRel) >= inner.limits.max {
            inner.open.fetch_sub(1, Ordering::AcqRel);
            self.refused("max_connections");
            return None;
        }
        let key = (!inner.addressing.is_trusted(peer)).then(|| inner.addressing.key(peer));
        if let Some(key) = key {
            let mut by_client = inner.by_client.lock().unwrap_or_else(|e| e.into_inner());
            let count = by_client.entry(key).or_insert(0);
            if *count >= inner.limits.per_ip {
                drop(by_client);
                inner.open.fetch_sub(1, Ordering::AcqRel);
                self.refused("per_ip");
                return None;
            }
            *count += 1;
        }
        metrics::gauge!("a2a_connections_open", "listener" => inner.listener).increment(1.0);
        Some(Admitted {
            policy: self.clone(),
            key,
        })
    }

    fn refused(&self, reason: &'static str) {
        metrics::counter!(
            "a2a_connections_refused_total",
            "listener" => self.inner.listener,
            "reason" => reason,
        )
        .increment(1);
        tracing::debug!(listener = self.inner.listener, reason, "connection refused");
    }

    fn closed(&self, reason: &'static str) {
        closed(self.inner.listener, reason);
    }

    fn http1(&self) -> http1::Builder {
        let mut b = http1::Builder::new();
        b.timer(TokioTimer::new())
            .header_read_timeout(self.inner.limits.header_read_timeout())
            .max_buf_size(self.inner.max_header_bytes)
            .max_headers(self.inner.max_headers);
        b
    }

    fn http2(&self) -> http2::Builder<TokioExecutor> {
        let l = &self.inner.limits;
        let mut b = http2::Builder::new(TokioExecutor::new());
        b.timer(TokioTimer::new())
            .max_concurrent_streams(l.h2_max_concurrent_streams)
            .max_header_list_size(u32::try_from(self.inner.max_header_bytes).unwrap_or(u32::MAX))
            .max_pending_accept_reset_streams(l.h2_max_pending_accept_reset_streams)
            .max_local_error_reset_streams(l.h2_max_local_error_reset_streams);
        b
    }
}

fn closed(listener: &'static str, reason: &'static str) {
    metrics::counter!(
        "a2a_connections_closed_total",
        "listener" => listener,
        "reason" => reason,
    )
    .increment(1);
}

/// An admitted connection, counted until it is dropped.
struct Admitted {
    policy: Policy,
    key: Option<IpAddr>,
}

impl Drop for Admitted {
    fn drop(&mut self) {
        let inner = &self.policy.inner;
        if let Some(key) = self.key {
            let mut by_client = inner.by_client.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(count) = by_client.get_mut(&key) {
                *count -= 1;
                if *count == 0 {
                    by_client.remove(&key);
                }
            }
        }
        inner.open.fetch_sub(1, Ordering::AcqRel);
        metrics::gauge!("a2a_connections_open", "listener" => inner.listener).decrement(1.0);
    }
}

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
    let peer = Peer::Tls(TlsPeer::of(&stream, remote, loaded.client_anchors.as_deref()));
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

/// The per-request service of a connection: the peer's extensions, the body's read deadline,
/// and (HTTP/2) the count of requests in flight that the idle timeout watches.
#[derive(Clone)]
struct ConnService {
    peer: Peer,
    router: Router,
    listener: &'static str,
    body_timeout: Duration,
    activity: Option<Arc<Activity>>,
}

fn service(
    peer: Peer,
    router: Router,
    policy: &Policy,
    activity: Option<Arc<Activity>>,
) -> ConnService {
    ConnService {
        peer,
        router,
        listener: policy.inner.listener,
        body_timeout: policy.inner.limits.body_read_timeout(),
        activity,
    }
}

impl hyper::service::Service<hyper::Request<Incoming>> for ConnService {
    type Response = axum::response::Response;
    type Error = std::convert::Infallible;
    type Future = Answer;

    fn call(&self, req: hyper::Request<Incoming>) -> Answer {
        let mut req = req.map(|body| {
            if hyper::body::Body::is_end_stream(&body) {
                Body::new(body)
            } else {
                Body::new(TimedBody::new(body, self.body_timeout, self.listener))
            }
        });
        match &self.peer {
            Peer::Plain {
                remote,
                connect_info: true,
            } => {
                req.extensions_mut().insert(ConnectInfo(*remote));
            }
            Peer::Plain { .. } => {}
            Peer::Tls(tls) => {
                req.extensions_mut().insert(ConnectInfo(tls.remote));
                req.extensions_mut().insert(ConnectInfo(tls.clone()));
            }
        }
        let held = self.activity.as_ref().map(|a| a.start());
        Answer {
            response: self.router.clone().call(req),
            held,
        }
    }
}

/// The router's answer, its body holding the request's [`InFlight`] (HTTP/2).
struct Answer {
    response: axum::routing::future::RouteFuture<std::convert::Infallible>,
    held: Option<InFlight>,
}

impl Future for Answer {
    type Output = Result<axum::response::Response, std::convert::Infallible>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        let response = match Pin::new(&mut this.response).poll(cx) {
            Poll::Ready(Ok(response)) => response,
            Poll::Ready(Err(never)) => match never {},
            Poll::Pending => return Poll::Pending,
        };
        Poll::Ready(Ok(match this.held.take() {
            Some(held) => response.map(|body| Body::new(Held { body, _held: held })),
            None => response,
        }))
    }
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

/// The requests in flight on an HTTP/2 connection, for its idle timeout: plain counters the
/// requests update, read by the connection's one timer (a request never wakes it).
struct Activity {
    in_flight: AtomicUsize,
    /// Whether a request ever came.
    served: std::sync::atomic::AtomicBool,
    /// When the last request ended, in milliseconds since `opened`.
    last_end_ms: std::sync::atomic::AtomicU64,
    opened: std::time::Instant,
}

impl Default for Activity {
    fn default() -> Self {
        Self {
            in_flight: AtomicUsize::new(0),
            served: std::sync::atomic::AtomicBool::new(false),
            last_end_ms: std::sync::atomic::AtomicU64::new(0),
            opened: std::time::Instant::now(),
        }
    }
}

impl Activity {
    fn start(self: &Arc<Self>) -> InFlight {
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        self.served.store(true, Ordering::Release);
        InFlight(self.clone())
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.opened.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Returns once no request has been in flight for `idle` (for `first` while none has
    /// come yet), with whether one ever came. Wakes once per period, not per request.
    async fn idle_for(&self, first: Duration, idle: Duration) -> bool {
        let mut wait = first.min(idle);
        loop {
            tokio::time::sleep(wait).await;
            let served = self.served.load(Ordering::Acquire);
            let limit = if served { idle } else { first };
            if self.in_flight.load(Ordering::Acquire) > 0 {
                wait = limit;
                continue;
            }
            let since = Duration::from_millis(
                self.now_ms()
                    .saturating_sub(self.last_end_ms.load(Ordering::Acquire)),
            );
            if since >= limit {
                return served;
            }
            wait = limit - since;
        }
    }
}

/// One request in flight, until its response body is dropped.
struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        let activity = &self.0;
        activity
            .last_end_ms
            .fetch_max(activity.now_ms(), Ordering::AcqRel);
        activity.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A response body that holds its request's [`InFlight`] until it is dropped.
struct Held {
    body: Body,
    _held: InFlight,
}

impl hyper::body::Body for Held {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        hyper::body::Body::poll_frame(Pin::new(&mut self.body), cx)
    }

    fn is_end_stream(&self) -> bool {
        hyper::body::Body::is_end_stream(&self.body)
    }

    fn size_hint(&self) -> SizeHint {
        hyper::body::Body::size_hint(&self.body)
    }
}

/// A request body that must arrive in full by a deadline (`body_read_timeout_ms`); past it,
/// reading fails, the body is dropped unread and the connection closes once answered.
struct TimedBody {
    body: Incoming,
    deadline: tokio::time::Instant,
    /// Armed the first time the body is not ready (a body that came with its head never
    /// touches the timer).
    sleep: Option<Pin<Box<tokio::time::Sleep>>>,
    listener: &'static str,
}

impl TimedBody {
    fn new(body: Incoming, timeout: Duration, listener: &'static str) -> Self {
        Self {
            body,
            deadline: tokio::time::Instant::now() + timeout,
            sleep: None,
            listener,
        }
    }
}

/// The error a [`TimedBody`] ends with.
#[derive(Debug, thiserror::Error)]
#[error("the request body did not arrive within the body read timeout")]
struct BodyTimedOut;

impl hyper::body::Body for TimedBody {
    type Data = Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = &mut *self;
        if let Poll::Ready(frame) = hyper::body::Body::poll_frame(Pin::new(&mut this.body), cx) {
            return Poll::Ready(frame.map(|f| f.map_err(Into::into)));
        }
        let deadline = this.deadline;
        let sleep = this
            .sleep
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
        if sleep.as_mut().poll(cx).is_ready() {
            closed(this.listener, "body_timeout");
            return Poll::Ready(Some(Err(Box::new(BodyTimedOut))));
        }
        Poll::Pending
    }

    fn is_end_stream(&self) -> bool {
        hyper::body::Body::is_end_stream(&self.body)
    }

    fn size_hint(&self) -> SizeHint {
        hyper::body::Body::size_hint(&self.body)
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
}
