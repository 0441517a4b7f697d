//! Authentication: the card's security schemes, enforced. One [`Authenticator`] takes a
//! request's credentials ([`Credentials`]: HTTP headers and query, which gRPC metadata also
//! fills) and answers the [`Principal`] that owns the request's tasks, or why not.
//!
//! Credentials are never logged and never echoed in an error.
//!
//! Here: the [`Authenticator`] and the requirements it enforces; `schemes.rs` checks one
//! scheme's credential, `principal.rs` names the owner a credential proves.

pub mod config;
pub mod jwt;
mod principal;
mod schemes;
mod skills;
mod token_cache;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use a2a_types::A2aError;
use a2a_types::string_list::StringList;
use a2a_types::v1::security_scheme::Scheme as CardScheme;
use a2a_types::v1::{SecurityRequirement, SecurityScheme};
use axum::http::{HeaderMap, HeaderValue};

pub use config::AuthConfig;
use jwt::{JwtVerifier, missing_scopes};
use principal::set_owner;
pub use principal::{KeySource, api_key_principal, mtls_principal};
use schemes::{Identity, Location, Scheme, api_key_scheme, check};
pub use skills::SkillPolicy;

/// Where a request carries its credentials. HTTP fills both; gRPC metadata becomes `headers`.
/// `client_cert` is the connection's verified client certificate (TLS with a client CA).
#[derive(Clone, Copy)]
pub struct Credentials<'a> {
    pub headers: &'a HeaderMap,
    pub query: Option<&'a str>,
    pub client_cert: Option<&'a crate::tls::ClientCert>,
}

/// API keys kept outside the config file (the `api_keys` table), looked up by SHA-256.
#[async_trait::async_trait]
pub trait KeyDirectory: Send + Sync {
    /// The id of the live key with this hash.
    async fn lookup(&self, sha256: &[u8; 32]) -> Result<Option<String>, String>;
}

#[async_trait::async_trait]
impl KeyDirectory for a2a_store::PgApiKeys {
    async fn lookup(&self, sha256: &[u8; 32]) -> Result<Option<String>, String> {
        a2a_store::PgApiKeys::lookup(self, sha256)
            .await
            .map_err(|e| e.to_string())
    }
}

/// The token verifier of `[auth]` scheme `name`, which must be a bearer, oauth2 or
/// openIdConnect scheme: what the admin API's OIDC login (`[admin] oidc_scheme`) checks tokens
/// with, exactly as the public listener does.
pub fn token_verifier(c: &AuthConfig, name: &str) -> Result<JwtVerifier, String> {
    let s = c
        .schemes
        .get(name)
        .ok_or_else(|| format!("no [auth.schemes.{name}]"))?;
    match &s.scheme.scheme {
        Some(CardScheme::HttpAuthSecurityScheme(h)) if h.scheme.eq_ignore_ascii_case("bearer") => {
            JwtVerifier::new(name, s, None)
        }
        Some(CardScheme::Oauth2SecurityScheme(o)) => {
            JwtVerifier::new(name, s, Some(&o.oauth2_metadata_url))
        }
        Some(CardScheme::OpenIdConnectSecurityScheme(o)) => {
            JwtVerifier::new(name, s, Some(&o.open_id_connect_url))
        }
        _ => Err(format!(
            "auth scheme {name} takes no tokens (it must be a bearer, oauth2 or openIdConnect scheme)"
        )),
    }
}

/// The authenticated caller: `apikey:<scheme>:config:<id>` or `apikey:<scheme>:db:<id>` (see
/// [`api_key_principal`]), `mtls:<scheme>:<subject DN>` (see [`mtls_principal`]), or
/// `<issuer>|<subject>`; for an AND-set of several schemes, all of its principals (see
/// [`set_owner`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    pub owner: String,
    /// Per declared scheme (in declaration order): the scopes it verified, if it verified.
    grants: Vec<Option<Vec<String>>>,
}

/// OR of AND-sets of (scheme index, scopes).
type Requirements = Vec<Vec<(usize, Vec<String>)>>;
/// The config's shape of [`Requirements`]: scheme name → scopes.
type DeclaredRequirements = [BTreeMap<String, Vec<String>>];

/// A refused request: the error, and the `WWW-Authenticate` value the HTTP bindings send with it.
#[derive(Debug)]
pub struct Rejection {
    pub error: A2aError,
    pub challenge: Option<HeaderValue>,
    /// Why, as a metrics label: `missing_credentials`, `invalid_token` or `insufficient_scope`.
    pub reason: &'static str,
}

