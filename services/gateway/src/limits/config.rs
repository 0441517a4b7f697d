//! `[limits.rate]`: the rate limits of the configuration file (README, Rate limits). Every scope
//! is off unless it is set, so the embedded gateway limits nothing by default.

use std::collections::BTreeMap;

use serde::Deserialize;

use a2a_types::Method;

/// `[limits.rate]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RateConfig {
    /// Where the limiters keep their state: `local` (this process) or `redis` (one GCRA per key
    /// in the Redis of `A2A_REDIS_URL`, shared by every replica; the local limiter decides while
    /// Redis is unreachable).
    pub backend: Backend,
    /// Per client IP, before authentication (so failed-auth floods are limited too).
    pub ip: Option<Rate>,
    /// Per authenticated principal (callers are not limited by it while `[auth]` is off).
    pub principal: Option<Rate>,
    /// Per agent a send reaches (protects upstream agents from all callers together).
    pub agent: Option<Rate>,
    /// Per-principal limits in place of `principal`, by principal or API key id.
    pub overrides: Vec<Override>,
    /// The cost of a call by method (JSON-RPC/gRPC name), in place of [`default_cost`].
    pub costs: BTreeMap<String, u32>,
    /// A header the proxies in `trusted_proxies` append the client's address to (e.g.
    /// `X-Forwarded-For`); unset = the TCP peer's address. Believed only on a connection from
    /// a trusted proxy; the client is the right-most address in it that is not a trusted proxy.
    pub client_ip_header: Option<String>,
    /// The proxies (CIDR networks or addresses) whose `client_ip_header` is believed; they are
    /// also exempt from `[limits.connections] per_ip` (`A2A_TRUSTED_PROXIES`, comma separated).
    pub trusted_proxies: Vec<String>,
    /// IPv6 clients share one per-IP key (rate limit and connection cap) per network of this
    /// prefix length (a host is commonly given a whole /64); 128 = one key per address.
    pub ipv6_prefix: u8,
    /// How long a check waits for Redis before the local limiter decides instead.
    pub redis_timeout_ms: u64,
    /// How often keys whose buckets are full again are dropped from the local limiters.
    pub evict_interval_secs: u64,
    /// The Redis of `A2A_REDIS_URL` and `A2A_REDIS_PREFIX`, filled in when the configuration is
    /// loaded (`backend = "redis"` only).
    #[serde(skip)]
    pub redis: Option<RedisTarget>,
}

impl Default for RateConfig {
    fn default() -> Self {
        Self {
            backend: Backend::Local,
            ip: None,
            principal: None,
            agent: None,
            overrides: Vec::new(),
            costs: BTreeMap::new(),
            client_ip_header: None,
            trusted_proxies: Vec::new(),
            ipv6_prefix: 64,
            redis_timeout_ms: 50,
            evict_interval_secs: 60,
            redis: None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    Local,
    Redis,
}

/// The smallest `rate` accepted: below it the period of one unit (1/rate seconds) is not a
/// useful limit, and far below it (about 5e-20) it does not fit a `Duration` at all.
pub const MIN_RATE: f64 = 1e-6;
/// The longest window (`burst / rate`, the time an empty bucket takes to fill) accepted, in
/// seconds (about 31 years): the limiter counts it in u64 nanoseconds.
pub const MAX_WINDOW_SECS: u64 = 1_000_000_000;

/// A rate and a burst: `rate` cost units per second on average, at most `burst` at once.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rate {
    pub rate: f64,
    pub burst: u32,
}

/// `[[limits.rate.overrides]]`: one principal's (or one API key's) own rate and burst.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Override {
    /// The principal as the gateway names it (`<issuer>|<subject>`, `apikey:<scheme>:...`).
    #[serde(default)]
    pub principal: Option<String>,
    /// The id of an API key (`[auth.schemes.*] keys` or the `api_keys` table).
    #[serde(default)]
    pub key: Option<String>,
    pub rate: f64,
    pub burst: u32,
}

impl Override {
    pub fn limit(&self) -> Rate {
        Rate {
            rate: self.rate,
            burst: self.burst,
        }
    }
}

/// Where the shared limiter lives (one Redis or a cluster; prints without passwords).
#[derive(Clone, Debug)]
pub struct RedisTarget {
    pub target: a2a_bus::RedisTarget,
    pub prefix: String,
}

/// What a call costs when `costs` does not say: a send (which starts a turn, and a stream) 5,
/// a subscription (which holds a stream) 2, anything else 1.
pub fn default_cost(method: Method) -> u32 {
    match method {
        Method::SendMessage | Method::SendStreamingMessage => 5,
        Method::SubscribeToTask => 2,
        _ => 1,
    }
}

