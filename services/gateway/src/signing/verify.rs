//! Verifying an upstream agent's card (`[[agents]] verify_signature = true`) against the keys
//! the configuration trusts for it: a JWKS URL (`trusted_jwks_url`, fetched for each new card,
//! so a rotated key is picked up) and/or public-key PEM files (`trusted_keys`). The card's own
//! `jku` is never followed: whoever could change the card could name their own keys there.
//!
//! A card is accepted when at least one of its signatures verifies with a trusted key (several
//! signatures are how a signer rotates keys). Only asymmetric algorithms are accepted.

use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{Algorithm, DecodingKey};
use serde_json::Value;

/// The largest JWKS document read.
const MAX_JWKS_BYTES: usize = 256 * 1024;
/// At most this many signatures of one card are tried.
const MAX_SIGNATURES: usize = 8;

/// The keys one upstream's card must be signed with.
#[derive(Clone)]
pub struct TrustedKeys {
    jwks_url: Option<url::Url>,
    /// PEM keys, with the file they came from (for logs).
    pems: Vec<(String, DecodingKey)>,
}

impl std::fmt::Debug for TrustedKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let files: Vec<&str> = self.pems.iter().map(|(p, _)| p.as_str()).collect();
        f.debug_struct("TrustedKeys")
            .field("jwks_url", &self.jwks_url.as_ref().map(url::Url::as_str))
            .field("pems", &files)
            .finish()
    }
}

/// Why a card was refused; [`Rejected::reason`] is the metric label.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Rejected {
    #[error("the card carries no signature")]
    Unsigned,
    #[error("the card's signatures are malformed: {0}")]
    Malformed(String),
    #[error("no trusted key has id {0:?}")]
    UnknownKey(String),
    #[error("no signature of the card verifies with a trusted key")]
    BadSignature,
    #[error("the trusted keys cannot be read: {0}")]
    KeysUnavailable(String),
}

impl Rejected {
    /// `a2a_upstream_card_rejected_total{reason}`: a closed set.
    pub fn reason(&self) -> &'static str {
        match self {
            Rejected::Unsigned => "unsigned",
            Rejected::Malformed(_) => "malformed",
            Rejected::UnknownKey(_) => "unknown_key",
            Rejected::BadSignature => "bad_signature",
            Rejected::KeysUnavailable(_) => "keys_unavailable",
        }
    }
}

impl TrustedKeys {
    /// The trust of one agent: reads the PEM files now (an error names the file).
    pub fn load(jwks_url: Option<&str>, pems: &[PathBuf]) -> Result<Self, String> {
        let jwks_url = jwks_url
            .map(|u| url::Url::parse(u).map_err(|e| format!("trusted_jwks_url {u:?}: {e}")))
            .transpose()?;
        let pems = pems
            .iter()
            .map(|path| {
                let shown = path.display().to_string();
                let pem = std::fs::read(path).map_err(|e| format!("trusted_keys {shown}: {e}"))?;
                let key = DecodingKey::from_ec_pem(&pem)
                    .or_else(|_| DecodingKey::from_rsa_pem(&pem))
                    .or_else(|_| DecodingKey::from_ed_pem(&pem))
                    .map_err(|_| {
                        format!("trusted_keys {shown}: not a PEM EC, RSA or Ed25519 public key")
                    })?;
                Ok((shown, key))
            })
            .collect::<Result<_, String>>()?;
        Ok(Self { jwks_url, pems })
    }

    /// Trusts `keys` (tests: keys made in memory).
    #[cfg(test)]
    pub(crate) fn from_keys(keys: Vec<(String, DecodingKey)>) -> Self {
        Self {
            jwks_url: None,
            pems: keys,
        }
    }

