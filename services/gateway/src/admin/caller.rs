//! Who is calling the admin API: an admin token (compared in constant time) or an identity
//! provider's token with the admin scope; the name the audit records.

use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::Response;
use sha2::{Digest, Sha256};

use super::{Admin, error, hex};

impl Admin {
    /// The caller's identity for the audit: `token:` and the first 12 hex digits of its admin
    /// token's SHA-256 (every configured digest is compared, in constant time), or
    /// `oidc:<issuer>|<subject>` for a token of `[admin] oidc_scheme` with the admin scope;
    /// else the 401 answer (403: a valid token without the scope).
    pub(super) async fn authenticate(&self, headers: &HeaderMap) -> Result<String, Response> {
        let unauthorized = || {
            let mut r = error(
                StatusCode::UNAUTHORIZED,
                "the admin API needs Authorization: Bearer <admin token>",
            );
            r.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"a2a-gateway admin\""),
            );
            r
        };
        let value = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .ok_or_else(unauthorized)?;
        let token = value
            .get(..7)
            .filter(|s| s.eq_ignore_ascii_case("bearer "))
            .and_then(|_| value.get(7..))
            .map(str::trim)
            .filter(|t| !t.is_empty() && t.len() <= 4096)
            .ok_or_else(unauthorized)?;
        let digest: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        let mut matched = subtle::Choice::from(0u8);
        for known in &self.tokens {
            matched |= subtle::ConstantTimeEq::ct_eq(&digest[..], &known[..]);
        }
        if bool::from(matched) {
            return Ok(format!("token:{}", hex(&digest[..6])));
        }
        // Not an admin token: perhaps one of the identity provider's, with the admin scope.
        if let Some((verifier, scope)) = &self.oidc
            && let Ok(verified) = verifier.verify(token).await
        {
            if verified.scopes.iter().any(|s| s == scope) {
                return Ok(format!("oidc:{}", verified.principal));
            }
            let mut r = error(
                StatusCode::FORBIDDEN,
                format!("the token lacks the admin scope {scope:?}"),
            );
            if let Ok(v) = HeaderValue::from_str(&format!(
                "Bearer realm=\"a2a-gateway admin\", error=\"insufficient_scope\", scope=\"{scope}\""
            )) {
                r.headers_mut().insert(header::WWW_AUTHENTICATE, v);
            }
            return Err(r);
        }
        Err(unauthorized())
    }
}
