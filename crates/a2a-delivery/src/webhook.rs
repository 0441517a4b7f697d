//! One HTTP delivery attempt: the request (body, Authorization, token, signature), the SSRF
//! guard at connect time, and the classification of what came back.
//!
//! The guard: host names are resolved by [`GuardedResolver`], which drops every address the
//! [`AddressPolicy`] refuses, so the connection can only go to an allowed address (a name that
//! re-resolves to an internal address later, DNS rebinding, is refused then). IP literals never
//! reach a resolver, so they are checked before the request. Redirects are not followed and no
//! proxy is used (a proxy would resolve the name out of our sight).

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use a2a_push::{AddressPolicy, Blocked, DeliveryClaims, SigningKeys};
use a2a_types::v1::TaskPushNotificationConfig;
use bytes::Bytes;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, HeaderValue, RETRY_AFTER};

/// The media type of a delivery (A2A 1.0, HTTP+JSON).
pub const CONTENT_TYPE_A2A: &str = "application/a2a+json";

/// What one attempt came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Attempt {
    /// A 2xx answer.
    Delivered { status: u16 },
    /// Worth another attempt: a connection error, a timeout, 408, 429 or 5xx.
    Retry {
        status: Option<u16>,
        error: String,
        retry_after: Option<Duration>,
    },
    /// Not worth another attempt: any other 3xx or 4xx, a refused address, a URL that cannot
    /// be called.
    Refused { status: Option<u16>, error: String },
}

/// Sends deliveries. Cheap to clone (one connection pool).
#[derive(Clone)]
pub struct Webhooks {
    client: reqwest::Client,
    policy: Arc<AddressPolicy>,
    keys: SigningKeys,
    issuer: Arc<str>,
    token_ttl: Duration,
    timeout: Duration,
}

