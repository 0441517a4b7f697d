//! Bearer JWT verification against the issuer's JWKS, found by OIDC discovery (or the OAuth2
//! metadata document, same `jwks_uri` field): two GETs, each body at most [`MAX_DOCUMENT_BYTES`],
//! cached for a TTL, refetched early when a token names a key we do not know (the issuer
//! rotated).
//!
//! Fetches are single-flight and at least `min_refresh` apart, whatever the reason (a stale
//! set, an unknown key id, a failed attempt: the interval is the back-off). A token whose key
//! is in the set, fresh or stale, never waits for a fetch: once the set is past its TTL, the
//! first such token starts one refresh in the background and every token is checked against
//! the keys we have meanwhile (during an issuer outage the stale keys stay trusted, as before).
//! Only a token naming a key we do not have waits, for the one fetch in flight or the one it
//! starts; when the last attempt is too recent it is refused at once.

use std::collections::HashSet;
use std::str::FromStr;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::jwk::{Jwk, JwkSet};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde::Deserialize;
use serde_json::Value;

use super::config::SchemeConfig;
use super::token_cache::TokenCache;

/// What a valid token says about its bearer.
#[derive(Debug, Clone)]
pub struct Verified {
    /// `<issuer>|<subject>`.
    pub principal: String,
    pub scopes: Vec<String>,
}

/// The cap on the discovery document and on the JWKS.
pub const MAX_DOCUMENT_BYTES: usize = 256 * 1024;

pub struct JwtVerifier {
    issuer: String,
    audiences: Vec<String>,
    algorithms: Vec<Algorithm>,
    leeway: u64,
    keys: Arc<Keys>,
    verified: TokenCache,
}

/// The issuer's keys and how they are fetched: shared with the background refresh.
struct Keys {
    issuer: String,
    metadata_url: String,
    ttl: Duration,
    min_refresh: Duration,
    http: reqwest::Client,
    /// The last set fetched, and when.
    cache: RwLock<Option<(Arc<JwkSet>, Instant)>>,
    /// Held while fetching (one fetch at a time); holds the time of the last attempt.
    refresh: Arc<tokio::sync::Mutex<Option<Instant>>>,
}

#[derive(Deserialize)]
struct Claims {
    sub: String,
    exp: u64,
    #[serde(default)]
    scope: Option<String>,
    #[serde(default)]
    scp: Option<Value>,
}