pub struct Authenticator {
    schemes: Vec<(String, Scheme)>,
    requirements: Requirements,
    /// What a caller must also meet to reach an agent with a given skill.
    skills: Arc<SkillPolicy>,
    card_schemes: HashMap<String, SecurityScheme>,
    card_requirements: Vec<SecurityRequirement>,
}

impl Authenticator {
    pub fn new(c: &AuthConfig) -> Result<Self, String> {
        Self::with_directory(c, None)
    }

    /// As [`Self::new`], with API keys also looked up in `directory`.
    pub fn with_directory(
        c: &AuthConfig,
        directory: Option<Arc<dyn KeyDirectory>>,
    ) -> Result<Self, String> {
        if c.schemes.is_empty() {
            return Err("[auth] declares no schemes".into());
        }
        let mut schemes = Vec::new();
        for (name, s) in &c.schemes {
            let scheme = match &s.scheme.scheme {
                Some(CardScheme::ApiKeySecurityScheme(k)) => {
                    api_key_scheme(name, &k.location, &k.name, s, directory.clone())?
                }
                Some(CardScheme::HttpAuthSecurityScheme(h))
                    if h.scheme.eq_ignore_ascii_case("bearer") =>
                {
                    Scheme::Bearer(Box::new(JwtVerifier::new(name, s, None)?))
                }
                Some(CardScheme::Oauth2SecurityScheme(o)) => Scheme::Bearer(Box::new(
                    JwtVerifier::new(name, s, Some(&o.oauth2_metadata_url))?,
                )),
                Some(CardScheme::OpenIdConnectSecurityScheme(o)) => Scheme::Bearer(Box::new(
                    JwtVerifier::new(name, s, Some(&o.open_id_connect_url))?,
                )),
                Some(CardScheme::HttpAuthSecurityScheme(h)) => {
                    return Err(format!(
                        "auth scheme {name}: http scheme {} is not supported (use Bearer)",
                        h.scheme
                    ));
                }
                Some(CardScheme::MtlsSecurityScheme(_)) => Scheme::MutualTls {
                    scheme: name.clone(),
                },
                None => return Err(format!("auth scheme {name}: empty scheme")),
            };
            schemes.push((name.clone(), scheme));
        }
        let names: Vec<&str> = schemes.iter().map(|(n, _)| n.as_str()).collect();
        let declared: Vec<BTreeMap<String, Vec<String>>> = if c.requirements.is_empty() {
            c.schemes
                .keys()
                .map(|n| BTreeMap::from([(n.clone(), Vec::new())]))
                .collect()
        } else {
            c.requirements.clone()
        };
        let mut skill_requirements = HashMap::new();
        let mut card_skill_requirements = HashMap::new();
        for (skill, sets) in &c.skill_requirements {
            let what = format!("[auth] skill_requirements.{skill}");
            skill_requirements.insert(skill.clone(), compile(sets, &names, &what)?);
            card_skill_requirements.insert(skill.clone(), card_sets(sets));
        }
        let skills = Arc::new(SkillPolicy {
            schemes: names.iter().map(|n| (*n).to_owned()).collect(),
            requirements: skill_requirements,
            card_requirements: card_skill_requirements,
        });
        Ok(Self {
            requirements: compile(&declared, &names, "[auth] requirements")?,
            schemes,
            skills,
            card_schemes: c
                .schemes
                .iter()
                .map(|(n, s)| (n.clone(), s.scheme.clone()))
                .collect(),
            // The card lists what is enforced, also when the config leaves the requirements
            // implicit (any one scheme): clients such as the SDKs' auth interceptors pick their
            // credentials from `securityRequirements`.
            card_requirements: card_sets(&declared),
        })
    }

    /// What the card publishes: `securitySchemes` and `securityRequirements`.
    pub fn card(&self) -> (HashMap<String, SecurityScheme>, Vec<SecurityRequirement>) {
        (self.card_schemes.clone(), self.card_requirements.clone())
    }

    /// The per-skill requirements alone, shared: what the domain service checks when a message
    /// is routed and what the catalogue and cards publish per skill.
    pub fn skill_policy(&self) -> Arc<SkillPolicy> {
        self.skills.clone()
    }

