//! `[[agents]]`: the upstream agents of the registry, as the configuration file declares them.

use std::fmt;

use a2a_types::v1::AgentCard;
use serde::Deserialize;

/// One upstream A2A agent.
///
/// ```toml
/// [[agents]]
/// name = "billing"                          # the tenant that reaches it
/// card_url = "https://billing.example.com"  # or an inline `card = { ... }` (ProtoJSON shape)
/// max_concurrency = 16                      # turns running at once
/// queue_capacity = 64                       # turns waiting beyond that; more are refused
/// weight = 1.0                              # multiplies its routing score
/// credentials = { api_key_env = "BILLING_KEY" }  # or api_key_file, or api_key = "..." inline;
///                                           # or { client_id, client_secret[_env|_file] }
/// allow_insecure_credentials = false       # true: credentials may go over plain http
/// max_turn_secs = 600                       # default [limits] max_turn_secs
/// tls = { ca = "ca.pem", cert = "c.pem", key = "k.pem" }  # private CA, client certificate
/// verify_signature = true                   # the card must be signed by a trusted key:
/// trusted_jwks_url = "https://billing.example.com/.well-known/jwks.json"  # and/or
/// trusted_keys = ["billing-signing.pub.pem"]                               # public keys
/// ```
#[derive(Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentConfig {
    pub name: String,
    /// Where the agent card is published (a base URL gets `/.well-known/agent-card.json`).
    pub card_url: Option<String>,
    /// The card itself, when the agent publishes none (ProtoJSON field names).
    pub card: Option<toml::Value>,
    /// A2A version the upstream speaks: `1.0` (default), or `0.3` (JSON-RPC only).
    #[serde(default = "default_protocol")]
    pub protocol: String,
    /// Bindings the gateway may use toward it, in the card's order (default: any of the three).
    #[serde(default)]
    pub bindings: Vec<String>,
    /// Tenant sent upstream; default: the tenant of the card interface.
    pub tenant: Option<String>,
    #[serde(default)]
    pub credentials: Option<Credentials>,
    /// Whether `credentials` may be sent over plain http: to an `http://` interface or token
    /// URL, or on the say of a card fetched over `http://` (which anyone on the way could
    /// rewrite) without `verify_signature`. Off: such an agent is refused (its card rejected,
    /// `a2a_upstream_card_rejected_total{reason="insecure_credentials"}`). For tests and
    /// trusted local networks only.
    #[serde(default)]
    pub allow_insecure_credentials: bool,
    #[serde(default = "default_concurrency")]
    pub max_concurrency: usize,
    #[serde(default = "default_queue")]
    pub queue_capacity: usize,
    #[serde(default = "default_weight")]
    pub weight: f64,
    /// Seconds between heartbeats while healthy (failures back off from 1 s up to this).
    #[serde(default = "default_health_interval")]
    pub health_interval_secs: u64,
    /// Bound on one upstream call (a stream: until it opens).
    #[serde(default = "default_timeout")]
    pub timeout_secs: u64,
    /// Bound on one turn (`[limits] max_turn_secs` when absent; 0 = none): then the task
    /// fails and the upstream task is canceled.
    #[serde(default)]
    pub max_turn_secs: Option<u64>,
    /// TLS toward the agent beyond the system's roots (`tls = { ca, cert, key }`).
    #[serde(default)]
    pub tls: Option<UpstreamTls>,
    /// Refuse the fetched card unless one of its signatures verifies with a trusted key
    /// (`trusted_jwks_url`, `trusted_keys`; never the `jku` the card names).
    #[serde(default)]
    pub verify_signature: bool,
    /// A JWKS whose keys the card may be signed with (fetched with each new card).
    pub trusted_jwks_url: Option<String>,
    /// PEM public keys (EC, RSA or Ed25519) the card may be signed with.
    #[serde(default)]
    pub trusted_keys: Vec<std::path::PathBuf>,
    /// `tls`'s files, read when the agents are built (see [`UpstreamTls::load`]).
    #[serde(skip)]
    pub client_tls: a2a_client::ClientTls,
}

/// `[[agents]] tls`: PEM files for `https://` agents (and gRPC over TLS).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpstreamTls {
    /// CA certificates trusted besides the system's roots.
    pub ca: Option<std::path::PathBuf>,
    /// A client certificate chain presented to the agent (mTLS), with `key`.
    pub cert: Option<std::path::PathBuf>,
    pub key: Option<std::path::PathBuf>,
}

