//! The configuration file (`A2A_CONFIG`): [`FileConfig`] and its sections, their defaults, and
//! the checks made when it is parsed (so a bad file fails before anything starts, whatever the
//! environment adds).

use std::path::Path;

use a2a_types::v1::AgentSkill;
use serde::Deserialize;

/// What the configuration file may set. Unknown keys are rejected so typos fail loudly.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FileConfig {
    pub listen: Option<String>,
    /// Start although `listen` is beyond loopback and no `[auth]` is configured (every caller
    /// is then `anonymous`, one owner); `A2A_ALLOW_UNAUTHENTICATED` wins.
    pub allow_unauthenticated: bool,
    pub public_url: Option<String>,
    pub card: CardConfig,
    pub limits: Limits,
    pub database: DatabaseConfig,
    /// Agent for messages without a tenant; default `echo`.
    pub default_agent: Option<String>,
    /// The built-in agents this gateway routes to (`echo`, `scenario`); absent = both in
    /// embedded mode, only `echo` with PostgreSQL or Redis: `scenario` is a test tool (see
    /// [`Config::builtin_agents`]).
    pub builtin_agents: Option<Vec<String>>,
    /// Extensions declared in the card's capabilities.
    pub extensions: Vec<ExtensionConfig>,
    /// Content of the extended agent card; enables `capabilities.extendedAgentCard`.
    pub extended_card: Option<ExtendedCardConfig>,
    /// Security schemes and requirements; absent = every caller is `anonymous`.
    pub auth: Option<crate::auth::AuthConfig>,
    /// Upstream A2A agents (`[[agents]]`), routed to beside the built-in ones.
    pub agents: Vec<crate::upstream::config::AgentConfig>,
    pub dispatch: DispatchConfig,
    /// Webhook address policy and delivery signing keys (shared with `a2a-worker`).
    pub push: PushConfig,
    /// Safe retries of SendMessage (`Idempotency-Key`).
    pub idempotency: IdempotencyConfig,
    /// How long terminal tasks are kept, and how many tasks the in-memory store holds.
    pub retention: crate::retention::RetentionConfig,
    /// TLS on the public listener (`[tls]`, or `A2A_TLS_CERT` and `A2A_TLS_KEY`); absent =
    /// plaintext HTTP/1.1 and h2c.
    pub tls: Option<crate::tls::TlsConfig>,
    /// `[admin]`: the admin API on the admin listener (`A2A_ADMIN_TOKEN_SHA256` overrides
    /// `token_sha256`).
    pub admin: crate::admin::AdminConfig,
}

/// `[idempotency]`: how retried sends are recognised. Only a request that asks for it (an
/// `Idempotency-Key` header, or gRPC metadata `idempotency-key`) is ever answered from another
/// request; see `service::idempotency`.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct IdempotencyConfig {
    /// How long a key is remembered; afterwards it is free again (and deleted in the
    /// background).
    pub ttl_secs: u64,
    /// For deployments whose clients guarantee unique message ids: a send without a key uses
    /// its `messageId` as the key, so a reused id with a different request is refused.
    pub message_id: bool,
}

impl Default for IdempotencyConfig {
    fn default() -> Self {
        Self {
            ttl_secs: 86_400,
            message_id: false,
        }
    }
}

/// Crash-safe dispatch (with PostgreSQL): each replica's lease on the tasks it runs.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DispatchConfig {
    /// A replica that has not renewed its lease for this long is presumed dead, and another
    /// replica takes over its running tasks. Renewed every third of it.
    pub lease_ms: u64,
}

impl Default for DispatchConfig {
    fn default() -> Self {
        Self { lease_ms: 15_000 }
    }
}

