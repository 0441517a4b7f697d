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
    ready: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
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
    tx: mpsc::Sender<(TlsStream<TcpStream>, SocketAddr)>,
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
        let acceptor = TlsAcceptor::from(tls.config());
        let tx = tx.clone();
        tokio::spawn(async move {
            match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                Ok(Ok(tls)) => {
                    let _ = tx.send((tls, remote)).await;
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

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.ready.recv().await {
            Some(conn) => conn,
            // The accept loop only ends once this receiver is gone.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(self.local)
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
        let (_, session) = stream.io().get_ref();
        // Present only if it verified against the client CA (otherwise no handshake).
        let client = session
            .peer_certificates()
            .and_then(|chain| chain.first())
            .and_then(|leaf| match super::distinguished_name(leaf) {
                Ok(subject) => Some(ClientCert { subject }),
                Err(e) => {
                    tracing::warn!(error = %e, "client certificate subject unreadable");
                    None
                }
            });
        Self {
            remote: *stream.remote_addr(),
            client,
        }
    }
}
