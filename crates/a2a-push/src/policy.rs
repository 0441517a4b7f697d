//! The webhook address policy: loopback, private, link-local, multicast, unspecified and
//! reserved addresses are refused unless an allowlist entry names the host or covers the
//! address. One rule for both checks: at config creation (URL literal) and at connect time
//! (every address the name resolved to).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Why a webhook address is refused; the message names the host, the address and its class.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", describe(.host, .addr, .class))]
pub struct Blocked {
    pub host: String,
    /// The refused address (`None` when the name itself is refused, like `localhost`).
    pub addr: Option<IpAddr>,
    /// `loopback`, `private`, `link-local`, `multicast`, `unspecified` or `reserved`.
    pub class: &'static str,
}

fn describe(host: &str, addr: &Option<IpAddr>, class: &str) -> String {
    match addr {
        Some(ip) if ip.to_string() == host => {
            format!("{host} is a {class} address (not allowed for webhooks)")
        }
        Some(ip) => {
            format!("{host} resolves to {ip}, a {class} address (not allowed for webhooks)")
        }
        None => format!("{host} is a {class} host name (not allowed for webhooks)"),
    }
}

/// The allowlist (`A2A_PUSH_ALLOWED_HOSTS`), comma separated: host names and IP literals allow
/// URLs whose host is written that way; CIDR networks (`10.0.0.0/8`, `127.0.0.1/32`) allow the
/// addresses in them whatever name led there; `*` allows everything (development only). Empty by
/// default: webhooks reach public addresses only.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AddressPolicy {
    /// Lower-case host names and IP literals, matched against the URL's host as written.
    hosts: Vec<String>,
    /// Networks whose addresses are allowed whatever name led to them.
    nets: Vec<(IpAddr, u8)>,
    allow_all: bool,
}

impl AddressPolicy {
    /// Parses the allowlist; an entry that is neither a host, an address nor a network is an
    /// error naming it.
    pub fn parse(spec: &str) -> Result<Self, String> {
        let mut policy = Self::default();
        for entry in spec.split([',', ' ', '\n']).map(str::trim) {
            if entry.is_empty() {
                continue;
            }
            policy.add(entry)?;
        }
        Ok(policy)
    }

    /// Builds the policy from a list of entries (a configuration file's array).
    pub fn from_entries<S: AsRef<str>>(entries: &[S]) -> Result<Self, String> {
        let mut policy = Self::default();
        for entry in entries {
            policy.add(entry.as_ref().trim())?;
        }
        Ok(policy)
    }

    fn add(&mut self, entry: &str) -> Result<(), String> {
        if entry == "*" {
            self.allow_all = true;
            return Ok(());
        }
        if let Some((addr, len)) = entry.split_once('/') {
            let addr: IpAddr = addr
                .parse()
                .map_err(|_| format!("{entry:?} is not a network like 10.0.0.0/8"))?;
            let max = if addr.is_ipv4() { 32 } else { 128 };
            let len: u8 = len
                .parse()
                .ok()
                .filter(|l| *l <= max)
                .ok_or_else(|| format!("{entry:?} has an invalid prefix length"))?;
            self.nets.push((addr, len));
            return Ok(());
        }
        let host = normalize(entry);
        if let Ok(ip) = host.trim_matches(['[', ']']).parse::<IpAddr>() {
            // A literal allows URLs that name it, not names that resolve to it: a host name
            // leading to 127.0.0.1 is still refused unless it is listed itself (or a network).
            self.hosts.push(ip.to_string());
            return Ok(());
        }
        if host.is_empty()
            || !host
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-._".contains(c))
        {
            return Err(format!("{entry:?} is not a host name, address or network"));
        }
        self.hosts.push(host);
        Ok(())
    }

    /// Whether the URL's host, as written, is on the allowlist.
    pub fn host_allowed(&self, host: &str) -> bool {
        if self.allow_all {
            return true;
        }
        let host = normalize(host);
        let host = host.trim_matches(['[', ']']);
        self.hosts.iter().any(|h| h == host)
    }

