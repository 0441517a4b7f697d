//! `[admin]`: the tokens and the identity-provider scheme the admin API accepts, checked when
//! the configuration is loaded.

use serde::Deserialize;

/// `[admin]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AdminConfig {
    /// SHA-256 (lowercase or uppercase hex) of each accepted bearer token.
    pub token_sha256: Vec<String>,
    /// An `[auth]` scheme (bearer, oauth2 or openIdConnect) whose tokens are also accepted,
    /// when they carry `scope`: operators log in with their identity provider, and the audit
    /// names them (`oidc:<issuer>|<subject>`).
    pub oidc_scheme: Option<String>,
    /// The scope such a token must carry.
    pub scope: String,
}

impl Default for AdminConfig {
    fn default() -> Self {
        Self {
            token_sha256: Vec::new(),
            oidc_scheme: None,
            scope: "a2a:admin".into(),
        }
    }
}

impl AdminConfig {
    pub fn validate(&self, auth: Option<&crate::auth::AuthConfig>) -> Result<(), String> {
        for t in &self.token_sha256 {
            if t.len() != 64 || !t.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(format!(
                    "admin.token_sha256 (A2A_ADMIN_TOKEN_SHA256): {:?} is not a SHA-256 in hex \
                     (64 hex digits; e.g. `printf %s \"$TOKEN\" | sha256sum`)",
                    t.chars().take(80).collect::<String>()
                ));
            }
        }
        if let Some(name) = &self.oidc_scheme {
            let auth = auth.ok_or_else(|| {
                format!("admin.oidc_scheme = {name:?} needs that scheme in [auth.schemes]")
            })?;
            crate::auth::token_verifier(auth, name)
                .map_err(|e| format!("admin.oidc_scheme = {name:?}: {e}"))?;
            if self.scope.trim().is_empty() {
                return Err("admin.scope must name the scope an admin token carries".into());
            }
        }
        Ok(())
    }

    pub(super) fn digests(&self) -> Vec<[u8; 32]> {
        self.token_sha256
            .iter()
            .filter_map(|t| {
                let mut out = [0u8; 32];
                for (i, byte) in out.iter_mut().enumerate() {
                    *byte = u8::from_str_radix(t.get(2 * i..2 * i + 2)?, 16).ok()?;
                }
                Some(out)
            })
            .collect()
    }
}