impl Webhooks {
    pub fn new(
        policy: AddressPolicy,
        keys: SigningKeys,
        issuer: &str,
        token_ttl: Duration,
        timeout: Duration,
    ) -> Result<Self, String> {
        let policy = Arc::new(policy);
        let client = reqwest::Client::builder()
            .dns_resolver(Arc::new(GuardedResolver {
                policy: policy.clone(),
            }))
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .connect_timeout(timeout)
            .pool_max_idle_per_host(1024)
            .pool_idle_timeout(Duration::from_secs(60))
            .tcp_nodelay(true)
            .user_agent(concat!("a2a-worker/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| format!("HTTP client: {e}"))?;
        Ok(Self {
            client,
            policy,
            keys,
            issuer: issuer.into(),
            token_ttl,
            timeout,
        })
    }

    /// POSTs `body` (a StreamResponse of `task_id`) to the config's webhook, once.
    pub async fn attempt(
        &self,
        task_id: &str,
        body: &Bytes,
        config: &TaskPushNotificationConfig,
        traceparent: Option<&str>,
    ) -> Attempt {
        let url = match url::Url::parse(&config.url) {
            Ok(url) if matches!(url.scheme(), "http" | "https") => url,
            _ => return refused("the webhook URL is not an http(s) URL"),
        };
        if let Err(blocked) = self.check_literal(&url) {
            return refused(&blocked.to_string());
        }
        let claims = DeliveryClaims::new(
            &self.issuer,
            &config.url,
            task_id,
            body,
            self.token_ttl.as_secs(),
        );
        let signature = match self.keys.sign(&claims) {
            Ok(jwt) => jwt,
            Err(e) => return refused(&e.to_string()),
        };
        let mut request = self
            .client
            .post(url)
            .timeout(self.timeout)
            .header(CONTENT_TYPE, HeaderValue::from_static(CONTENT_TYPE_A2A))
            .header(a2a_push::SIGNATURE_HEADER, signature)
            .body(body.clone());
        if let Some(v) = traceparent.and_then(|t| HeaderValue::from_str(t).ok()) {
            request = request.header("traceparent", v);
        }
        if let Some(auth) = &config.authentication {
            let value = format!("{} {}", auth.scheme, auth.credentials);
            match HeaderValue::from_str(value.trim()) {
                Ok(mut v) => {
                    v.set_sensitive(true);
                    request = request.header(AUTHORIZATION, v);
                }
                Err(_) => return refused("the config's credentials are not a valid header value"),
            }
        }
        if !config.token.is_empty() {
            match HeaderValue::from_str(&config.token) {
                Ok(mut v) => {
                    v.set_sensitive(true);
                    request = request.header(a2a_push::TOKEN_HEADER, v);
                }
                Err(_) => return refused("the config's token is not a valid header value"),
            }
        }
        match request.send().await {
            Ok(response) => classify(response).await,
            Err(e) => from_error(e),
        }
    }

    fn check_literal(&self, url: &url::Url) -> Result<(), Blocked> {
        let host = url.host_str().unwrap_or_default();
        let ip = match url.host() {
            Some(url::Host::Ipv4(ip)) => IpAddr::V4(ip),
            Some(url::Host::Ipv6(ip)) => IpAddr::V6(ip),
            _ => return Ok(()),
        };
        self.policy.check_addr(host, ip)
    }
}

fn refused(error: &str) -> Attempt {
    Attempt::Refused {
        status: None,
        error: error.to_owned(),
    }
}

async fn classify(response: reqwest::Response) -> Attempt {
    let status = response.status().as_u16();
    let retry_after = response
        .headers()
        .get(RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(parse_retry_after);
    // Read the (small) body so the connection goes back to the pool.
    let _ = response.bytes().await;
    match status {
        200..=299 => Attempt::Delivered { status },
        408 | 429 | 500..=599 => Attempt::Retry {
            status: Some(status),
            error: format!("HTTP {status}"),
            retry_after,
        },
        300..=399 => Attempt::Refused {
            status: Some(status),
            error: format!("HTTP {status}: redirects are not followed"),
        },
        _ => Attempt::Refused {
            status: Some(status),
            error: format!("HTTP {status}"),
        },
    }
}

/// Retry-After as delay-seconds or an HTTP date.
fn parse_retry_after(value: &str) -> Option<Duration> {
    let value = value.trim();
    if let Ok(secs) = value.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let when = httpdate_to_unix(value)?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .ok()?
        .as_secs();
    Some(Duration::from_secs(when.saturating_sub(now)))
}

/// Parses the IMF-fixdate form (`Sun, 06 Nov 1994 08:49:37 GMT`), the one RFC 9110 requires
/// senders to use.
fn httpdate_to_unix(s: &str) -> Option<u64> {
    let mut it = s.split_whitespace().skip(1);
    let day: u64 = it.next()?.parse().ok()?;
    let month = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ]
    .iter()
    .position(|m| Some(*m) == it.clone().next())? as u64
        + 1;
    it.next();
    let year: u64 = it.next()?.parse().ok()?;
    let mut hms = it.next()?.split(':').map(|p| p.parse::<u64>().ok());
    let (h, m, sec) = (hms.next()??, hms.next()??, hms.next()??);
    // Days from civil (Howard Hinnant's algorithm), for years after 1970.
    let (y, mo) = if month <= 2 {
        (year - 1, month + 9)
    } else {
        (year, month - 3)
    };
    let era = y / 400;
    let yoe = y - era * 400;
    let doy = (153 * mo + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = (era * 146_097 + doe).checked_sub(719_468)?;
    Some(days * 86_400 + h * 3600 + m * 60 + sec)
}

fn from_error(e: reqwest::Error) -> Attempt {
    // Without the URL: it may carry credentials in its query or user info.
    let e = e.without_url();
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(&e);
    while let Some(err) = source {
        if let Some(blocked) = err.downcast_ref::<Blocked>() {
            return refused(&blocked.to_string());
        }
        source = err.source();
    }
    let error = if e.is_timeout() {
        "timed out".to_owned()
    } else if e.is_connect() {
        format!("connection failed: {}", root_cause(&e))
    } else {
        format!("request failed: {}", root_cause(&e))
    };
    Attempt::Retry {
        status: None,
        error,
        retry_after: None,
    }
}

fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut cause = e;
    while let Some(next) = cause.source() {
        cause = next;
    }
    cause.to_string()
}

/// Resolves host names and keeps only the addresses the policy allows; none left is an error
/// that names the refused address.
struct GuardedResolver {
    policy: Arc<AddressPolicy>,
}

#[derive(Debug, thiserror::Error)]
#[error("{0} did not resolve to any address")]
struct NoAddress(String);

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let policy = self.policy.clone();
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let resolved: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let mut refused = None;
            let allowed: Vec<SocketAddr> = resolved
                .into_iter()
                .filter(|a| match policy.check_addr(&host, a.ip()) {
                    Ok(()) => true,
                    Err(b) => {
                        refused.get_or_insert(b);
                        false
                    }
                })
                .collect();
            if allowed.is_empty() {
                return Err(match refused {
                    Some(blocked) => Box::new(blocked) as Box<dyn std::error::Error + Send + Sync>,
                    None => Box::new(NoAddress(host)),
                });
            }
            Ok(Box::new(allowed.into_iter()) as Addrs)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_as_seconds_or_date() {
        assert_eq!(parse_retry_after("7"), Some(Duration::from_secs(7)));
        assert_eq!(
            httpdate_to_unix("Sun, 06 Nov 1994 08:49:37 GMT"),
            Some(784_111_777)
        );
        assert_eq!(
            parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT"),
            Some(Duration::ZERO)
        );
        assert_eq!(parse_retry_after("soon"), None);
    }
}
