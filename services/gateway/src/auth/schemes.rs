//! The schemes an [`Authenticator`](super::Authenticator) enforces, built from `[auth.schemes]`,
//! and the check of one scheme against a request's credentials: an API key (in a header, the
//! query or a cookie; compared in constant time, then looked up in the key directory), a bearer
//! token, or the connection's verified client certificate.

use std::sync::Arc;

use axum::http::{HeaderMap, header};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::jwt::JwtVerifier;
use super::principal::{KeySource, api_key_principal, mtls_principal};
use super::{Credentials, KeyDirectory, config};

pub(super) enum Location {
    Header(header::HeaderName),
    Query(String),
    Cookie(String),
}

pub(super) enum Scheme {
    ApiKey {
        location: Location,
        /// The scheme's name, as [`api_key_principal`] writes it.
        scheme: String,
        /// (id, SHA-256 of the key).
        keys: Vec<(String, [u8; 32])>,
        /// Consulted when no configured key matches.
        directory: Option<Arc<dyn KeyDirectory>>,
    },
    Bearer(Box<JwtVerifier>),
    /// `mutualTLS`: a client certificate the TLS handshake verified against `[tls] client_ca`.
    /// Without TLS and a client CA no request has one, so the scheme is never satisfied.
    MutualTls {
        /// The scheme's name, as [`mtls_principal`] writes it.
        scheme: String,
    },
}

pub(super) struct Identity {
    pub(super) principal: String,
    pub(super) scopes: Vec<String>,
}

pub(super) fn api_key_scheme(
    name: &str,
    location: &str,
    key_name: &str,
    s: &config::SchemeConfig,
    directory: Option<Arc<dyn KeyDirectory>>,
) -> Result<Scheme, String> {
    let location = match location {
        "header" => Location::Header(
            header::HeaderName::from_bytes(key_name.to_ascii_lowercase().as_bytes())
                .map_err(|_| format!("auth scheme {name}: bad header name"))?,
        ),
        "query" => Location::Query(key_name.to_owned()),
        "cookie" => Location::Cookie(key_name.to_owned()),
        other => {
            return Err(format!(
                "auth scheme {name}: unknown apiKey location {other}"
            ));
        }
    };
    let mut keys = Vec::new();
    for k in &s.keys {
        let hash: [u8; 32] = match (&k.sha256, &k.key) {
            (Some(hex), None) => decode_hex(hex).ok_or_else(|| {
                format!(
                    "auth scheme {name}: key {}: sha256 is not 64 hex digits",
                    k.id
                )
            })?,
            (None, Some(key)) => Sha256::digest(key.as_bytes()).into(),
            _ => {
                return Err(format!(
                    "auth scheme {name}: key {}: give exactly one of sha256, key",
                    k.id
                ));
            }
        };
        keys.push((k.id.clone(), hash));
    }
    Ok(Scheme::ApiKey {
        location,
        scheme: name.to_owned(),
        keys,
        directory,
    })
}

fn decode_hex(hex: &str) -> Option<[u8; 32]> {
    let bytes = hex.as_bytes();
    if bytes.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, pair) in bytes.chunks(2).enumerate() {
        out[i] = u8::from_str_radix(std::str::from_utf8(pair).ok()?, 16).ok()?;
    }
    Some(out)
}

/// `Ok(None)`: this scheme's credential is absent; `Err`: present but wrong.
pub(super) async fn check(
    scheme: &Scheme,
    creds: Credentials<'_>,
) -> Result<Option<Identity>, String> {
    match scheme {
        Scheme::ApiKey {
            location,
            scheme,
            keys,
            directory,
        } => {
            let Some(presented) = api_key(location, creds) else {
                return Ok(None);
            };
            let digest: [u8; 32] = Sha256::digest(presented.as_bytes()).into();
            // Compare against every key without stopping early, so timing says nothing.
            let mut found = None;
            for (id, hash) in keys {
                if bool::from(digest.ct_eq(hash)) {
                    found = Some(id);
                }
            }
            let found = match (found, directory) {
                (Some(id), _) => Some((KeySource::Config, id.clone())),
                (None, Some(dir)) => dir
                    .lookup(&digest)
                    .await
                    .map_err(|e| {
                        tracing::warn!(error = %e, "cannot look up an API key");
                        "cannot check the API key now (key store unavailable)".to_owned()
                    })?
                    .map(|id| (KeySource::Db, id)),
                (None, None) => None,
            };
            match found {
                Some((source, id)) => Ok(Some(Identity {
                    principal: api_key_principal(scheme, source, &id),
                    scopes: Vec::new(),
                })),
                None => Err("API key is not valid".into()),
            }
        }
        Scheme::Bearer(verifier) => {
            let Some(token) = bearer(creds.headers) else {
                return Ok(None);
            };
            let v = verifier.verify(token).await?;
            Ok(Some(Identity {
                principal: v.principal,
                scopes: v.scopes,
            }))
        }
        // The handshake refused a certificate that does not verify; one that is here verified.
        Scheme::MutualTls { scheme } => Ok(creds.client_cert.map(|cert| Identity {
            principal: mtls_principal(scheme, cert),
            scopes: Vec::new(),
        })),
    }
}

fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim())
        .filter(|t| !t.is_empty())
}

fn api_key(location: &Location, creds: Credentials<'_>) -> Option<String> {
    match location {
        Location::Header(h) => creds.headers.get(h)?.to_str().ok().map(str::to_owned),
        Location::Query(q) => url::form_urlencoded::parse(creds.query?.as_bytes())
            .find(|(k, _)| k == q)
            .map(|(_, v)| v.into_owned()),
        Location::Cookie(c) => creds
            .headers
            .get_all(header::COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(';'))
            .filter_map(|pair| pair.trim().split_once('='))
            .find(|(k, _)| k == c)
            .map(|(_, v)| v.to_owned()),
    }
    .filter(|k| !k.is_empty())
}