impl RateConfig {
    /// `client_ip_header` is only believed from `trusted_proxies`, so one without the other
    /// is refused (checked once the environment is applied).
    pub fn check_proxies(&self) -> Result<(), String> {
        if self.client_ip_header.is_some() && self.trusted_proxies.is_empty() {
            return Err(
                "limits.rate.client_ip_header needs limits.rate.trusted_proxies (or \
                 A2A_TRUSTED_PROXIES): the addresses of the proxies that set it, since a client \
                 could otherwise pick its own key"
                    .into(),
            );
        }
        Ok(())
    }

    /// How clients are told apart by address (`client_ip_header`, `trusted_proxies`,
    /// `ipv6_prefix`), for the rate limiter and the connection caps. The configuration was
    /// validated when it loaded: an entry that does not parse is left out.
    pub fn addressing(&self) -> super::ClientAddressing {
        let trusted = self
            .trusted_proxies
            .iter()
            .filter_map(|e| super::clients::parse_networks(std::slice::from_ref(e)).ok())
            .flatten()
            .collect();
        let header = self
            .client_ip_header
            .as_deref()
            .and_then(|h| axum::http::HeaderName::from_bytes(h.as_bytes()).ok());
        super::ClientAddressing::new(self.ipv6_prefix, trusted, header)
    }

    /// Whether any limit is set (otherwise the pipeline checks nothing).
    pub fn enabled(&self) -> bool {
        self.ip.is_some()
            || self.principal.is_some()
            || self.agent.is_some()
            || !self.overrides.is_empty()
    }

    /// The cost of a call of `method`.
    pub fn cost(&self, method: Method) -> u32 {
        self.costs
            .get(method.as_str())
            .copied()
            .unwrap_or_else(|| default_cost(method))
    }

    /// Rejects what could never work: a burst below the dearest call (that call would always
    /// be refused), a rate that is not positive, an unknown method, an override naming nobody.
    pub fn validate(&self) -> Result<(), String> {
        for method in self.costs.keys() {
            if Method::from_name(method).is_none() {
                return Err(format!(
                    "limits.rate.costs: {method:?} is not an A2A method ({})",
                    Method::ALL.map(Method::as_str).join(", ")
                ));
            }
        }
        if self.costs.values().any(|c| *c == 0) {
            return Err("limits.rate.costs: a cost must be at least 1".into());
        }
        let dearest = Method::ALL
            .map(|m| self.cost(m))
            .into_iter()
            .max()
            .unwrap_or(1);
        let named = [
            ("ip", self.ip),
            ("principal", self.principal),
            ("agent", self.agent),
        ];
        let overrides = self
            .overrides
            .iter()
            .map(|o| ("overrides", Some(o.limit())));
        for (name, rate) in named.into_iter().chain(overrides) {
            let Some(Rate { rate, burst }) = rate else {
                continue;
            };
            if !(rate.is_finite() && rate >= MIN_RATE) {
                return Err(format!(
                    "limits.rate.{name}: rate must be at least {MIN_RATE} (one unit every \
                     11.6 days) and finite, not {rate}"
                ));
            }
            if f64::from(burst) / rate > MAX_WINDOW_SECS as f64 {
                return Err(format!(
                    "limits.rate.{name}: burst / rate (the time an empty bucket takes to fill) \
                     must be at most {MAX_WINDOW_SECS} s"
                ));
            }
            if burst < dearest {
                return Err(format!(
                    "limits.rate.{name}: burst {burst} is below the cost of the dearest call \
                     ({dearest}), which would always be refused"
                ));
            }
        }
        for o in &self.overrides {
            if o.principal.is_some() == o.key.is_some() {
                return Err("limits.rate.overrides: each names either a principal or a key".into());
            }
        }
        if self
            .client_ip_header
            .as_deref()
            .is_some_and(|h| axum::http::HeaderName::from_bytes(h.as_bytes()).is_err())
        {
            return Err("limits.rate.client_ip_header is not a header name".into());
        }
        super::clients::parse_networks(&self.trusted_proxies)
            .map_err(|e| format!("limits.rate.trusted_proxies: {e}"))?;
        if self.ipv6_prefix > 128 {
            return Err("limits.rate.ipv6_prefix must be at most 128".into());
        }
        if self.redis_timeout_ms == 0 || self.evict_interval_secs == 0 {
            return Err(
                "limits.rate.redis_timeout_ms and evict_interval_secs must be at least 1".into(),
            );
        }
        Ok(())
    }
}