/// `[push]`: what the gateway and the worker must agree on about webhooks, and how the
/// embedded gateway (in-memory store) delivers them itself (the `a2a-worker` settings of the
/// same names; a deployment on PostgreSQL and Redis leaves delivery to the worker).
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PushConfig {
    /// Internal hosts and networks webhooks may reach (`A2A_PUSH_ALLOWED_HOSTS`).
    pub allowed_hosts: Vec<String>,
    /// `[kid=]path` of the signing keys, the first signs (`A2A_PUSH_SIGNING_KEYS`).
    pub signing_keys: Vec<String>,
    /// The keys `signing_keys` names, read when the configuration is loaded.
    #[serde(skip)]
    pub keys: a2a_push::SigningKeys,
    /// Attempts per event and webhook before it becomes a dead letter.
    pub max_attempts: u32,
    /// Delay before the second attempt; doubles per attempt, with jitter.
    pub backoff_base_ms: u64,
    /// Longest delay between attempts.
    pub backoff_max_ms: u64,
    /// Timeout of one attempt (connect to end of response).
    pub attempt_timeout_ms: u64,
    /// Lifetime of a delivery JWT.
    pub token_ttl_secs: u64,
    /// Tasks delivered at once (each in order).
    pub concurrency: usize,
}

impl Default for PushConfig {
    /// The worker's defaults.
    fn default() -> Self {
        Self {
            allowed_hosts: Vec::new(),
            signing_keys: Vec::new(),
            keys: a2a_push::SigningKeys::default(),
            max_attempts: 8,
            backoff_base_ms: 500,
            backoff_max_ms: 60_000,
            attempt_timeout_ms: 10_000,
            token_ttl_secs: 300,
            concurrency: 256,
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CardConfig {
    pub name: String,
    pub description: String,
    pub version: String,
    pub documentation_url: Option<String>,
    pub icon_url: Option<String>,
    pub provider_organization: Option<String>,
    pub provider_url: Option<String>,
    pub streaming: bool,
    pub push_notifications: bool,
    /// Declare `capabilities.extendedAgentCard` even without an `[extended_card]` section
    /// (GetExtendedAgentCard then answers ExtendedAgentCardNotConfigured).
    pub extended_agent_card: bool,
    /// `max-age` of the card's `Cache-Control`, in seconds.
    pub cache_max_age_secs: u64,
}

impl Default for CardConfig {
    fn default() -> Self {
        Self {
            name: "a2a-gateway".into(),
            description: "A2A 1.0 gateway: one address for many agents".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            documentation_url: None,
            icon_url: None,
            provider_organization: None,
            provider_url: None,
            streaming: true,
            push_notifications: true,
            extended_agent_card: false,
            cache_max_age_secs: 300,
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Limits {
    /// Largest accepted request body.
    pub max_body_bytes: usize,
    /// Open SSE streams per process; more are refused as unavailable.
    pub max_streams: usize,
    /// How long a blocking SendMessage waits before returning the task as it is.
    pub blocking_timeout_secs: u64,
    /// Largest number of parts in one message.
    pub max_parts: usize,
    /// Seconds between SSE keep-alive comments.
    pub keep_alive_secs: u64,
    /// After SIGTERM, how long the gateway waits for the requests in flight and the turns
    /// running in it before it exits; a turn still running then is left to the replica that
    /// takes it over.
    pub drain_timeout_secs: u64,
    /// How long one turn of an agent may run (from when the agent starts on it) before the
    /// task fails and the agent's call is canceled; 0 = no bound. `[[agents]] max_turn_secs`
    /// overrides it for an upstream agent, [`Self::builtin_max_turn_secs`] for a built-in one.
    pub max_turn_secs: u64,
    /// `max_turn_secs` of built-in agents by name (`{ scenario = 60 }`).
    pub builtin_max_turn_secs: std::collections::BTreeMap<String, u64>,
    /// Per-owner quotas (`[limits.quotas]`).
    pub quotas: crate::service::QuotaConfig,
    /// `[limits.rate]`: rate limits per client IP, principal and agent (off unless set).
    pub rate: crate::limits::RateConfig,
    /// `[limits.edge]`: bounds on a request's head, checked before anything else.
    pub edge: crate::limits::EdgeConfig,
    /// `[limits.connections]`: connection caps and timeouts of the listeners.
    pub connections: crate::limits::ConnectionsConfig,
    /// Loop protection: a request whose `A2A-Hop-Count` (gRPC metadata `a2a-hop-count`) is
    /// above this is refused before anything runs; every upstream send carries the count plus
    /// one.
    pub max_hops: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_body_bytes: 1024 * 1024,
            max_streams: 10_000,
            blocking_timeout_secs: 300,
            max_parts: 256,
            keep_alive_secs: 15,
            // Under the usual 30 s an orchestrator allows between SIGTERM and SIGKILL.
            drain_timeout_secs: 25,
            max_turn_secs: 3_600,
            builtin_max_turn_secs: std::collections::BTreeMap::new(),
            quotas: crate::service::QuotaConfig::default(),
            rate: crate::limits::RateConfig::default(),
            edge: crate::limits::EdgeConfig::default(),
            connections: crate::limits::ConnectionsConfig::default(),
            max_hops: 8,
        }
    }
}
/// PostgreSQL settings (used when `A2A_DATABASE_URL` is set).
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DatabaseConfig {
    /// Connections in all (reads, and one held by each batch writer).
    pub pool_size: u32,
    /// How long an operation waits for a connection (connecting included) before it fails as
    /// unavailable: the fail-fast bound while PostgreSQL is down.
    pub acquire_timeout_ms: u64,
    /// Apply migrations when `serve` starts (otherwise run `a2a-gateway migrate` first).
    pub migrate: bool,
}

impl Default for DatabaseConfig {
    fn default() -> Self {
        Self {
            pool_size: 16,
            acquire_timeout_ms: 3000,
            migrate: false,
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExtensionConfig {
    pub uri: String,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub required: bool,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ExtendedCardConfig {
    pub description: Option<String>,
    pub skills: Vec<SkillConfig>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SkillConfig {
    pub id: String,
    pub name: String,
    pub description: String,
    pub tags: Vec<String>,
    pub examples: Vec<String>,
}

impl From<&SkillConfig> for AgentSkill {
    fn from(s: &SkillConfig) -> Self {
        AgentSkill {
            id: s.id.clone(),
            name: s.name.clone(),
            description: s.description.clone(),
            tags: s.tags.clone(),
            examples: s.examples.clone(),
            ..Default::default()
        }
    }
}
/// `builtin_agents` (or `A2A_BUILTIN_AGENTS`): built-in names, each once.
pub(super) fn check_builtin_agents(names: Vec<String>) -> Result<Vec<String>, String> {
    let builtin = crate::agents::AgentRegistry::BUILTIN;
    for (i, name) in names.iter().enumerate() {
        if !builtin.contains(&name.as_str()) {
            return Err(format!(
                "{name:?} is not a built-in agent (one of {builtin:?})"
            ));
        }
        if names[..i].contains(name) {
            return Err(format!("{name:?} is listed twice"));
        }
    }
    Ok(names)
}
impl FileConfig {
    pub fn read(path: &Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read A2A_CONFIG {}: {e}", path.display()))?;
        Self::parse(&text).map_err(|e| format!("invalid A2A_CONFIG {}: {e}", path.display()))
    }

    pub fn parse(text: &str) -> Result<Self, String> {
        let file: Self = toml::from_str(text).map_err(|e| e.to_string())?;
        // Checked here so a bad [auth] section stops the start with a clear message.
        if let Some(auth) = &file.auth {
            crate::auth::Authenticator::new(auth)?;
        }
        let builtin = crate::agents::AgentRegistry::BUILTIN;
        if let Some(names) = &file.builtin_agents {
            check_builtin_agents(names.clone()).map_err(|e| format!("builtin_agents: {e}"))?;
        }
        if let Some(name) = file
            .limits
            .builtin_max_turn_secs
            .keys()
            .find(|n| !builtin.contains(&n.as_str()))
        {
            return Err(format!(
                "limits.builtin_max_turn_secs: {name:?} is not a built-in agent (one of {builtin:?})"
            ));
        }
        let mut names = std::collections::HashSet::new();
        for agent in &file.agents {
            agent.validate(&crate::agents::AgentRegistry::BUILTIN)?;
            if !names.insert(agent.name.as_str()) {
                return Err(format!("agents: {:?} is declared twice", agent.name));
            }
        }
        // A2A's AgentProvider requires both fields: a card with only one would fail the schema.
        if file.card.provider_organization.is_some() != file.card.provider_url.is_some() {
            return Err(
                "card: provider_organization and provider_url go together (A2A's AgentProvider \
                 requires both)"
                    .into(),
            );
        }
        file.limits.rate.validate()?;
        file.limits.edge.validate()?;
        file.limits.connections.validate()?;
        if file.dispatch.lease_ms < 300 {
            return Err("dispatch.lease_ms must be at least 300".into());
        }
        Ok(file)
    }
}
