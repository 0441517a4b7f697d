//! Bearer JWT verification against the issuer's JWKS, found by OIDC discovery (or the OAuth2
//! metadata document, same `jwks_uri` field): two GETs, cached for a TTL, refetched early when a
//! token names a key we do not know (the issuer rotated), at most once per `min_refresh`.

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

pub struct JwtVerifier {
    issuer: String,
    metadata_url: String,
    audiences: Vec<String>,
    algorithms: Vec<Algorithm>,
    leeway: u64,
    ttl: Duration,
    min_refresh: Duration,
    http: reqwest::Client,
    cache: RwLock<Option<(Arc<JwkSet>, Instant)>>,
    /// Held while fetching (one fetch at a time); holds the time of the last attempt.
    refresh: tokio::sync::Mutex<Option<Instant>>,
    verified: TokenCache,
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
            issuer,
            metadata_url,
            audiences: c.audiences.clone(),
            algorithms,
            leeway: c.leeway_secs,
            ttl: Duration::from_secs(c.jwks_ttl_secs),
            min_refresh: Duration::from_secs(c.jwks_min_refresh_secs),
            http,
            cache: RwLock::new(None),
            refresh: tokio::sync::Mutex::new(None),
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
        let jwk = self.key(&kid).await?;
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

    fn cached(&self, kid: &str) -> Option<Jwk> {
        let guard = self.cache.read().expect("jwks cache lock");
        let (set, at) = guard.as_ref()?;
        if at.elapsed() >= self.ttl {
            return None;
        }
        set.find(kid).cloned()
    }

    async fn key(&self, kid: &str) -> Result<Jwk, String> {
        if let Some(k) = self.cached(kid) {
            return Ok(k);
        }
        let mut last = self.refresh.lock().await;
        // Another request may have refreshed while we waited.
        if let Some(k) = self.cached(kid) {
            return Ok(k);
        }
        let fresh = self
            .cache
            .read()
            .expect("jwks cache lock")
            .as_ref()
            .is_some_and(|(_, at)| at.elapsed() < self.ttl);
        // A fresh set without this kid: refetch only if the last attempt is old enough, so a
        // stream of tokens with made-up kids cannot hammer the issuer.
        if fresh && last.is_some_and(|t| t.elapsed() < self.min_refresh) {
            return Err("token signed by an unknown key".into());
        }
        *last = Some(Instant::now());
        let set = match self.fetch().await {
            Ok(set) => set,
            Err(e) => {
                tracing::warn!(issuer = %self.issuer, error = %e, "cannot fetch the issuer's JWKS");
                // An issuer outage should not lock everyone out: keep trusting the keys we had.
                // Without any, the refusal says why (no secret in it: URLs and field names).
                let stale = self.cache.read().expect("jwks cache lock");
                return stale
                    .as_ref()
                    .and_then(|(set, _)| set.find(kid).cloned())
                    .ok_or_else(|| format!("cannot verify token: issuer keys unavailable ({e})"));
            }
        };
        let found = set.find(kid).cloned();
        *self.cache.write().expect("jwks cache lock") = Some((Arc::new(set), Instant::now()));
        found.ok_or_else(|| "token signed by an unknown key".into())
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
        resp.json().await.map_err(|e| format!("GET {url}: {e}"))
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