impl UpstreamTls {
    /// Reads the files; an error names the agent and the file.
    pub fn load(&self, agent: &str) -> Result<a2a_client::ClientTls, String> {
        let read = |p: &Option<std::path::PathBuf>, what: &str| {
            p.as_ref()
                .map(|p| {
                    std::fs::read(p)
                        .map_err(|e| format!("agents.{agent}: tls.{what} {}: {e}", p.display()))
                })
                .transpose()
        };
        if self.cert.is_some() != self.key.is_some() {
            return Err(format!(
                "agents.{agent}: tls.cert and tls.key go together: give both or neither"
            ));
        }
        Ok(a2a_client::ClientTls {
            ca_pem: read(&self.ca, "ca")?,
            cert_pem: read(&self.cert, "cert")?,
            key_pem: read(&self.key, "key")?,
        })
    }
}

/// What the gateway presents to the upstream, according to the upstream card's security
/// schemes: an API key (where the card's apiKey scheme says), or OAuth2 client credentials
/// against the token URL of the card's clientCredentials flow (`token_url` overrides it).
///
/// Each secret is given one way: inline (`api_key`, `client_secret`: the file only), or by
/// reference, read when the agent is built: `*_env` names an environment variable, `*_file` a
/// file (its content, without a trailing newline: a mounted Kubernetes Secret, say). The admin
/// API accepts references only, so no secret is ever stored in its database.
#[derive(Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Credentials {
    pub api_key: Option<String>,
    pub api_key_env: Option<String>,
    pub api_key_file: Option<std::path::PathBuf>,
    pub client_id: Option<String>,
    pub client_secret: Option<String>,
    pub client_secret_env: Option<String>,
    pub client_secret_file: Option<std::path::PathBuf>,
    pub token_url: Option<String>,
    #[serde(default)]
    pub scopes: Vec<String>,
}

/// The fields of [`Credentials`] that hold a secret itself (not a reference to one).
pub const INLINE_SECRETS: [&str; 2] = ["api_key", "client_secret"];

/// The most bytes a secret file may hold (a key or a client secret, not a document).
const MAX_SECRET_FILE: u64 = 64 * 1024;

/// Secrets stay out of logs: only the name and the kind of credential print.
impl fmt::Debug for AgentConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AgentConfig")
            .field("name", &self.name)
            .field(
                "card_url",
                &self.card_url.as_deref().map(a2a_store::redact_url),
            )
            .field("protocol", &self.protocol)
            .field(
                "credentials",
                &self.credentials.as_ref().map(Credentials::kind),
            )
            .finish_non_exhaustive()
    }
}

impl Credentials {
    pub fn kind(&self) -> &'static str {
        if self.api_key.is_some() || self.api_key_env.is_some() || self.api_key_file.is_some() {
            "api_key"
        } else if self.client_id.is_some() {
            "oauth2_client_credentials"
        } else {
            "none"
        }
    }
}

impl Credentials {
    /// Checks that each secret is given at most one way, and that a client id has a secret.
    fn check(&self, agent: &str) -> Result<(), String> {
        let ways = |inline: bool, env: bool, file: bool| {
            [inline, env, file].iter().filter(|b| **b).count()
        };
        if ways(
            self.api_key.is_some(),
            self.api_key_env.is_some(),
            self.api_key_file.is_some(),
        ) > 1
        {
            return Err(format!(
                "agents.{agent}.credentials: give the API key one way: api_key, api_key_env or \
                 api_key_file"
            ));
        }
        let secrets = ways(
            self.client_secret.is_some(),
            self.client_secret_env.is_some(),
            self.client_secret_file.is_some(),
        );
        if secrets > 1 {
            return Err(format!(
                "agents.{agent}.credentials: give the client secret one way: client_secret, \
                 client_secret_env or client_secret_file"
            ));
        }
        if self.client_id.is_some() != (secrets == 1) {
            return Err(format!(
                "agents.{agent}.credentials: client_id and client_secret go together"
            ));
        }
        Ok(())
    }

