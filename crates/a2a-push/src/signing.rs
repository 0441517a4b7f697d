//! Delivery signing keys (`A2A_PUSH_SIGNING_KEYS`) and the claims of a delivery JWT.
//!
//! Keys are PKCS#8 PEM files (P-256 for ES256, RSA for RS256), named `kid=path` or just `path`
//! (the kid is then the file name without its extension), comma separated. The first key signs;
//! every key is published. Rotation: add the new key second (published, not yet signing), wait
//! for receivers' JWKS caches to refresh, move it first, and drop the old key once no delivery
//! signed with it can still be in flight (the token lifetime).

use std::path::Path;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::jwk::{Jwk, JwkSet, KeyAlgorithm, PublicKeyUse};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("cannot read signing key {path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("signing key {kid}: not a PKCS#8 PEM P-256 (ES256) or RSA (RS256) private key")]
    Unsupported { kid: String },
    #[error("signing key id {kid:?} is used twice")]
    DuplicateKid { kid: String },
    #[error("no signing key configured ({})", crate::SIGNING_KEYS_VAR)]
    None,
    #[error("signing failed: {0}")]
    Sign(#[from] jsonwebtoken::errors::Error),
}

struct Key {
    kid: String,
    alg: Algorithm,
    encoding: EncodingKey,
    jwk: Jwk,
}

/// The configured signing keys: the first signs, all are published in the JWKS.
#[derive(Clone, Default)]
pub struct SigningKeys {
    keys: std::sync::Arc<Vec<Key>>,
}

impl std::fmt::Debug for SigningKeys {
    // Never prints key material.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kids: Vec<&str> = self.keys.iter().map(|k| k.kid.as_str()).collect();
        f.debug_struct("SigningKeys").field("kids", &kids).finish()
    }
}

impl SigningKeys {
    /// Reads the keys `spec` names (`[kid=]path,...`); an empty spec gives no keys.
    pub fn load(spec: &str) -> Result<Self, KeyError> {
        let mut pems = Vec::new();
        for entry in spec.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let (kid, path) = match entry.split_once('=') {
                Some((kid, path)) => (kid.trim().to_owned(), path.trim()),
                None => {
                    let stem = Path::new(entry)
                        .file_stem()
                        .map(|s| s.to_string_lossy().into_owned())
                        .unwrap_or_else(|| entry.to_owned());
                    (stem, entry)
                }
            };
            let pem = std::fs::read(path).map_err(|source| KeyError::Read {
                path: path.to_owned(),
                source,
            })?;
            pems.push((kid, pem));
        }
        Self::from_pems(pems)
    }

    /// Keys from PEM bytes, in signing order.
    pub fn from_pems(pems: Vec<(String, Vec<u8>)>) -> Result<Self, KeyError> {
        let mut keys: Vec<Key> = Vec::with_capacity(pems.len());
        for (kid, pem) in pems {
            if keys.iter().any(|k| k.kid == kid) {
                return Err(KeyError::DuplicateKid { kid });
            }
            keys.push(Key::from_pem(kid, &pem)?);
        }
        Ok(Self {
            keys: std::sync::Arc::new(keys),
        })
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// The kid of the key that signs.
    pub fn signing_kid(&self) -> Option<&str> {
        self.keys.first().map(|k| k.kid.as_str())
    }

    /// The algorithm of the key that signs.
    pub fn signing_alg(&self) -> Option<Algorithm> {
        self.keys.first().map(|k| k.alg)
    }

    /// The public keys, as the gateway publishes them at [`crate::JWKS_PATH`].
    pub fn jwks(&self) -> JwkSet {
        JwkSet {
            keys: self.keys.iter().map(|k| k.jwk.clone()).collect(),
        }
    }

    /// Signs `message` (a JWS signing input: `BASE64URL(header) "." BASE64URL(payload)`, the
    /// header naming [`Self::signing_kid`] and [`Self::signing_alg`]) with the first key;
    /// returns the base64url (no padding) signature. Agent-card signatures use it.
    pub fn sign_message(&self, message: &[u8]) -> Result<String, KeyError> {
        let key = self.keys.first().ok_or(KeyError::None)?;
        Ok(jsonwebtoken::crypto::sign(message, &key.encoding, key.alg)?)
    }

    /// Signs `claims` with the first key (header `kid` set).
    pub fn sign(&self, claims: &DeliveryClaims) -> Result<String, KeyError> {
        let key = self.keys.first().ok_or(KeyError::None)?;
        let mut header = Header::new(key.alg);
        header.kid = Some(key.kid.clone());
        Ok(jsonwebtoken::encode(&header, claims, &key.encoding)?)
    }
}

impl Key {
    fn from_pem(kid: String, pem: &[u8]) -> Result<Self, KeyError> {
        let unsupported = || KeyError::Unsupported { kid: kid.clone() };
        let candidates = [
            (Algorithm::ES256, EncodingKey::from_ec_pem(pem)),
            (Algorithm::RS256, EncodingKey::from_rsa_pem(pem)),
        ];
        for (alg, encoding) in candidates {
            let Ok(encoding) = encoding else { continue };
            let Ok(mut jwk) = Jwk::from_encoding_key(&encoding, alg) else {
                continue;
            };
            jwk.common.key_id = Some(kid.clone());
            jwk.common.public_key_use = Some(PublicKeyUse::Signature);
            jwk.common.key_algorithm = Some(match alg {
                Algorithm::ES256 => KeyAlgorithm::ES256,
                _ => KeyAlgorithm::RS256,
            });
            return Ok(Self {
                kid,
                alg,
                encoding,
                jwk,
            });
        }
        Err(unsupported())
    }
}

