//! Who a client is, by address: the key its per-IP limits count under (an IPv6 client by its
//! network prefix, /64 by default, since one host is commonly given a whole /64), and the
//! client address of a request that came through a trusted proxy (README, Rate limits).

use std::net::{IpAddr, Ipv6Addr};

use axum::http::{HeaderMap, HeaderName};
use ipnet::IpNet;

/// What identifies clients by address: the IPv6 prefix length keys are grouped by, the proxies
/// whose `client_ip_header` is believed, and that header.
#[derive(Debug, Clone)]
pub struct ClientAddressing {
    ipv6_prefix: u8,
    trusted: Vec<IpNet>,
    header: Option<HeaderName>,
}

impl Default for ClientAddressing {
    fn default() -> Self {
        Self {
            ipv6_prefix: 64,
            trusted: Vec::new(),
            header: None,
        }
    }
}

/// Parses `trusted_proxies` entries: CIDR networks (`10.0.0.0/8`, `fd00::/8`) or single
/// addresses.
pub fn parse_networks(entries: &[String]) -> Result<Vec<IpNet>, String> {
    entries
        .iter()
        .map(|e| {
            let e = e.trim();
            e.parse::<IpNet>()
                .or_else(|_| e.parse::<IpAddr>().map(IpNet::from))
                .map_err(|_| format!("{e:?} is not an address or a CIDR network"))
        })
        .collect()
}

impl ClientAddressing {
    pub fn new(ipv6_prefix: u8, trusted: Vec<IpNet>, header: Option<HeaderName>) -> Self {
        Self {
            ipv6_prefix: ipv6_prefix.min(128),
            trusted,
            header,
        }
    }

    /// Whether `ip` is one of the trusted proxies.
    pub fn is_trusted(&self, ip: IpAddr) -> bool {
        let ip = canonical(ip);
        self.trusted.iter().any(|net| net.contains(&ip))
    }

    /// The key a client's per-IP limits count under: an IPv4 address (an IPv4-mapped IPv6
    /// address counts as its IPv4 one) as it is, an IPv6 address masked to `ipv6_prefix` bits.
    pub fn key(&self, ip: IpAddr) -> IpAddr {
        match canonical(ip) {
            IpAddr::V6(v6) => {
                let bits = u128::from(v6);
                let mask = match self.ipv6_prefix {
                    0 => 0,
                    p => u128::MAX << (128 - u32::from(p)),
                };
                IpAddr::V6(Ipv6Addr::from(bits & mask))
            }
            v4 => v4,
        }
    }

    /// The client's address: with `client_ip_header` set and the TCP peer a trusted proxy, the
    /// right-most address of that header that is not itself a trusted proxy (each proxy
    /// appends the address it received from; what lies left of the first untrusted one was
    /// written by the client). An entry that does not parse ends the walk: the last trusted
    /// hop then stands for the client. Otherwise the peer's address. Linear in the header's
    /// size.
    pub fn client_ip(&self, headers: &HeaderMap, peer: Option<IpAddr>) -> Option<IpAddr> {
        let (Some(name), Some(peer)) = (&self.header, peer) else {
            return peer;
        };
        if !self.is_trusted(peer) {
            return Some(peer);
        }
        let mut nearest = peer;
        for value in headers.get_all(name).iter().rev() {
            let Ok(value) = value.to_str() else {
                return Some(nearest);
            };
            for entry in value.rsplit(',') {
                let Ok(ip) = entry.trim().parse::<IpAddr>() else {
                    return Some(nearest);
                };
                if !self.is_trusted(ip) {
                    return Some(ip);
                }
                nearest = ip;
            }
        }
        Some(nearest)
    }
}

/// An IPv4-mapped IPv6 address as its IPv4 address (a dual-stack socket reports IPv4 clients
/// so); anything else as it is.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
        v4 => v4,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn ipv6_clients_are_grouped_by_their_prefix() {
        let by64 = ClientAddressing::default();
        assert_eq!(by64.key(ip("2001:db8:1:2:aaaa::1")), ip("2001:db8:1:2::"));
        assert_eq!(
            by64.key(ip("2001:db8:1:2:aaaa::1")),
            by64.key(ip("2001:db8:1:2:ffff:1:2:3"))
        );
        assert_ne!(
            by64.key(ip("2001:db8:1:2::1")),
            by64.key(ip("2001:db8:1:3::1"))
        );
        assert_eq!(by64.key(ip("192.0.2.7")), ip("192.0.2.7"));
        assert_eq!(by64.key(ip("::ffff:192.0.2.7")), ip("192.0.2.7"));
        let by128 = ClientAddressing::new(128, Vec::new(), None);
        assert_eq!(by128.key(ip("2001:db8::1")), ip("2001:db8::1"));
        let by48 = ClientAddressing::new(48, Vec::new(), None);
        assert_eq!(by48.key(ip("2001:db8:1:2::1")), ip("2001:db8:1::"));
        assert_eq!(
            ClientAddressing::new(0, Vec::new(), None).key(ip("2001:db8::1")),
            ip("::")
        );
    }

    #[test]
    fn the_header_is_believed_from_trusted_proxies_only_right_to_left() {
        let trusted = parse_networks(&["10.0.0.0/8".into(), "192.0.2.1".into()]).unwrap();
        let xff = HeaderName::from_static("x-forwarded-for");
        let a = ClientAddressing::new(64, trusted, Some(xff.clone()));
        let mut h = HeaderMap::new();
        h.append(
            &xff,
            HeaderValue::from_static("6.6.6.6, 203.0.113.9, 10.1.1.1"),
        );
        // From a trusted proxy: the right-most untrusted entry (the client wrote 6.6.6.6).
        assert_eq!(
            a.client_ip(&h, Some(ip("10.0.0.2"))),
            Some(ip("203.0.113.9"))
        );
        assert_eq!(
            a.client_ip(&h, Some(ip("192.0.2.1"))),
            Some(ip("203.0.113.9"))
        );
        // From anyone else: the peer, whatever the header says.
        assert_eq!(
            a.client_ip(&h, Some(ip("198.51.100.4"))),
            Some(ip("198.51.100.4"))
        );
        // An unparsable entry ends the walk at the last trusted hop.
        let mut bad = HeaderMap::new();
        bad.append(&xff, HeaderValue::from_static("6.6.6.6, unknown, 10.1.1.1"));
        assert_eq!(
            a.client_ip(&bad, Some(ip("10.0.0.2"))),
            Some(ip("10.1.1.1"))
        );
        // Repeated headers read as one list, the last header last.
        let mut two = HeaderMap::new();
        two.append(&xff, HeaderValue::from_static("6.6.6.6, 203.0.113.9"));
        two.append(&xff, HeaderValue::from_static("10.1.1.1"));
        assert_eq!(
            a.client_ip(&two, Some(ip("10.0.0.2"))),
            Some(ip("203.0.113.9"))
        );
        // No header: the peer.
        assert_eq!(
            a.client_ip(&HeaderMap::new(), Some(ip("10.0.0.2"))),
            Some(ip("10.0.0.2"))
        );
        assert!(parse_networks(&["nope".into()]).is_err());
    }
}
