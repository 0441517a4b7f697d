//! `[limits.edge]` and `[limits.connections]`: what one request's head and one connection may
//! cost before anything else runs (README, Security). Every value has a default an operator
//! would choose for a public gateway; each is checked when the configuration loads.

use std::time::Duration;

use serde::Deserialize;

/// The smallest `max_header_bytes` hyper's HTTP/1 server accepts (its read buffer minimum).
pub const MIN_HEADER_BYTES: usize = 8192;

/// `[limits.edge]`: bounds on the parts of a request the pipeline parses before it knows who
/// is calling. A request beyond one is refused in the binding's own format (HTTP 431 from the
/// server itself for a head beyond `max_header_bytes` / `max_headers`).
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EdgeConfig {
    /// `A2A-Extensions` (and `X-A2A-Extensions`) URIs per request, after de-duplication.
    pub max_extensions: usize,
    /// Bytes of all `A2A-Extensions` and `X-A2A-Extensions` values together.
    pub max_extension_bytes: usize,
    /// Bytes of the URL query string.
    pub max_query_bytes: usize,
    /// A request head (HTTP/1: request line and headers; HTTP/2: the header list as SETTINGS
    /// `MAX_HEADER_LIST_SIZE` counts it).
    pub max_header_bytes: usize,
    /// Header fields of an HTTP/1 request (HTTP/2 counts them in `max_header_bytes`, 32 bytes
    /// of overhead each).
    pub max_headers: usize,
}

impl Default for EdgeConfig {
    fn default() -> Self {
        Self {
            max_extensions: 32,
            max_extension_bytes: 4096,
            max_query_bytes: 8192,
            max_header_bytes: 64 * 1024,
            max_headers: 100,
        }
    }
}

impl EdgeConfig {
    pub fn validate(&self) -> Result<(), String> {
        if self.max_extensions == 0 || self.max_extension_bytes == 0 || self.max_query_bytes == 0 {
            return Err(
                "limits.edge: max_extensions, max_extension_bytes and max_query_bytes must be \
                 at least 1"
                    .into(),
            );
        }
        if self.max_header_bytes < MIN_HEADER_BYTES || self.max_header_bytes > u32::MAX as usize {
            return Err(format!(
                "limits.edge.max_header_bytes must be at least {MIN_HEADER_BYTES}"
            ));
        }
        if self.max_headers == 0 {
            return Err("limits.edge.max_headers must be at least 1".into());
        }
        Ok(())
    }
}

/// `[limits.connections]`: the public and admin listeners' connection hygiene.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ConnectionsConfig {
    /// Open connections in all (per listener); more are closed at once
    /// (`A2A_MAX_CONNECTIONS`).
    pub max: usize,
    /// Open connections per client address (an IPv6 client by its `[limits.rate]
    /// ipv6_prefix`); peers in `trusted_proxies` are exempt (`A2A_MAX_CONNECTIONS_PER_IP`).
    pub per_ip: usize,
    /// A request head must arrive in full within this: from the connection's opening (its
    /// first bytes included) and, on HTTP/1.1, from the end of the previous response (so it
    /// is also HTTP/1.1's keep-alive idle bound).
    pub header_read_timeout_ms: u64,
    /// A connection with no request in flight (HTTP/2: no open stream) is closed after this.
    pub idle_timeout_ms: u64,
    /// A request body must arrive in full within this, from the end of its head (a body
    /// trickled slower is cut and the connection closed).
    pub body_read_timeout_ms: u64,
    /// A TLS handshake must complete within this.
    pub tls_handshake_timeout_ms: u64,
    /// TLS handshakes in progress at once; a connection beyond is closed at once.
    pub max_tls_handshakes: usize,
    /// HTTP/2 streams a client may open at once on one connection.
    pub h2_max_concurrent_streams: u32,
    /// HTTP/2 rapid reset (CVE-2023-44487): streams a client opened and reset before they were
    /// served, at most this many pending; beyond, the connection is closed (GOAWAY).
    pub h2_max_pending_accept_reset_streams: usize,
    /// HTTP/2 streams the server had to reset for a client's protocol errors, per connection;
    /// beyond, the connection is closed (GOAWAY).
    pub h2_max_local_error_reset_streams: usize,
}

impl Default for ConnectionsConfig {
    fn default() -> Self {
        Self {
            max: 10_000,
            per_ip: 256,
            header_read_timeout_ms: 10_000,
            idle_timeout_ms: 60_000,
            body_read_timeout_ms: 30_000,
            tls_handshake_timeout_ms: 10_000,
            max_tls_handshakes: 1024,
            h2_max_concurrent_streams: 200,
            h2_max_pending_accept_reset_streams: 20,
            h2_max_local_error_reset_streams: 1024,
        }
    }
}

impl ConnectionsConfig {
    /// `A2A_MAX_CONNECTIONS` and `A2A_MAX_CONNECTIONS_PER_IP` over the file's values.
    pub fn apply_env(&mut self, env: &impl Fn(&str) -> Option<String>) -> Result<(), String> {
        for (var, slot) in [
            ("A2A_MAX_CONNECTIONS", &mut self.max),
            ("A2A_MAX_CONNECTIONS_PER_IP", &mut self.per_ip),
        ] {
            if let Some(v) = env(var) {
                *slot = v
                    .trim()
                    .parse()
                    .map_err(|_| format!("{var}={v:?} is not a whole number"))?;
            }
        }
        Ok(())
    }

    pub fn validate(&self) -> Result<(), String> {
        let positive = [
            ("max", self.max as u64),
            ("per_ip", self.per_ip as u64),
            ("header_read_timeout_ms", self.header_read_timeout_ms),
            ("idle_timeout_ms", self.idle_timeout_ms),
            ("body_read_timeout_ms", self.body_read_timeout_ms),
            ("tls_handshake_timeout_ms", self.tls_handshake_timeout_ms),
            ("max_tls_handshakes", self.max_tls_handshakes as u64),
            (
                "h2_max_concurrent_streams",
                u64::from(self.h2_max_concurrent_streams),
            ),
        ];
        if let Some((name, _)) = positive.iter().find(|(_, v)| *v == 0) {
            return Err(format!("limits.connections.{name} must be at least 1"));
        }
        Ok(())
    }

    pub fn header_read_timeout(&self) -> Duration {
        Duration::from_millis(self.header_read_timeout_ms)
    }

    pub fn idle_timeout(&self) -> Duration {
        Duration::from_millis(self.idle_timeout_ms)
    }

    pub fn body_read_timeout(&self) -> Duration {
        Duration::from_millis(self.body_read_timeout_ms)
    }

    pub fn tls_handshake_timeout(&self) -> Duration {
        Duration::from_millis(self.tls_handshake_timeout_ms)
    }
}
