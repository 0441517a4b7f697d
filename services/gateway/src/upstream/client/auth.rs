//! How the gateway authenticates to an upstream: the configured credentials placed where the
//! upstream's card says (an API key's header or cookie, an OAuth2 client-credentials token
//! cached until shortly before it expires), and the check that they never travel in the clear.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use a2a_types::A2aError;
use a2a_types::v1::{AgentCard, security_scheme::Scheme};

use crate::upstream::config::Credentials;

/// A token is refreshed this long before it expires.
const TOKEN_SLACK: Duration = Duration::from_secs(30);

/// How the gateway authenticates to the upstream, resolved against its card.
#[derive(Clone)]
pub(super) enum Auth {
    None,
    Header { name: String, value: String },
    OAuth2(std::sync::Arc<TokenSource>),
}

/// OAuth2 client credentials with a cached token.
pub(super) struct TokenSource {
    pub(super) token_url: String,
    client_id: String,
    client_secret: String,
    scopes: Vec<String>,
    cached: Mutex<Option<(String, Instant)>>,
}

/// The upstream card's schemes decide where the configured secret goes.
pub(super) fn resolve_auth(
    name: &str,
    card: &AgentCard,
    credentials: Option<&Credentials>,
) -> Result<Auth, String> {
    let Some(c) = credentials else {
        return Ok(Auth::None);
    };
    let schemes = || {
        card.security_schemes
            .values()
            .filter_map(|s| s.scheme.as_ref())
    };
    if let Some(key) = &c.api_key {
        let scheme = schemes().find_map(|s| match s {
            Scheme::ApiKeySecurityScheme(k) => Some(k),
            _ => None,
        });
        return Ok(match scheme {
            Some(k) if k.location.eq_ignore_ascii_case("cookie") => Auth::Header {
                name: "cookie".into(),
                value: format!("{}={key}", k.name),
            },
            Some(k) if k.location.eq_ignore_ascii_case("header") => Auth::Header {
                name: k.name.to_ascii_lowercase(),
                value: key.clone(),
            },
            Some(k) => {
                return Err(format!(
                    "agents.{name}: the card's API key goes in the {:?}, which this gateway \
                     cannot send; only header and cookie keys are supported",
                    k.location
                ));
            }
            // A card without an apiKey scheme: the conventional header.
            None => Auth::Header {
                name: "x-api-key".into(),
                value: key.clone(),
            },
        });
    }
    let (Some(client_id), Some(client_secret)) = (&c.client_id, &c.client_secret) else {
        return Ok(Auth::None);
    };
    let from_card = schemes().find_map(|s| match s {
        Scheme::Oauth2SecurityScheme(o) => o.flows.as_ref()?.flow.as_ref().and_then(|f| match f {
            a2a_types::v1::o_auth_flows::Flow::ClientCredentials(cc) => Some(cc.token_url.clone()),
            _ => None,
        }),
        _ => None,
    });
    let token_url = c.token_url.clone().or(from_card).ok_or_else(|| {
        format!(
            "agents.{name}: client credentials need a token URL: the card declares no OAuth2 \
             clientCredentials flow and credentials.token_url is not set"
        )
    })?;
    Ok(Auth::OAuth2(std::sync::Arc::new(TokenSource {
        token_url,
        client_id: client_id.clone(),
        client_secret: client_secret.clone(),
        scopes: c.scopes.clone(),
        cached: Mutex::new(None),
    })))
}

/// The longest a token is cached, whatever its `expires_in` says.
const MAX_TOKEN_LIFETIME: Duration = Duration::from_secs(24 * 3600);

/// Until when a token answered at `now` with `expires_in` (seconds; 300 when absent) is used:
/// [`TOKEN_SLACK`] before it expires, at most [`MAX_TOKEN_LIFETIME`] away. Never panics, however
/// large the endpoint's number (`Instant + Duration` would overflow).
fn token_deadline(now: Instant, expires_in: Option<u64>) -> Instant {
    let lifetime = Duration::from_secs(expires_in.unwrap_or(300)).min(MAX_TOKEN_LIFETIME);
    now.checked_add(lifetime.saturating_sub(TOKEN_SLACK))
        .unwrap_or(now)
}

/// Whether a URL is `https://` (any case).
fn is_https(url: &str) -> bool {
    url.get(..8)
        .is_some_and(|p| p.eq_ignore_ascii_case("https://"))
}