    /// Reads the secrets given by reference (`env` looks a variable up) into `api_key` and
    /// `client_secret`; an error names the agent, the field and the variable or file (never a
    /// secret).
    pub fn resolve(
        &mut self,
        agent: &str,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<(), String> {
        let read = |field: &str, var: &Option<String>, file: &Option<std::path::PathBuf>| {
            if let Some(var) = var {
                return env(var).filter(|v| !v.is_empty()).map(Some).ok_or_else(|| {
                    format!("agents.{agent}.credentials.{field}_env: {var} is not set (or empty)")
                });
            }
            let Some(path) = file else { return Ok(None) };
            let where_ = || format!("agents.{agent}.credentials.{field}_file {}", path.display());
            let len = std::fs::metadata(path)
                .map_err(|e| format!("{}: {e}", where_()))?
                .len();
            if len > MAX_SECRET_FILE {
                return Err(format!("{}: larger than {MAX_SECRET_FILE} bytes", where_()));
            }
            let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", where_()))?;
            let value = text.trim_end_matches(['\r', '\n']);
            if value.is_empty() {
                return Err(format!("{}: empty", where_()));
            }
            Ok(Some(value.to_owned()))
        };
        if let Some(key) = read("api_key", &self.api_key_env, &self.api_key_file)? {
            self.api_key = Some(key);
        }
        if let Some(secret) = read(
            "client_secret",
            &self.client_secret_env,
            &self.client_secret_file,
        )? {
            self.client_secret = Some(secret);
        }
        Ok(())
    }
}

fn default_protocol() -> String {
    "1.0".into()
}
fn default_concurrency() -> usize {
    16
}
fn default_queue() -> usize {
    64
}
fn default_weight() -> f64 {
    1.0
}
fn default_health_interval() -> u64 {
    10
}
fn default_timeout() -> u64 {
    30
}

impl AgentConfig {
    /// Checks what can be checked without the network; one clear line per problem.
    pub fn validate(&self, builtin: &[&str]) -> Result<(), String> {
        let name = &self.name;
        let valid_name = !name.is_empty()
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.');
        if !valid_name {
            return Err(format!(
                "agents: name {name:?} must be non-empty ASCII letters, digits, '-', '_' or '.'"
            ));
        }
        if builtin.contains(&name.as_str()) {
            return Err(format!("agents.{name}: the name of a built-in agent"));
        }
        match (&self.card_url, &self.card) {
            (Some(url), None) => {
                url::Url::parse(url).map_err(|e| format!("agents.{name}.card_url {url:?}: {e}"))?;
            }
            (None, Some(_)) => {
                self.inline_card()?;
            }
            _ => {
                return Err(format!(
                    "agents.{name}: set exactly one of card_url and card"
                ));
            }
        }
        let trust = self.trusted_jwks_url.is_some() || !self.trusted_keys.is_empty();
        match (self.verify_signature, trust) {
            (true, false) => {
                return Err(format!(
                    "agents.{name}.verify_signature needs the keys to trust: \
                     trusted_jwks_url and/or trusted_keys"
                ));
            }
            (false, true) => {
                return Err(format!(
                    "agents.{name}: trusted_jwks_url and trusted_keys take effect only with \
                     verify_signature = true"
                ));
            }
            (true, true) if self.card.is_some() => {
                return Err(format!(
                    "agents.{name}.verify_signature applies to a fetched card (card_url), \
                     not an inline one"
                ));
            }
            _ => {}
        }
        if let Some(url) = &self.trusted_jwks_url {
            url::Url::parse(url)
                .map_err(|e| format!("agents.{name}.trusted_jwks_url {url:?}: {e}"))?;
        }
        if !matches!(self.protocol.as_str(), "1.0" | "0.3") {
            return Err(format!("agents.{name}.protocol must be \"1.0\" or \"0.3\""));
        }
        for b in &self.bindings {
            if a2a_client::BindingKind::from_card_name(b).is_none() {
                return Err(format!(
                    "agents.{name}.bindings: {b:?} is not JSONRPC, HTTP+JSON or GRPC"
                ));
            }
        }
        if self.max_concurrency == 0 {
            return Err(format!("agents.{name}.max_concurrency must be at least 1"));
        }
        if !(self.weight.is_finite() && self.weight > 0.0) {
            return Err(format!("agents.{name}.weight must be a positive number"));
        }
        if let Some(c) = &self.credentials {
            c.check(name)?;
        }
        Ok(())
    }