/// The claims of a delivery JWT. `aud` is the webhook URL exactly as configured, so a token
/// captured at one receiver is refused by another; `bodySha256` binds it to this body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeliveryClaims {
    pub iss: String,
    pub aud: String,
    pub iat: u64,
    pub exp: u64,
    pub jti: String,
    #[serde(rename = "taskId")]
    pub task_id: String,
    /// Base64url (no padding) SHA-256 of the request body.
    #[serde(rename = "bodySha256")]
    pub body_sha256: String,
}

impl DeliveryClaims {
    /// Claims for one delivery attempt issued now, valid for `ttl_secs`.
    pub fn new(issuer: &str, url: &str, task_id: &str, body: &[u8], ttl_secs: u64) -> Self {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        Self {
            iss: issuer.to_owned(),
            aud: url.to_owned(),
            iat: now,
            exp: now + ttl_secs,
            jti: uuid::Uuid::new_v4().to_string(),
            task_id: task_id.to_owned(),
            body_sha256: body_sha256(body),
        }
    }
}

/// Base64url (no padding) of the SHA-256 of `body`, as in the `bodySha256` claim.
pub fn body_sha256(body: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(Sha256::digest(body))
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_lc_rs::encoding::AsDer;
    use jsonwebtoken::{DecodingKey, Validation};

    fn pem(der: &[u8]) -> Vec<u8> {
        let b64 = base64::engine::general_purpose::STANDARD.encode(der);
        format!("-----BEGIN PRIVATE KEY-----\n{b64}\n-----END PRIVATE KEY-----\n").into_bytes()
    }

    fn ec_pem() -> Vec<u8> {
        use aws_lc_rs::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair};
        let pair = EcdsaKeyPair::generate(&ECDSA_P256_SHA256_FIXED_SIGNING).unwrap();
        pem(pair.to_pkcs8v1().unwrap().as_ref())
    }

    fn rsa_pem() -> Vec<u8> {
        use aws_lc_rs::rsa::{KeyPair, KeySize};
        let pair = KeyPair::generate(KeySize::Rsa2048).unwrap();
        let der = AsDer::<aws_lc_rs::encoding::Pkcs8V1Der>::as_der(&pair).unwrap();
        pem(der.as_ref())
    }

    fn verify(keys: &SigningKeys, token: &str, url: &str) -> DeliveryClaims {
        let header = jsonwebtoken::decode_header(token).unwrap();
        let jwks = keys.jwks();
        let jwk = jwks.find(header.kid.as_deref().unwrap()).unwrap();
        let mut validation = Validation::new(header.alg);
        validation.set_audience(&[url]);
        validation.set_issuer(&["https://gw.example.com"]);
        jsonwebtoken::decode(token, &DecodingKey::from_jwk(jwk).unwrap(), &validation)
            .unwrap()
            .claims
    }

    #[test]
    fn the_first_key_signs_and_every_key_is_published() {
        let keys =
            SigningKeys::from_pems(vec![("new".into(), ec_pem()), ("old".into(), rsa_pem())])
                .unwrap();
        assert_eq!(keys.signing_kid(), Some("new"));
        assert_eq!(keys.signing_alg(), Some(Algorithm::ES256));
        let jwks = serde_json::to_value(keys.jwks()).unwrap();
        assert_eq!(jwks["keys"][0]["kid"], "new");
        assert_eq!(jwks["keys"][0]["kty"], "EC");
        assert_eq!(jwks["keys"][1]["kty"], "RSA");
        assert!(jwks["keys"][0].get("d").is_none(), "no private part");

        let url = "https://hooks.example.com/a2a";
        let claims = DeliveryClaims::new("https://gw.example.com", url, "t1", b"{}", 300);
        let token = keys.sign(&claims).unwrap();
        let seen = verify(&keys, &token, url);
        assert_eq!(seen, claims);
        assert_eq!(seen.body_sha256, body_sha256(b"{}"));
    }

    #[test]
    fn rsa_keys_sign_rs256() {
        let keys = SigningKeys::from_pems(vec![("r".into(), rsa_pem())]).unwrap();
        assert_eq!(keys.signing_alg(), Some(Algorithm::RS256));
        let url = "https://hooks.example.com/x";
        let claims = DeliveryClaims::new("https://gw.example.com", url, "t2", b"body", 60);
        let token = keys.sign(&claims).unwrap();
        assert_eq!(verify(&keys, &token, url).task_id, "t2");
    }

    #[test]
    fn bad_keys_are_refused_by_name() {
        let err = SigningKeys::from_pems(vec![("k".into(), b"nope".to_vec())]).unwrap_err();
        assert!(err.to_string().contains("signing key k"), "{err}");
        let dup = SigningKeys::from_pems(vec![("a".into(), ec_pem()), ("a".into(), ec_pem())]);
        assert!(matches!(dup, Err(KeyError::DuplicateKid { .. })));
        assert!(matches!(
            SigningKeys::load("")
                .unwrap()
                .sign(&DeliveryClaims::new("i", "u", "t", b"", 1)),
            Err(KeyError::None)
        ));
    }
}