/// Where credentials would travel in the clear: the interface they are sent to, the token URL
/// the client secret is posted to, or the card URL the card (which names both) came from.
/// `Err` names every such place.
pub(super) fn insecure_credentials(
    interface: &str,
    token_url: Option<&str>,
    card_url: Option<&str>,
) -> Result<(), String> {
    let mut plain = Vec::new();
    if !is_https(interface) {
        plain.push(format!("interface {interface}"));
    }
    if let Some(url) = token_url.filter(|u| !is_https(u)) {
        plain.push(format!("token URL {url}"));
    }
    if let Some(url) = card_url.filter(|u| !is_https(u)) {
        plain.push(format!("card URL {url}, which says where credentials go"));
    }
    if plain.is_empty() {
        Ok(())
    } else {
        Err(plain.join("; "))
    }
}

impl TokenSource {
    /// The cached token, or a new one from the token endpoint.
    pub(super) async fn token(
        &self,
        http: &reqwest::Client,
        agent: &str,
    ) -> Result<String, A2aError> {
        if let Some((token, until)) = self
            .cached
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            && Instant::now() < *until
        {
            return Ok(token.clone());
        }
        let body = {
            let mut form = url::form_urlencoded::Serializer::new(String::new());
            form.append_pair("grant_type", "client_credentials");
            form.append_pair("client_id", &self.client_id);
            form.append_pair("client_secret", &self.client_secret);
            if !self.scopes.is_empty() {
                form.append_pair("scope", &self.scopes.join(" "));
            }
            form.finish()
        };
        let unavailable = |why: String| {
            tracing::warn!(agent, error = %why, "cannot get an upstream token");
            A2aError::Unavailable(format!(
                "upstream agent {agent}: no token from its token endpoint; retry later"
            ))
        };
        let resp = http
            .post(&self.token_url)
            .header("content-type", "application/x-www-form-urlencoded")
            .header("accept", "application/json")
            .body(body)
            .send()
            .await
            .map_err(|e| unavailable(e.to_string()))?;
        if !resp.status().is_success() {
            return Err(unavailable(format!("HTTP {}", resp.status())));
        }
        let body: serde_json::Value = resp.json().await.map_err(|e| unavailable(e.to_string()))?;
        let token = body["access_token"]
            .as_str()
            .ok_or_else(|| unavailable("no access_token in the answer".into()))?
            .to_owned();
        let until = token_deadline(Instant::now(), body["expires_in"].as_u64());
        *self.cached.lock().unwrap_or_else(|p| p.into_inner()) = Some((token.clone(), until));
        Ok(token)
    }

    /// Drops the cached token (the upstream refused it).
    pub(super) fn forget(&self) {
        *self.cached.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// L5: a huge `expires_in` once overflowed `Instant + Duration` (a panic in the agent's
    /// card and health loop); it is clamped now.
    #[test]
    fn any_expires_in_gives_a_deadline() {
        let now = Instant::now();
        for expires_in in [None, Some(0), Some(10), Some(3600), Some(u64::MAX)] {
            let until = token_deadline(now, expires_in);
            assert!(until >= now, "{expires_in:?}");
            assert!(until <= now + MAX_TOKEN_LIFETIME, "{expires_in:?}");
        }
        assert_eq!(
            token_deadline(now, Some(3600)),
            now + Duration::from_secs(3600) - TOKEN_SLACK
        );
        assert_eq!(
            token_deadline(now, Some(u64::MAX)),
            now + MAX_TOKEN_LIFETIME - TOKEN_SLACK
        );
        assert_eq!(
            token_deadline(now, Some(10)),
            now,
            "shorter than the slack: refetch"
        );
    }

    #[test]
    fn credentials_travel_over_https_only() {
        assert!(insecure_credentials("https://a.example/a2a", None, None).is_ok());
        assert!(
            insecure_credentials(
                "HTTPS://a.example/a2a",
                Some("https://idp.example/token"),
                Some("https://a.example")
            )
            .is_ok()
        );
        let err = insecure_credentials(
            "http://a.example/a2a",
            Some("http://idp.example/token"),
            Some("http://a.example"),
        )
        .unwrap_err();
        for what in ["interface", "token URL", "card URL"] {
            assert!(err.contains(what), "{what}: {err}");
        }
        // A bare gRPC endpoint is h2c: plaintext.
        assert!(insecure_credentials("a.example:50051", None, None).is_err());
        assert!(insecure_credentials("https://a.example", Some("http://idp/t"), None).is_err());
    }
}
