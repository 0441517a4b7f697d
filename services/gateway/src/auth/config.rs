//! The `[auth]` section: the security schemes the card declares, what each needs to enforce
//! them (keys, issuer, audiences), and the requirements. The card's JSON is taken verbatim from
//! `scheme`, so what the card says and what is enforced come from one declaration.

use std::collections::BTreeMap;

use a2a_types::v1::SecurityScheme;
use serde::Deserialize;

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AuthConfig {
    /// Scheme name → declaration. The names are the card's `securitySchemes` keys.
    pub schemes: BTreeMap<String, SchemeConfig>,
    /// OR of AND-sets: each entry maps scheme names to the scopes they must carry. Empty = any
    /// one declared scheme suffices.
    pub requirements: Vec<BTreeMap<String, Vec<String>>>,
    /// Skill id → requirements (same shape) a caller must also meet for a message to reach the
    /// agent that has this skill; published on the skill in the card.
    pub skill_requirements: BTreeMap<String, Vec<BTreeMap<String, Vec<String>>>>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SchemeConfig {
    /// Published in the card as is (1.0 JSON shape, e.g.
    /// `{ apiKeySecurityScheme = { location = "header", name = "X-API-Key" } }`).
    pub scheme: SecurityScheme,
    /// API keys accepted by an apiKey scheme.
    #[serde(default)]
    pub keys: Vec<ApiKeyConfig>,
    /// Token issuer of a bearer, oauth2 or openIdConnect scheme (exact `iss`).
    pub issuer: Option<String>,
    /// Where the JWKS is found: an OIDC discovery document or OAuth2 metadata URL. Default: the
    /// scheme's `openIdConnectUrl` / `oauth2MetadataUrl`, else `{issuer}/.well-known/openid-configuration`.
    pub metadata_url: Option<String>,
    /// Accepted `aud` values; at least one must match.
    #[serde(default)]
    pub audiences: Vec<String>,
    /// Signature algorithms accepted; asymmetric only (HMAC and `none` are refused).
    #[serde(default = "default_algorithms")]
    pub algorithms: Vec<String>,
    /// How long a fetched JWKS is trusted before it is fetched again.
    #[serde(default = "default_jwks_ttl")]
    pub jwks_ttl_secs: u64,
    /// Least time between two JWKS fetch attempts, whatever caused them (from the end of one to
    /// the start of the next; also the back-off after a failure).
    #[serde(default = "default_min_refresh")]
    pub jwks_min_refresh_secs: u64,
    /// Clock skew allowed on exp/nbf.
    #[serde(default = "default_leeway")]
    pub leeway_secs: u64,
    /// How many verified tokens are remembered (0 turns the cache off), and for how long at
    /// most: a key withdrawn from the JWKS stops being trusted within that time.
    #[serde(default = "default_token_cache_size")]
    pub token_cache_size: usize,
    #[serde(default = "default_token_cache_secs")]
    pub token_cache_secs: u64,
}

#[derive(Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApiKeyConfig {
    /// The principal is `apikey:<scheme>:config:<id>` (`crate::auth::api_key_principal`).
    pub id: String,
    /// Hex SHA-256 of the key (preferred: the file then holds no secret).
    pub sha256: Option<String>,
    /// The key itself (embedded tests).
    pub key: Option<String>,
}

/// The key itself never prints; its id and hash (which holds no secret) do.
impl std::fmt::Debug for ApiKeyConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiKeyConfig")
            .field("id", &self.id)
            .field("sha256", &self.sha256)
            .field("key", &self.key.as_ref().map(|_| "***"))
            .finish()
    }
}

fn default_algorithms() -> Vec<String> {
    [
        "RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "EdDSA",
    ]
    .map(String::from)
    .to_vec()
}

fn default_jwks_ttl() -> u64 {
    600
}

fn default_leeway() -> u64 {
    30
}

fn default_min_refresh() -> u64 {
    10
}

fn default_token_cache_size() -> usize {
    10_000
}

fn default_token_cache_secs() -> u64 {
    60
}
