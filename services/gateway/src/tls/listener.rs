//! The TLS listener axum serves: TCP connections are accepted and their handshakes run
//! concurrently (each bounded in time), so one slow or silent client never delays another;
//! finished handshakes are handed to axum in order of completion.

use std::net::SocketAddr;
use std::time::Duration;

use axum::extract::connect_info::Connected;
use axum::serve::IncomingStream;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

use super::{ClientCert, ServerTls};

/// Longest a client may take to complete its handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Completed handshakes waiting for axum to take them.
const BACKLOG: usize = 128;

pub struct TlsListener {
    local: SocketAddr,
    ready: mpsc::Receiver<(TlsStream<TcpStream>, TlsAddr)>,
}

/// What the listener hands axum beside each connection: the remote address and the client
/// certificate, read once when the handshake finishes (with the client CAs it was accepted
/// with).
#[derive(Debug, Clone)]
pub struct TlsAddr {
    remote: SocketAddr,
    client: Option<ClientCert>,
}

impl TlsListener {
    /// Starts accepting on `tcp`. Accepting stops when this listener is dropped (axum drops it
    /// when the graceful shutdown begins), which closes the socket.
    pub fn new(tcp: TcpListener, tls: ServerTls) -> std::io::Result<Self> {
        let local = tcp.local_addr()?;
        let (tx, ready) = mpsc::channel(BACKLOG);
        tokio::spawn(accept_loop(tcp, tls, tx));
        Ok(Self { local, ready })
    }
}

async fn accept_loop(
    tcp: TcpListener,
    tls: ServerTls,
    tx: mpsc::Sender<(TlsStream<TcpStream>, TlsAddr)>,
) {
    loop {
        let (stream, remote) = tokio::select! {
            () = tx.closed() => return,
            accepted = tcp.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // As axum does for TCP: out of file descriptors and the like pass.
                    tracing::debug!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let _ = stream.set_nodelay(true);
        let loaded = tls.loaded();
        let acceptor = TlsAcceptor::from(loaded.server);
        let anchors = loaded.client_anchors;
        let tx = tx.clone();
        tokio::spawn(async move {
            match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                Ok(Ok(tls)) => {
                    let client = client_cert(&tls, anchors.as_deref());
                    let _ = tx.send((tls, TlsAddr { remote, client })).await;
                }
                Ok(Err(e)) => {
                    metrics::counter!("a2a_tls_handshake_failures_total", "reason" => "failed")
                        .increment(1);
                    tracing::debug!(%remote, error = %e, "TLS handshake failed");
                }
                Err(_) => {
                    metrics::counter!("a2a_tls_handshake_failures_total", "reason" => "timeout")
                        .increment(1);
                    tracing::debug!(%remote, "TLS handshake timed out");
                }
            }
        });
    }
}

/// The verified client certificate of a connection, if it presented one (present only if it
/// verified against the client CA: otherwise no handshake).
fn client_cert(
    tls: &TlsStream<TcpStream>,
    anchors: Option<&super::ClientAnchors>,
) -> Option<ClientCert> {
    let (_, session) = tls.get_ref();
    let chain = session.peer_certificates()?;
    match anchors?.client_cert(chain) {
        Ok(cert) => Some(cert),
        Err(e) => {
            tracing::warn!(error = %e, "client certificate unreadable");
            None
        }
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = TlsAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.ready.recv().await {
            Some(conn) => conn,
            // The accept loop only ends once this receiver is gone.
            None => std::future::pending().await,
        }
    }

    /// The local address (no client certificate).
    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(TlsAddr {
            remote: self.local,
            client: None,
        })
    }
}

/// What each request of a TLS connection carries (as `ConnectInfo<TlsPeer>`): the remote
/// address and the verified client certificate, read once per connection.
#[derive(Debug, Clone)]
pub struct TlsPeer {
    pub remote: SocketAddr,
    pub client: Option<ClientCert>,
}

impl Connected<IncomingStream<'_, TlsListener>> for TlsPeer {
    fn connect_info(stream: IncomingStream<'_, TlsListener>) -> Self {
        let addr = stream.remote_addr();
        Self {
            remote: addr.remote,
            client: addr.client.clone(),
        }
    }
}