    pub async fn authenticate(&self, creds: Credentials<'_>) -> Result<Principal, Rejection> {
        // Each scheme is checked once, even if several requirements name it.
        let mut results: Vec<Result<Option<Identity>, String>> =
            Vec::with_capacity(self.schemes.len());
        for (_, scheme) in &self.schemes {
            results.push(check(scheme, creds).await);
        }
        let mut lacking: Option<Vec<&str>> = None;
        for set in &self.requirements {
            let mut principals = Vec::with_capacity(set.len());
            let mut missing = Vec::new();
            let satisfied = set.iter().all(|(i, scopes)| match &results[*i] {
                Ok(Some(id)) => {
                    principals.push(id.principal.as_str());
                    missing.extend(missing_scopes(scopes, &id.scopes));
                    true
                }
                _ => false,
            });
            if satisfied && missing.is_empty() {
                let grants = results
                    .iter()
                    .map(|r| match r {
                        Ok(Some(id)) => Some(id.scopes.clone()),
                        _ => None,
                    })
                    .collect();
                return Ok(Principal {
                    owner: set_owner(&principals),
                    grants,
                });
            }
            if satisfied && lacking.is_none() {
                lacking = Some(missing);
            }
        }
        if let Some(missing) = lacking {
            return Err(self.reject(
                A2aError::PermissionDenied(format!(
                    "insufficient scope: requires {}",
                    missing.join(" ")
                )),
                Some("insufficient_scope"),
            ));
        }
        let invalid = self
            .schemes
            .iter()
            .zip(&results)
            .find_map(|((name, _), r)| r.as_ref().err().map(|e| format!("{name}: {e}")));
        match invalid {
            Some(reason) => {
                tracing::debug!(%reason, "request refused: bad credentials");
                Err(self.reject(A2aError::Unauthenticated(reason), Some("invalid_token")))
            }
            None => {
                let names: Vec<&str> = self.schemes.iter().map(|(n, _)| n.as_str()).collect();
                Err(self.reject(
                    A2aError::Unauthenticated(format!(
                        "credentials required (schemes: {})",
                        names.join(", ")
                    )),
                    None,
                ))
            }
        }
    }

    /// The challenges of RFC 6750 (Bearer) and, for API keys, the key's place and name.
    fn reject(&self, error: A2aError, bearer_error: Option<&'static str>) -> Rejection {
        let mut parts = Vec::new();
        if self
            .schemes
            .iter()
            .any(|(_, s)| matches!(s, Scheme::Bearer(_)))
        {
            let mut c = r#"Bearer realm="a2a-gateway""#.to_owned();
            if let Some(e) = bearer_error {
                c.push_str(&format!(r#", error="{e}""#));
            }
            parts.push(c);
        }
        for (_, s) in &self.schemes {
            if let Scheme::ApiKey { location, .. } = s {
                let (place, name) = match location {
                    Location::Header(h) => ("header", h.as_str()),
                    Location::Query(q) => ("query", q.as_str()),
                    Location::Cookie(c) => ("cookie", c.as_str()),
                };
                parts.push(format!(
                    r#"ApiKey realm="a2a-gateway", in="{place}", name="{name}""#
                ));
            }
        }
        Rejection {
            reason: bearer_error.unwrap_or("missing_credentials"),
            error,
            challenge: HeaderValue::from_str(&parts.join(", "))
                .ok()
                .filter(|_| !parts.is_empty()),
        }
    }
}

/// Requirements by scheme name → by scheme index; an undeclared name is a config error, and so
/// is an empty set: `{}` is OpenAPI's "anonymous allowed", which a gateway that owns tasks by
/// principal cannot honour beside authenticated callers (whose tasks would an anonymous caller
/// see?), so it is refused at load rather than guessed at per request.
fn compile(
    sets: &DeclaredRequirements,
    names: &[&str],
    what: &str,
) -> Result<Requirements, String> {
    if let Some(i) = sets.iter().position(BTreeMap::is_empty) {
        return Err(format!(
            "{what}[{i}] is an empty requirement `{{}}` (OpenAPI's \"anonymous allowed\"), which \
             this gateway does not support: every requirement names at least one scheme; to \
             serve callers without credentials, leave out [auth] (every caller is then \
             `anonymous`)"
        ));
    }
    sets.iter()
        .map(|set| {
            set.iter()
                .map(|(n, scopes)| {
                    let i = names
                        .iter()
                        .position(|name| name == n)
                        .ok_or_else(|| format!("auth requirement names undeclared scheme {n}"))?;
                    Ok((i, scopes.clone()))
                })
                .collect()
        })
        .collect()
}

/// Requirements in the card's shape.
fn card_sets(sets: &DeclaredRequirements) -> Vec<SecurityRequirement> {
    sets.iter()
        .map(|set| SecurityRequirement {
            schemes: set
                .iter()
                .map(|(n, scopes)| {
                    (
                        n.clone(),
                        StringList {
                            list: scopes.clone(),
                        },
                    )
                })
                .collect(),
        })
        .collect()
}

#[cfg(test)]
mod tests;