impl JwtVerifier {
    pub fn new(
        name: &str,
        c: &SchemeConfig,
        default_metadata: Option<&str>,
    ) -> Result<Self, String> {
        let issuer = c
            .issuer
            .clone()
            .ok_or_else(|| format!("auth scheme {name}: `issuer` is required for tokens"))?;
        if c.audiences.is_empty() {
            return Err(format!(
                "auth scheme {name}: `audiences` is required for tokens"
            ));
        }
        let mut algorithms = Vec::new();
        for a in &c.algorithms {
            let alg = Algorithm::from_str(a)
                .map_err(|_| format!("auth scheme {name}: unknown algorithm {a}"))?;
            // A public key used as an HMAC secret would let anyone sign: refuse the family.
            if matches!(alg, Algorithm::HS256 | Algorithm::HS384 | Algorithm::HS512) {
                return Err(format!(
                    "auth scheme {name}: HMAC algorithm {a} is not allowed"
                ));
            }
            algorithms.push(alg);
        }
        let metadata_url = c
            .metadata_url
            .clone()
            .or_else(|| default_metadata.filter(|u| !u.is_empty()).map(String::from))
            .unwrap_or_else(|| {
                format!(
                    "{}/.well-known/openid-configuration",
                    issuer.trim_end_matches('/')
                )
            });
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(5))
            .build()
            .map_err(|e| format!("auth scheme {name}: HTTP client: {e}"))?;
        Ok(Self {
            keys: Arc::new(Keys {
                issuer: issuer.clone(),
                metadata_url,
                ttl: Duration::from_secs(c.jwks_ttl_secs),
                min_refresh: Duration::from_secs(c.jwks_min_refresh_secs),
                http,
                cache: RwLock::new(None),
                refresh: Arc::new(tokio::sync::Mutex::new(None)),
            }),
            issuer,
            audiences: c.audiences.clone(),
            algorithms,
            leeway: c.leeway_secs,
            verified: TokenCache::new(c.token_cache_size, Duration::from_secs(c.token_cache_secs)),
        })
    }

    /// Checks signature, algorithm, iss, aud, exp and nbf, or finds the token among those that
    /// passed recently. The error says what is wrong and never contains the token.
    pub async fn verify(&self, token: &str) -> Result<Verified, String> {
        if let Some(v) = self.verified.get(token) {
            return Ok(v);
        }
        let (verified, exp) = self.check(token).await?;
        self.verified.put(token, &verified, exp);
        Ok(verified)
    }

    /// The full check; also returns the token's `exp`.
    async fn check(&self, token: &str) -> Result<(Verified, u64), String> {
        // `alg: none` is not an `Algorithm`, so such a token fails here as malformed.
        let header = jsonwebtoken::decode_header(token)
            .map_err(|_| "malformed token or unsupported algorithm".to_owned())?;
        if !self.algorithms.contains(&header.alg) {
            return Err(format!("token algorithm {:?} is not accepted", header.alg));
        }
        let kid = header.kid.ok_or("token has no key id (kid)")?;
        let jwk = self.keys.key(&kid).await?;
        if let Some(alg) = jwk.common.key_algorithm
            && format!("{alg:?}") != format!("{:?}", header.alg)
        {
            return Err("token algorithm does not match its key".into());
        }
        let key = DecodingKey::from_jwk(&jwk).map_err(|_| "issuer key is unusable".to_owned())?;
        let mut v = Validation::new(header.alg);
        v.set_issuer(&[&self.issuer]);
        v.set_audience(&self.audiences);
        v.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        v.validate_nbf = true;
        v.leeway = self.leeway;
        let data = jsonwebtoken::decode::<Claims>(token, &key, &v).map_err(|e| {
            match e.kind() {
                ErrorKind::ExpiredSignature => "token expired",
                ErrorKind::ImmatureSignature => "token not yet valid (nbf)",
                ErrorKind::InvalidIssuer => "token issuer is not accepted",
                ErrorKind::InvalidAudience => "token audience is not accepted",
                ErrorKind::InvalidSignature => "token signature is invalid",
                ErrorKind::InvalidAlgorithm => "token algorithm does not match its key",
                ErrorKind::MissingRequiredClaim(_) => "token lacks a required claim",
                _ => "invalid token",
            }
            .to_owned()
        })?;
        let c = data.claims;
        let mut scopes: Vec<String> = c
            .scope
            .iter()
            .flat_map(|s| s.split_whitespace().map(String::from))
            .collect();
        match c.scp {
            Some(Value::Array(items)) => scopes.extend(
                items
                    .into_iter()
                    .filter_map(|v| v.as_str().map(String::from)),
            ),
            Some(Value::String(s)) => scopes.extend(s.split_whitespace().map(String::from)),
            _ => {}
        }
        let verified = Verified {
            principal: format!("{}|{}", self.issuer, c.sub),
            scopes,
        };
        Ok((verified, c.exp))
    }
}

impl Keys {
    /// The cached set and whether it is still within its TTL.
    fn current(&self) -> Option<(Arc<JwkSet>, bool)> {
        let guard = self.cache.read().unwrap_or_else(|e| e.into_inner());
        let (set, at) = guard.as_ref()?;
        Some((set.clone(), at.elapsed() < self.ttl))
    }

    /// Whether the last attempt (`last`) is long enough ago for another fetch.
    fn may_fetch(&self, last: Option<Instant>) -> bool {
        last.is_none_or(|t| t.elapsed() >= self.min_refresh)
    }