    /// The creation-time check of a webhook URL: an IP literal must be public (or allowed), and
    /// `localhost` names are refused. Other names are checked when the worker connects.
    pub fn check_url(&self, url: &url::Url) -> Result<(), Blocked> {
        let host = url.host_str().unwrap_or_default();
        match url.host() {
            Some(url::Host::Ipv4(ip)) => self.check_addr(host, IpAddr::V4(ip)),
            Some(url::Host::Ipv6(ip)) => self.check_addr(host, IpAddr::V6(ip)),
            Some(url::Host::Domain(name)) => {
                let name = normalize(name);
                if (name == "localhost" || name.ends_with(".localhost"))
                    && !self.host_allowed(&name)
                {
                    return Err(Blocked {
                        host: name,
                        addr: None,
                        class: "loopback",
                    });
                }
                Ok(())
            }
            None => Ok(()),
        }
    }

    /// The connect-time check of one address `host` resolved to (or `host` itself, a literal).
    pub fn check_addr(&self, host: &str, ip: IpAddr) -> Result<(), Blocked> {
        if self.host_allowed(host) || self.nets.iter().any(|(net, len)| contains(*net, *len, ip)) {
            return Ok(());
        }
        match classify(ip) {
            None => Ok(()),
            Some(class) => Err(Blocked {
                host: host.trim_matches(['[', ']']).to_owned(),
                addr: Some(ip),
                class,
            }),
        }
    }
}

fn normalize(host: &str) -> String {
    host.trim().trim_end_matches('.').to_ascii_lowercase()
}

/// The class of an address webhooks may not reach, or `None` for a public one.
pub(crate) fn classify(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => classify_v4(v4),
        IpAddr::V6(v6) => classify_v6(v6),
    }
}

fn classify_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, b, ..] = ip.octets();
    if ip.is_loopback() {
        Some("loopback")
    } else if ip.is_unspecified() || a == 0 {
        Some("unspecified")
    } else if ip.is_private() || (a == 100 && (64..128).contains(&b)) {
        // RFC 1918, plus the shared carrier-grade NAT space (RFC 6598).
        Some("private")
    } else if ip.is_link_local() {
        Some("link-local")
    } else if ip.is_multicast() {
        Some("multicast")
    } else if ip.is_broadcast() || a >= 240 || (a == 192 && b == 0 && ip.octets()[2] == 0) {
        Some("reserved")
    } else {
        None
    }
}

fn classify_v6(ip: Ipv6Addr) -> Option<&'static str> {
    if let Some(v4) = ip.to_ipv4_mapped() {
        return classify_v4(v4);
    }
    let seg = ip.segments();
    // NAT64 (64:ff9b::/96) and IPv4-compatible (::a.b.c.d) addresses reach an IPv4 address.
    if (seg[0] == 0x64 && seg[1] == 0xff9b && seg[2..6] == [0; 4])
        || (seg[..6] == [0; 6] && !ip.is_loopback() && !ip.is_unspecified())
    {
        let [a, b] = seg[6].to_be_bytes();
        let [c, d] = seg[7].to_be_bytes();
        return classify_v4(Ipv4Addr::new(a, b, c, d));
    }
    if ip.is_loopback() {
        Some("loopback")
    } else if ip.is_unspecified() {
        Some("unspecified")
    } else if ip.is_unique_local() {
        Some("private")
    } else if ip.is_unicast_link_local() || (seg[0] & 0xffc0) == 0xfec0 {
        // fe80::/10, and the deprecated site-local fec0::/10.
        Some("link-local")
    } else if ip.is_multicast() {
        Some("multicast")
    } else {
        None
    }
}

