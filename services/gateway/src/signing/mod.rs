//! Agent-card signatures (A2A §8.4, spec facts §7.4): a JWS with a detached payload, the
//! payload being the RFC 8785 canonical JSON of the card without its `signatures` member.
//!
//! The gateway signs every card it serves ([`CardSigner`], applied where a card document is
//! built, `crate::cards`) with the first of the push signing keys, whose public halves it
//! already publishes at `/.well-known/jwks.json`: the protected header names that JWKS (`jku`)
//! and the key (`kid`), so one key set verifies push deliveries and cards, and rotation works
//! for both the same way (a card signed with a key that is still published keeps verifying).
//! Toward upstream agents, [`verify`] checks a fetched card against keys the configuration
//! trusts, never the `jku` the card names (that would let whoever serves the card vouch for it).

pub mod jcs;
pub mod verify;

use std::collections::HashMap;
use std::sync::Mutex;

use a2a_types::v1::{AgentCard, AgentCardSignature};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use bytes::Bytes;
use serde_json::Value;
use sha2::{Digest, Sha256};

/// The card member that holds the signatures (left out of what they cover).
pub const SIGNATURES: &str = "signatures";

/// Signatures remembered per signed content; a rebuild of the cards (an upstream's card or
/// health changed) finds the unchanged ones here, so their bytes and ETags stay the same
/// (ES256 signatures are randomised: signing again would change both).
const CACHE_LIMIT: usize = 256;

/// Signs cards with the first push signing key; `None` from [`CardSigner::new`] when there is
/// no key (cards are then served unsigned).
pub struct CardSigner {
    keys: a2a_push::SigningKeys,
    /// The JWKS URL at the public URL (`jku`).
    jku: String,
    /// SHA-256 of a canonical payload → its signature.
    cache: Mutex<HashMap<[u8; 32], AgentCardSignature>>,
}

impl std::fmt::Debug for CardSigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CardSigner")
            .field("kid", &self.keys.signing_kid())
            .field("jku", &self.jku)
            .finish_non_exhaustive()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SignError {
    #[error("the card cannot be canonicalised: {0}")]
    Canonical(#[from] jcs::JcsError),
    #[error(transparent)]
    Key(#[from] a2a_push::KeyError),
}

impl CardSigner {
    pub fn new(keys: &a2a_push::SigningKeys, public_url: &str) -> Option<Self> {
        keys.signing_kid()?;
        Some(Self {
            keys: keys.clone(),
            jku: format!(
                "{}{}",
                public_url.trim_end_matches('/'),
                a2a_push::JWKS_PATH
            ),
            cache: Mutex::new(HashMap::new()),
        })
    }

    /// The signature of the card `json` (any `signatures` member it has is not covered).
    pub fn sign(&self, json: &Value) -> Result<AgentCardSignature, SignError> {
        let payload = payload(json)?;
        let digest: [u8; 32] = Sha256::digest(&payload).into();
        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(sig) = cache.get(&digest) {
            return Ok(sig.clone());
        }
        let (kid, alg) = match (self.keys.signing_kid(), self.keys.signing_alg()) {
            (Some(kid), Some(alg)) => (kid, alg),
            _ => return Err(a2a_push::KeyError::None.into()),
        };
        let header = serde_json::json!({
            "alg": format!("{alg:?}"),
            "kid": kid,
            "jku": self.jku,
            "typ": "JOSE",
        });
        let protected =
            URL_SAFE_NO_PAD.encode(serde_json::to_vec(&header).expect("a header serialises"));
        let input = format!("{protected}.{}", URL_SAFE_NO_PAD.encode(&payload));
        let signature = AgentCardSignature {
            protected,
            signature: self.keys.sign_message(input.as_bytes())?,
            header: None,
        };
        if cache.len() >= CACHE_LIMIT {
            cache.clear();
        }
        cache.insert(digest, signature.clone());
        Ok(signature)
    }
}

/// What a card signature covers: the RFC 8785 form of `card` without its `signatures`.
pub fn payload(card: &Value) -> Result<Vec<u8>, jcs::JcsError> {
    match card {
        Value::Object(members) if members.contains_key(SIGNATURES) => {
            let mut unsigned = members.clone();
            unsigned.remove(SIGNATURES);
            jcs::canonical(&Value::Object(unsigned))
        }
        other => jcs::canonical(other),
    }
}

/// A card as it is served, signed: `card` carries the signature of its own ProtoJSON form
/// (what gRPC and JSON-RPC return), and the returned bytes are `served` (the JSON document the
/// HTTP paths serve, which may hold more than the ProtoJSON form) with the signature of exactly
/// those fields. Without a signer, or if signing fails (logged), both go out unsigned.
pub fn signed(
    mut card: AgentCard,
    mut served: Value,
    signer: Option<&CardSigner>,
) -> (AgentCard, Bytes) {
    card.signatures.clear();
    if let Value::Object(members) = &mut served {
        members.remove(SIGNATURES);
    }
    // A card that does not print (it holds what an upstream's card brought) goes out unsigned.
    let proto = signer.and_then(|_| match serde_json::to_value(&card) {
        Ok(proto) => Some(proto),
        Err(e) => {
            tracing::error!(error = %e, card = %card.name, "the card does not print; it goes out unsigned");
            None
        }
    });
    if let (Some(signer), Some(proto)) = (signer, proto) {
        let name = card.name.clone();
        let sign = |json: &Value| match signer.sign(json) {
            Ok(sig) => Some(sig),
            Err(e) => {
                tracing::error!(error = %e, card = %name, "the card goes out unsigned");
                None
            }
        };
        let own = sign(&proto);
        let of_served = if proto == served {
            own.clone()
        } else {
            sign(&served)
        };
        card.signatures.extend(own);
        if let (Some(sig), Value::Object(members)) = (of_served, &mut served) {
            let sigs = serde_json::to_value(vec![sig]).expect("a signature serialises");
            members.insert(SIGNATURES.into(), sigs);
        }
    }
    let bytes = serde_json::to_vec(&served).expect("a card serialises");
    (card, Bytes::from(bytes))
}

#[cfg(test)]
mod tests;