    async fn key(self: &Arc<Self>, kid: &str) -> Result<Jwk, String> {
        let current = self.current();
        if let Some((set, fresh)) = &current
            && let Some(k) = set.find(kid)
        {
            if !fresh {
                self.refresh_in_background();
            }
            return Ok(k.clone());
        }
        // A key we do not have: only a fetch can find it. Wait for the one in flight, if any
        // (bounded by the client's timeout), then fetch unless the last attempt is too recent.
        let mut last = self.refresh.lock().await;
        if let Some((set, _)) = self.current()
            && let Some(k) = set.find(kid)
        {
            return Ok(k.clone());
        }
        if !self.may_fetch(*last) {
            return Err(match current {
                Some((_, true)) => "token signed by an unknown key".into(),
                _ => "cannot verify token: issuer keys unavailable (retrying later)".into(),
            });
        }
        let fetched = self.refetch().await;
        // The interval runs from the attempt's end: the requests that waited for a slow
        // attempt are answered at once, not by one more attempt each.
        *last = Some(Instant::now());
        match fetched {
            Ok(set) => set
                .find(kid)
                .cloned()
                .ok_or_else(|| "token signed by an unknown key".into()),
            Err(e) => Err(format!(
                "cannot verify token: issuer keys unavailable ({e})"
            )),
        }
    }

    /// Starts one background refresh of a stale set, unless one runs or the last attempt is
    /// too recent.
    fn refresh_in_background(self: &Arc<Self>) {
        let Ok(mut last) = self.refresh.clone().try_lock_owned() else {
            return; // a fetch is in flight
        };
        if !self.may_fetch(*last) {
            return;
        }
        let keys = self.clone();
        tokio::spawn(async move {
            let _ = keys.refetch().await;
            *last = Some(Instant::now());
            drop(last);
        });
    }

    /// Fetches the set and caches it; a failure keeps the set we had (logged).
    async fn refetch(&self) -> Result<Arc<JwkSet>, String> {
        match self.fetch().await {
            Ok(set) => {
                let set = Arc::new(set);
                *self.cache.write().unwrap_or_else(|e| e.into_inner()) =
                    Some((set.clone(), Instant::now()));
                Ok(set)
            }
            Err(e) => {
                // An issuer outage should not lock everyone out: the keys we had stay trusted.
                tracing::warn!(issuer = %self.issuer, error = %e, "cannot fetch the issuer's JWKS");
                Err(e)
            }
        }
    }

    async fn fetch(&self) -> Result<JwkSet, String> {
        let meta: Value = self.get(&self.metadata_url).await?;
        let jwks_uri = trusted_jwks_uri(&self.issuer, &self.metadata_url, &meta)?;
        let set: Value = self.get(&jwks_uri).await?;
        // Keep the keys we can parse; one exotic key must not hide the others.
        let keys = set
            .get("keys")
            .and_then(Value::as_array)
            .ok_or("JWKS has no keys")?
            .iter()
            .filter_map(|k| serde_json::from_value::<Jwk>(k.clone()).ok())
            .collect();
        Ok(JwkSet { keys })
    }

    async fn get(&self, url: &str) -> Result<Value, String> {
        let resp = self
            .http
            .get(url)
            .send()
            .await
            .map_err(|e| format!("GET {url}: {e}"))?;
        if !resp.status().is_success() {
            return Err(format!("GET {url}: {}", resp.status()));
        }
        let body = crate::fetch::read_capped(resp, MAX_DOCUMENT_BYTES)
            .await
            .map_err(|e| format!("GET {url}: {e}"))?;
        serde_json::from_slice(&body).map_err(|e| format!("GET {url}: not JSON: {e}"))
    }
}

/// The `jwks_uri` of a discovery (or OAuth2 metadata) document, if the document may be trusted
/// for `issuer`: its `issuer` must be exactly the configured one (OpenID Connect Discovery §4.3,
/// RFC 8414 §3.3), and `jwks_uri` must be https, or use the configured issuer's own scheme (an
/// http issuer in tests). Otherwise keys from elsewhere could sign tokens for this issuer.
fn trusted_jwks_uri(issuer: &str, metadata_url: &str, meta: &Value) -> Result<String, String> {
    match meta.get("issuer").and_then(Value::as_str) {
        Some(i) if i == issuer => {}
        Some(i) => {
            return Err(format!(
                "discovery document {metadata_url} names issuer {i:?}, not the configured \
                 {issuer:?}"
            ));
        }
        None => return Err(format!("discovery document {metadata_url} has no issuer")),
    }
    let jwks_uri = meta
        .get("jwks_uri")
        .and_then(Value::as_str)
        .ok_or_else(|| format!("discovery document {metadata_url} has no jwks_uri"))?;
    let scheme = |u: &str| url::Url::parse(u).ok().map(|u| u.scheme().to_owned());
    let allowed = match scheme(jwks_uri).as_deref() {
        Some("https") => true,
        Some(s) => scheme(issuer).as_deref() == Some(s),
        None => false,
    };
    if !allowed {
        return Err(format!(
            "discovery document {metadata_url}: jwks_uri {jwks_uri:?} is not https (nor the \
             configured issuer's scheme)"
        ));
    }
    Ok(jwks_uri.to_owned())
}

