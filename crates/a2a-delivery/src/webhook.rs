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

/// The most of a webhook's response body that is read (review M1): nothing in it is used, and
/// reading a small body lets the connection go back to the pool; a larger one is dropped
/// unread (the connection with it).
pub const MAX_RESPONSE_BODY: usize = 4096;

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

async fn classify(mut response: reqwest::Response) -> Attempt {
    let status = response.status().as_u16();
    let retry_after = response
        .headers()
        .get(RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| parse_retry_after(v, std::time::SystemTime::now()));
    // Read at most a few KiB of the body (so a small one frees the connection for reuse), then
    // drop the rest with the response: a webhook streaming a huge body costs nothing more.
    let mut read = 0;
    while read < MAX_RESPONSE_BODY {
        match response.chunk().await {
            Ok(Some(chunk)) => read += chunk.len(),
            _ => break,
        }
    }
    drop(response);
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

/// Retry-After as delay-seconds or an HTTP date (RFC 9110 §10.2.3), relative to `now`; a date in
/// the past is no delay. The retry policy caps what is honoured. `httpdate` reads the three forms
/// a recipient must accept (RFC 9110 §5.6.7): IMF-fixdate and the obsolete RFC 850 and asctime
/// forms, with no calendar arithmetic of ours.
fn parse_retry_after(value: &str, now: std::time::SystemTime) -> Option<Duration> {
    let value = value.trim();
    if value.len() > 64 {
        return None;
    }
    if let Ok(secs) = value.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let when = httpdate::parse_http_date(value).ok()?;
    Some(when.duration_since(now).unwrap_or(Duration::ZERO))
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
        let now = std::time::UNIX_EPOCH + Duration::from_secs(784_111_777);
        assert_eq!(parse_retry_after("7", now), Some(Duration::from_secs(7)));
        assert_eq!(
            parse_retry_after("Sun, 06 Nov 1994 08:50:37 GMT", now),
            Some(Duration::from_secs(60))
        );
        assert_eq!(parse_retry_after("soon", now), None);
    }

    /// The same instant in the three forms of RFC 9110 §5.6.7: IMF-fixdate, then the obsolete
    /// RFC 850 and asctime forms, which a recipient must accept as well.
    #[test]
    fn retry_after_accepts_the_three_http_date_forms() {
        let now = std::time::UNIX_EPOCH + Duration::from_secs(784_111_700);
        for v in [
            "Sun, 06 Nov 1994 08:49:37 GMT",
            "Sunday, 06-Nov-94 08:49:37 GMT",
            "Sun Nov  6 08:49:37 1994",
        ] {
            assert_eq!(
                parse_retry_after(v, now),
                Some(Duration::from_secs(77)),
                "{v}"
            );
        }
        // A date already past is no delay, whatever its form.
        let later = now + Duration::from_secs(3600);
        assert_eq!(
            parse_retry_after("Sunday, 06-Nov-94 08:49:37 GMT", later),
            Some(Duration::ZERO)
        );
        assert_eq!(
            parse_retry_after("Sun Nov  6 08:49:37 1994", later),
            Some(Duration::ZERO)
        );
    }

    /// Dates the old hand-written arithmetic overflowed on (review L5): no panic, no wrap.
    #[test]
    fn retry_after_dates_out_of_range_do_not_panic() {
        let now = std::time::SystemTime::now();
        for v in [
            "Sun, 01 Jan 0 00:00:00 GMT",
            "Sun, 01 Jan 0000 00:00:00 GMT",
            "Fri, 31 Dec 9999 23:59:59 GMT",
            "Mon, 99 Feb 2024 99:99:99 GMT",
            "18446744073709551616",
        ] {
            let d = parse_retry_after(v, now);
            assert!(
                d.is_none_or(|d| d < Duration::from_secs(300_000_000_000)),
                "{v}: {d:?}"
            );
        }
    }
}
