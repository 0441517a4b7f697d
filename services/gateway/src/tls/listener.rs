//! What a TLS connection tells its requests: the remote address and the verified client
//! certificate, read once per connection. The handshakes themselves run in `conn` (each bounded
//! in time, a bounded number at once, after the connection was admitted), so one slow or silent
//! client never delays another.

use std::net::SocketAddr;

use tokio::net::TcpStream;
use tokio_rustls::server::TlsStream;

use super::{ClientAnchors, ClientCert};

/// What each request of a TLS connection carries (as `ConnectInfo<TlsPeer>`): the remote
/// address and the verified client certificate, read once per connection.
#[derive(Debug, Clone)]
pub struct TlsPeer {
    pub remote: SocketAddr,
    pub client: Option<ClientCert>,
}

impl TlsPeer {
    /// The peer of a connection whose handshake completed, its certificate read against the
    /// client CAs it was accepted with (which name the issuing CA when several are trusted).
    pub(crate) fn of(
        stream: &TlsStream<TcpStream>,
        remote: SocketAddr,
        anchors: Option<&ClientAnchors>,
    ) -> Self {
        let (_, session) = stream.get_ref();
        // Present only if it verified against the client CA (otherwise no handshake).
        let client = session
            .peer_certificates()
            .and_then(|chain| match anchors?.client_cert(chain) {
                Ok(cert) => Some(cert),
                Err(e) => {
                    tracing::warn!(error = %e, "client certificate unreadable");
                    None
                }
            });
        Self { remote, client }
    }

    /// Whether the handshake chose HTTP/2 (ALPN `h2`).
    pub fn is_h2(stream: &TlsStream<TcpStream>) -> bool {
        stream.get_ref().1.alpn_protocol() == Some(b"h2")
    }
}
