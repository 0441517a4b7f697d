//! What a TLS connection tells its requests: the remote address and the verified client
//! certificate, read once per connection. The handshakes themselves run in `conn` (each bounded
//! in time, a bounded number at once, after the connection was admitted), so one slow or silent
//! client never delays another.

use std::net::SocketAddr;

use tokio::net::TcpStream;
use tokio_rustls::server::TlsStream;

use super::ClientCert;

/// What each request of a TLS connection carries (as `ConnectInfo<TlsPeer>`): the remote
/// address and the verified client certificate, read once per connection.
#[derive(Debug, Clone)]
pub struct TlsPeer {
    pub remote: SocketAddr,
    pub client: Option<ClientCert>,
}

impl TlsPeer {
    /// The peer of a connection whose handshake completed.
    pub fn of(stream: &TlsStream<TcpStream>, remote: SocketAddr) -> Self {
        let (_, session) = stream.get_ref();
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
        Self { remote, client }
    }

    /// Whether the handshake chose HTTP/2 (ALPN `h2`).
    pub fn is_h2(stream: &TlsStream<TcpStream>) -> bool {
        stream.get_ref().1.alpn_protocol() == Some(b"h2")
    }
}