/// The scopes of `need` that `have` lacks.
pub fn missing_scopes<'a>(need: &'a [String], have: &[String]) -> Vec<&'a str> {
    let have: HashSet<&str> = have.iter().map(String::as_str).collect();
    need.iter()
        .map(String::as_str)
        .filter(|s| !have.contains(s))
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::trusted_jwks_uri;

    /// L7: an issuer whose discovery document never ends is cut at the cap, and the token is
    /// refused saying the keys are unavailable (not buffered until memory runs out).
    #[tokio::test]
    async fn an_endless_discovery_document_is_refused_at_the_cap() {
        use base64::Engine;
        let issuer = crate::fetch::endless::json_server().await;
        let c: super::SchemeConfig = toml::from_str(&format!(
            "scheme = {{ httpAuthSecurityScheme = {{ scheme = \"Bearer\" }} }}\n\
             issuer = \"{issuer}\"\naudiences = [\"a\"]"
        ))
        .unwrap();
        let verifier = super::JwtVerifier::new("oidc", &c, None).unwrap();
        let b64 = |v: serde_json::Value| {
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string())
        };
        let token = format!(
            "{}.{}.c2ln",
            b64(json!({"alg": "RS256", "kid": "k1", "typ": "JWT"})),
            b64(json!({"sub": "s", "exp": 4_000_000_000u64}))
        );
        let started = std::time::Instant::now();
        let err = verifier.verify(&token).await.unwrap_err();
        assert!(err.contains("larger than 262144 bytes"), "{err}");
        assert!(started.elapsed() < std::time::Duration::from_secs(10));
    }

    const META: &str = "https://id.example.com/.well-known/openid-configuration";

    #[test]
    fn discovery_documents_must_name_the_issuer_and_an_https_jwks_uri() {
        let ok = json!({"issuer": "https://id.example.com", "jwks_uri": "https://keys.example.com/jwks"});
        assert_eq!(
            trusted_jwks_uri("https://id.example.com", META, &ok).unwrap(),
            "https://keys.example.com/jwks"
        );
        let other = json!({"issuer": "https://evil.example.com", "jwks_uri": "https://evil.example.com/jwks"});
        let err = trusted_jwks_uri("https://id.example.com", META, &other).unwrap_err();
        assert!(
            err.contains("names issuer \"https://evil.example.com\""),
            "{err}"
        );
        let slash =
            json!({"issuer": "https://id.example.com/", "jwks_uri": "https://id.example.com/jwks"});
        assert!(
            trusted_jwks_uri("https://id.example.com", META, &slash).is_err(),
            "exact match"
        );
        let missing = json!({"jwks_uri": "https://id.example.com/jwks"});
        assert!(
            trusted_jwks_uri("https://id.example.com", META, &missing)
                .unwrap_err()
                .contains("has no issuer")
        );
        let http =
            json!({"issuer": "https://id.example.com", "jwks_uri": "http://id.example.com/jwks"});
        let err = trusted_jwks_uri("https://id.example.com", META, &http).unwrap_err();
        assert!(err.contains("is not https"), "{err}");
        let relative = json!({"issuer": "https://id.example.com", "jwks_uri": "/jwks"});
        assert!(trusted_jwks_uri("https://id.example.com", META, &relative).is_err());
        // An http issuer (a test issuer on loopback) may serve its keys over http.
        let local = json!({"issuer": "http://127.0.0.1:9", "jwks_uri": "http://127.0.0.1:9/jwks"});
        assert!(trusted_jwks_uri("http://127.0.0.1:9", META, &local).is_ok());
        let no_keys = json!({"issuer": "https://id.example.com"});
        assert!(
            trusted_jwks_uri("https://id.example.com", META, &no_keys)
                .unwrap_err()
                .contains("no jwks_uri")
        );
    }
}