    /// The JWKS URL's keys, fetched now.
    async fn fetch_jwks(
        &self,
        http: &reqwest::Client,
        timeout: Duration,
    ) -> Result<Option<JwkSet>, Rejected> {
        let Some(url) = &self.jwks_url else {
            return Ok(None);
        };
        let unavailable = |e: String| Rejected::KeysUnavailable(format!("GET {url}: {e}"));
        let resp = http
            .get(url.clone())
            .header("accept", "application/json")
            .timeout(timeout)
            .send()
            .await
            .map_err(|e| unavailable(e.to_string()))?;
        if !resp.status().is_success() {
            return Err(unavailable(format!("HTTP {}", resp.status().as_u16())));
        }
        let body = crate::fetch::read_capped(resp, MAX_JWKS_BYTES)
            .await
            .map_err(unavailable)?;
        serde_json::from_slice(&body)
            .map(Some)
            .map_err(|e| unavailable(format!("not a JWKS: {e}")))
    }
}

/// One entry of `signatures`, decoded.
struct Signature<'a> {
    protected: &'a str,
    signature: &'a str,
    alg: Algorithm,
    kid: Option<String>,
}

fn decode(entry: &Value) -> Result<Signature<'_>, Rejected> {
    let malformed = |why: &str| Rejected::Malformed(why.to_owned());
    let field = |name: &str| {
        entry
            .get(name)
            .and_then(Value::as_str)
            .ok_or_else(|| malformed(&format!("a signature without {name}")))
    };
    let protected = field("protected")?;
    let signature = field("signature")?;
    let header: Value = URL_SAFE_NO_PAD
        .decode(protected)
        .ok()
        .and_then(|raw| serde_json::from_slice(&raw).ok())
        .ok_or_else(|| malformed("a protected header that is not base64url JSON"))?;
    let alg = header
        .get("alg")
        .and_then(Value::as_str)
        .and_then(|a| Algorithm::from_str(a).ok())
        .filter(|a| !matches!(a, Algorithm::HS256 | Algorithm::HS384 | Algorithm::HS512))
        .ok_or_else(|| malformed("a protected header without an asymmetric alg"))?;
    let kid = header.get("kid").and_then(Value::as_str).map(str::to_owned);
    Ok(Signature {
        protected,
        signature,
        alg,
        kid,
    })
}

/// Checks `card` (the JSON document as fetched) against `trusted`; returns the kid (or PEM
/// file) of the key that verified it.
pub async fn verify(
    card: &Value,
    trusted: &TrustedKeys,
    http: &reqwest::Client,
    timeout: Duration,
) -> Result<String, Rejected> {
    let entries = match card.get(super::SIGNATURES) {
        Some(Value::Array(entries)) if !entries.is_empty() => entries,
        None | Some(Value::Array(_)) => return Err(Rejected::Unsigned),
        Some(_) => return Err(Rejected::Malformed("signatures is not an array".into())),
    };
    let signatures: Vec<Signature> = entries
        .iter()
        .take(MAX_SIGNATURES)
        .map(decode)
        .collect::<Result<_, _>>()?;
    let payload = super::payload(card).map_err(|e| Rejected::Malformed(e.to_string()))?;
    let payload = URL_SAFE_NO_PAD.encode(payload);
    let jwks = trusted.fetch_jwks(http, timeout).await?;
    // Whether some signature named a key the JWKS has (else: all named unknown keys).
    let mut known = false;
    let mut unknown = None;
    for sig in &signatures {
        let input = format!("{}.{payload}", sig.protected);
        let verifies = |key: &DecodingKey| {
            jsonwebtoken::crypto::verify(sig.signature, input.as_bytes(), key, sig.alg)
                .unwrap_or(false)
        };
        let from_jwks = sig.kid.as_deref().and_then(|kid| {
            let jwk = jwks.as_ref()?.find(kid)?;
            DecodingKey::from_jwk(jwk).ok()
        });
        match (&from_jwks, &sig.kid) {
            (Some(key), Some(kid)) if verifies(key) => return Ok(kid.clone()),
            (Some(_), _) => known = true,
            (None, Some(kid)) if jwks.is_some() => unknown = Some(kid.clone()),
            (None, _) => {}
        }
        if let Some((file, _)) = trusted.pems.iter().find(|(_, key)| verifies(key)) {
            return Ok(file.clone());
        }
    }
    // Signatures only by keys we do not know say more than "bad signature" when nothing else
    // could check them.
    match unknown {
        Some(kid) if !known && trusted.pems.is_empty() => Err(Rejected::UnknownKey(kid)),
        _ => Err(Rejected::BadSignature),
    }
}