fn contains(net: IpAddr, len: u8, ip: IpAddr) -> bool {
    match (net, ip) {
        (IpAddr::V4(n), IpAddr::V4(i)) => {
            let mask = u32::MAX.checked_shl(32 - u32::from(len)).unwrap_or(0);
            u32::from(n) & mask == u32::from(i) & mask
        }
        (IpAddr::V6(n), IpAddr::V6(i)) => {
            let mask = u128::MAX.checked_shl(128 - u32::from(len)).unwrap_or(0);
            u128::from(n) & mask == u128::from(i) & mask
        }
        (IpAddr::V4(_), IpAddr::V6(i)) => i
            .to_ipv4_mapped()
            .is_some_and(|v4| contains(net, len, IpAddr::V4(v4))),
        (IpAddr::V6(_), IpAddr::V4(_)) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn internal_addresses_are_classified() {
        for (addr, class) in [
            ("127.0.0.1", "loopback"),
            ("10.1.2.3", "private"),
            ("172.16.0.1", "private"),
            ("192.168.1.1", "private"),
            ("100.64.0.1", "private"),
            ("169.254.169.254", "link-local"),
            ("224.0.0.1", "multicast"),
            ("0.0.0.0", "unspecified"),
            ("255.255.255.255", "reserved"),
            ("::1", "loopback"),
            ("::", "unspecified"),
            ("fd00::1", "private"),
            ("fe80::1", "link-local"),
            ("ff02::1", "multicast"),
            ("::ffff:127.0.0.1", "loopback"),
            ("::ffff:10.0.0.1", "private"),
            ("64:ff9b::a9fe:a9fe", "link-local"),
        ] {
            assert_eq!(classify(ip(addr)), Some(class), "{addr}");
        }
        for public in ["93.184.216.34", "8.8.8.8", "2606:4700::1111", "100.128.0.1"] {
            assert_eq!(classify(ip(public)), None, "{public}");
        }
    }

    #[test]
    fn the_allowlist_names_hosts_addresses_and_networks() {
        let policy = AddressPolicy::parse("127.0.0.1, hooks.internal,10.0.0.0/8").unwrap();
        assert!(policy.check_addr("127.0.0.1", ip("127.0.0.1")).is_ok());
        // The literal allows itself, not a name that resolves to it.
        assert!(policy.check_addr("localhost", ip("127.0.0.1")).is_err());
        assert!(
            policy
                .check_addr("hooks.internal", ip("192.168.0.5"))
                .is_ok()
        );
        assert!(policy.check_addr("other", ip("10.9.9.9")).is_ok());
        let refused = policy.check_addr("other", ip("192.168.0.5")).unwrap_err();
        assert_eq!(refused.class, "private");
        assert!(
            refused
                .to_string()
                .contains("other resolves to 192.168.0.5")
        );
        assert!(AddressPolicy::parse("10.0.0.0/40").is_err());
        assert!(AddressPolicy::parse("not a host!").is_err());
        assert!(
            AddressPolicy::parse("*")
                .unwrap()
                .check_addr("x", ip("127.0.0.1"))
                .is_ok()
        );
    }

    #[test]
    fn urls_are_checked_as_written() {
        let none = AddressPolicy::default();
        let url = |s: &str| url::Url::parse(s).unwrap();
        assert!(none.check_url(&url("https://hooks.example.com/a")).is_ok());
        assert!(none.check_url(&url("https://93.184.216.34/a")).is_ok());
        for bad in [
            "http://127.0.0.1:9000/hook",
            "http://[::1]/hook",
            "http://10.0.0.1/hook",
            "http://169.254.169.254/latest/meta-data",
            "http://localhost/hook",
            "http://api.localhost./hook",
            "http://0.0.0.0/",
        ] {
            assert!(none.check_url(&url(bad)).is_err(), "{bad}");
        }
        let allow = AddressPolicy::parse("127.0.0.1,localhost").unwrap();
        assert!(allow.check_url(&url("http://127.0.0.1:9000/hook")).is_ok());
        assert!(allow.check_url(&url("http://localhost:9000/hook")).is_ok());
    }
}