    /// The inline card, parsed from its ProtoJSON shape.
    pub fn inline_card(&self) -> Result<Option<AgentCard>, String> {
        let Some(card) = &self.card else {
            return Ok(None);
        };
        let json = serde_json::to_value(card).map_err(|e| e.to_string())?;
        serde_json::from_value(json)
            .map(Some)
            .map_err(|e| format!("agents.{}.card is not an AgentCard: {e}", self.name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(toml_text: &str) -> Result<(), String> {
        let agent: AgentConfig = toml::from_str(toml_text).unwrap();
        agent.validate(&[])
    }

    #[test]
    fn each_secret_is_given_one_way_and_references_are_resolved() {
        let url = "name = \"up\"\ncard_url = \"http://127.0.0.1:9\"\n";
        check(&format!("{url}credentials = {{ api_key_env = \"K\" }}")).unwrap();
        let err = check(&format!(
            "{url}credentials = {{ api_key = \"k\", api_key_file = \"/k\" }}"
        ))
        .unwrap_err();
        assert!(err.contains("one way"), "{err}");
        let err = check(&format!(
            "{url}credentials = {{ client_id = \"c\", client_secret_env = \"S\", client_secret = \"s\" }}"
        ))
        .unwrap_err();
        assert!(err.contains("one way"), "{err}");
        check(&format!(
            "{url}credentials = {{ client_id = \"c\", client_secret_file = \"/s\" }}"
        ))
        .unwrap();
        let err = check(&format!(
            "{url}credentials = {{ client_secret_env = \"S\" }}"
        ))
        .unwrap_err();
        assert!(err.contains("go together"), "{err}");

        let env = |k: &str| (k == "KEY").then(|| "from-env".to_owned());
        let mut c = Credentials {
            api_key_env: Some("KEY".into()),
            ..Default::default()
        };
        c.resolve("up", env).unwrap();
        assert_eq!(c.api_key.as_deref(), Some("from-env"));
        let mut unset = Credentials {
            api_key_env: Some("NOPE".into()),
            ..Default::default()
        };
        let err = unset.resolve("up", env).unwrap_err();
        assert_eq!(
            err,
            "agents.up.credentials.api_key_env: NOPE is not set (or empty)"
        );
        let file = std::env::temp_dir().join(format!("a2a-secret-{}", uuid::Uuid::new_v4()));
        std::fs::write(&file, "from-file\r\n").unwrap();
        let mut c = Credentials {
            client_id: Some("c".into()),
            client_secret_file: Some(file.clone()),
            ..Default::default()
        };
        c.resolve("up", env).unwrap();
        assert_eq!(c.client_secret.as_deref(), Some("from-file"));
        std::fs::write(&file, "\n").unwrap();
        let err = c.resolve("up", env).unwrap_err();
        assert!(err.ends_with(": empty"), "{err}");
        let _ = std::fs::remove_file(&file);
        let mut gone = Credentials {
            api_key_file: Some(file),
            ..Default::default()
        };
        let err = gone.resolve("up", env).unwrap_err();
        assert!(
            err.starts_with("agents.up.credentials.api_key_file "),
            "{err}"
        );
    }

    #[test]
    fn verify_signature_needs_trusted_keys_and_a_fetched_card() {
        let url = "name = \"up\"\ncard_url = \"http://127.0.0.1:9\"\n";
        check(&format!(
            "{url}verify_signature = true\ntrusted_keys = [\"k.pem\"]"
        ))
        .unwrap();
        check(&format!(
            "{url}verify_signature = true\ntrusted_jwks_url = \"http://127.0.0.1:9/jwks\""
        ))
        .unwrap();
        let err = check(&format!("{url}verify_signature = true")).unwrap_err();
        assert!(
            err.contains("trusted_jwks_url and/or trusted_keys"),
            "{err}"
        );
        let err = check(&format!("{url}trusted_keys = [\"k.pem\"]")).unwrap_err();
        assert!(err.contains("only with verify_signature = true"), "{err}");
        let err = check(&format!(
            "{url}verify_signature = true\ntrusted_jwks_url = \"not a url\""
        ))
        .unwrap_err();
        assert!(err.contains("agents.up.trusted_jwks_url"), "{err}");
        let inline = "name = \"up\"\ncard = { name = \"up\" }\nverify_signature = true\n\
                      trusted_keys = [\"k.pem\"]";
        let err = check(inline).unwrap_err();
        assert!(err.contains("not an inline one"), "{err}");
    }
}
