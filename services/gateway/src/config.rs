//! Configuration: an optional TOML file (`A2A_CONFIG`) and the environment, env winning.
//! Parsing has no side effects, so tests build a [`Config`] from a map.
//!
//! The closed list of environment variables is [`ENV_VARS`] plus the logging and tracing ones
//! (`a2a_process::telemetry::ENV_VARS`); the README's table mirrors them.

use std::net::SocketAddr;
use std::path::Path;

use a2a_types::v1::AgentSkill;
use serde::Deserialize;

/// Every environment variable the gateway reads, with its meaning (the README mirrors this).
pub const ENV_VARS: &[(&str, &str)] = &[
    (
        "A2A_LISTEN",
        "address to listen on (HTTP/1.1 and h2c); default 127.0.0.1:8080",
    ),
    (
        "A2A_ADMIN_LISTEN",
        "address of the admin listener (/metrics, /healthz, /readyz), e.g. 127.0.0.1:9464; \
         unset = none",
    ),
    (
        "A2A_ADMIN_TOKEN_SHA256",
        "SHA-256 (hex) of the admin API's bearer tokens, comma separated ([admin] \
         token_sha256); unset = no admin API (/admin/v1/... answers 404)",
    ),
    (
        "A2A_ADMIN_TOKEN",
        "the admin token the `a2a-gateway agents` command sends (the CLI only; the gateway \
         itself reads A2A_ADMIN_TOKEN_SHA256)",
    ),
    (
        "A2A_PUBLIC_URL",
        "base URL written into the agent card; default http://<A2A_LISTEN>",
    ),
    (
        "A2A_DATABASE_URL",
        "PostgreSQL URL; unset = in-memory store",
    ),
    (
        "A2A_DATABASE_POOL_SIZE",
        "PostgreSQL connections per process; default 16 ([database] pool_size)",
    ),
    (
        "A2A_DATABASE_ACQUIRE_TIMEOUT_MS",
        "how long a request waits for a PostgreSQL connection before failing as unavailable; \
         default 3000 ([database] acquire_timeout_ms)",
    ),
    (
        "A2A_MIGRATE",
        "1 = `serve` applies database migrations before it starts; default 0 ([database] migrate)",
    ),
    (
        "A2A_REDIS_URL",
        "Redis URL (one server, or a primary behind one address); unset (and no \
         A2A_REDIS_CLUSTER_NODES) = in-process event bus",
    ),
    (
        "A2A_REDIS_CLUSTER_NODES",
        "Redis Cluster seed nodes, `redis://h1:7000,redis://h2:7001,...`, instead of \
         A2A_REDIS_URL (not both)",
    ),
    (
        "A2A_REDIS_PARTITIONS",
        "partitions of the push worker's input (a task's events all in one, in order); the \
         workers' value; default 8",
    ),
    (
        "A2A_REDIS_INLINE_MAX_BYTES",
        "events whose encoding is larger are published to Redis as references (task id, \
         sequence number, kind) that readers resolve from the event log; default 16384",
    ),
    (
        "A2A_OUTBOX_RELAY_AFTER_MS",
        "an outbox row (a commit not yet acknowledged by Redis) this old is relayed by any \
         replica; default 5000",
    ),
    (
        "A2A_REDIS_PREFIX",
        "prefix of every Redis key the gateway uses (replicas of one deployment share it); \
         default `a2a:`",
    ),
    (
        "A2A_PUSH_ALLOWED_HOSTS",
        "webhook hosts and networks allowed although internal (comma separated host names, \
         IP literals, CIDR networks; `*` = all); default none ([push] allowed_hosts)",
    ),
    (
        "A2A_PUSH_SIGNING_KEYS",
        "push delivery signing keys published at /.well-known/jwks.json: comma separated \
         `[kid=]path` of PKCS#8 PEM files, the first signs; default none ([push] signing_keys)",
    ),
    (
        "A2A_BUILTIN_AGENTS",
        "built-in agents to route to, comma separated (echo, scenario); default both in \
         embedded mode, echo with PostgreSQL or Redis (builtin_agents)",
    ),
    (
        "A2A_TLS_CERT",
        "PEM certificate chain: serve TLS (HTTP/1.1, HTTP/2, gRPC) on A2A_LISTEN; with \
         A2A_TLS_KEY; reloaded when it changes ([tls] cert)",
    ),
    ("A2A_TLS_KEY", "PEM private key of A2A_TLS_CERT ([tls] key)"),
    (
        "A2A_TLS_CLIENT_CA",
        "PEM CA certificates client certificates are verified against; enables mTLS \
         (`mutualTLS` schemes) ([tls] client_ca)",
    ),
    (
        "A2A_TLS_CLIENT_CRL",
        "PEM certificate revocation lists of the client CAs: a revoked client certificate \
         fails the handshake; reloaded when it changes ([tls] client_crl; needs a client CA)",
    ),
    (
        "A2A_ALLOW_UNAUTHENTICATED",
        "true = start although the public listener is beyond loopback and no [auth] is \
         configured (every caller is then `anonymous`); default false \
         (allow_unauthenticated)",
    ),
    (
        "A2A_TRUSTED_PROXIES",
        "proxies (comma separated CIDR networks or addresses) whose client_ip_header is \
         believed; default none ([limits.rate] trusted_proxies)",
    ),
    (
        "A2A_MAX_CONNECTIONS",
        "open connections per listener at most; default 10000 ([limits.connections] max)",
    ),
    (
        "A2A_MAX_CONNECTIONS_PER_IP",
        "open connections per client address (IPv6: per ipv6_prefix network) at most; \
         default 256 ([limits.connections] per_ip)",
    ),
    ("A2A_CONFIG", "path of the TOML configuration file"),
    (
        "RUST_LOG",
        "log filter (tracing-subscriber syntax); default info",
    ),
];

#[derive(Clone)]
pub struct Config {
    pub listen: SocketAddr,
    /// The admin listener (`A2A_ADMIN_LISTEN`): `/metrics`, `/healthz`, `/readyz`; `None` = none.
    pub admin_listen: Option<SocketAddr>,
    pub public_url: String,
    pub database_url: Option<String>,
    /// PostgreSQL pool settings: the file's `[database]` with the environment applied.
    pub database: DatabaseConfig,
    pub redis_url: Option<String>,
    /// Redis Cluster seed nodes (`A2A_REDIS_CLUSTER_NODES`), instead of `redis_url`.
    pub redis_cluster_nodes: Option<String>,
    /// Prefix of every Redis key (`A2A_REDIS_PREFIX`, default `a2a:`).
    pub redis_prefix: String,
    /// The outbox relay and the bus's inline limit (`A2A_OUTBOX_RELAY_AFTER_MS`,
    /// `A2A_REDIS_INLINE_MAX_BYTES`).
    pub outbox: OutboxSettings,
    /// Partitions of the push worker's input (`A2A_REDIS_PARTITIONS`, default 8).
    pub redis_partitions: usize,
    /// Start although the public listener is beyond loopback without `[auth]`
    /// (`A2A_ALLOW_UNAUTHENTICATED`, or the file's `allow_unauthenticated`).
    pub allow_unauthenticated: bool,
    /// This process's replica id (random per start): the owner of its dispatch lease.
    pub replica: String,
    pub file: FileConfig,
}

/// The URLs print without their passwords; the file's secrets are redacted by its own types.
impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let redacted = |u: &Option<String>| u.as_deref().map(a2a_store::redact_url);
        f.debug_struct("Config")
            .field("listen", &self.listen)
            .field("admin_listen", &self.admin_listen)
            .field("public_url", &self.public_url)
            .field("database_url", &redacted(&self.database_url))
            .field("database", &self.database)
            .field("redis_url", &redacted(&self.redis_url))
            .field(
                "redis_cluster_nodes",
                &self.redis_cluster_nodes.as_deref().map(redact_nodes),
            )
            .field("redis_prefix", &self.redis_prefix)
            .field("outbox", &self.outbox)
            .field("redis_partitions", &self.redis_partitions)
            .field("allow_unauthenticated", &self.allow_unauthenticated)
            .field("replica", &self.replica)
            .field("file", &self.file)
            .finish()
    }
}

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

/// `[tls]` with `A2A_TLS_CERT`, `A2A_TLS_KEY` (a pair: both or neither) and
/// `A2A_TLS_CLIENT_CA` over it.
fn tls_config(
    file: Option<crate::tls::TlsConfig>,
    env: &impl Fn(&str) -> Option<String>,
) -> Result<Option<crate::tls::TlsConfig>, String> {
    let mut tls = match (env("A2A_TLS_CERT"), env("A2A_TLS_KEY")) {
        (Some(cert), Some(key)) => Some(crate::tls::TlsConfig {
            cert: cert.into(),
            key: key.into(),
            client_ca: file.as_ref().and_then(|f| f.client_ca.clone()),
            client_crl: file.as_ref().and_then(|f| f.client_crl.clone()),
            reload_interval_ms: file.as_ref().map_or(10_000, |f| f.reload_interval_ms),
        }),
        (None, None) => file,
        _ => return Err("A2A_TLS_CERT and A2A_TLS_KEY go together: set both or neither".into()),
    };
    if let Some(ca) = env("A2A_TLS_CLIENT_CA") {
        match &mut tls {
            Some(t) => t.client_ca = Some(ca.into()),
            None => {
                return Err(
                    "A2A_TLS_CLIENT_CA needs TLS: set A2A_TLS_CERT and A2A_TLS_KEY (or [tls])"
                        .into(),
                );
            }
        }
    }
    if let Some(crl) = env("A2A_TLS_CLIENT_CRL") {
        match &mut tls {
            Some(t) => t.client_crl = Some(crl.into()),
            None => return Err("A2A_TLS_CLIENT_CRL needs TLS and a client CA".into()),
        }
    }
    if let Some(t) = &tls
        && t.client_crl.is_some()
        && t.client_ca.is_none()
    {
        return Err(
            "[tls] client_crl (A2A_TLS_CLIENT_CRL) needs a client CA ([tls] client_ca, \
             A2A_TLS_CLIENT_CA): without one no client certificate is verified"
                .into(),
        );
    }
    Ok(tls)
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

impl Config {
    /// Reads the environment of this process (and the file it names).
    pub fn from_env() -> Result<Self, String> {
        Self::load(|k| std::env::var(k).ok())
    }

    /// Builds the configuration from an environment lookup (tests pass a map).
    pub fn load(env: impl Fn(&str) -> Option<String>) -> Result<Self, String> {
        let file = match env("A2A_CONFIG").filter(|p| !p.is_empty()) {
            Some(path) => FileConfig::read(Path::new(&path))?,
            None => FileConfig::default(),
        };
        Self::from_parts(file, env)
    }

    pub fn from_parts(
        file: FileConfig,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, String> {
        let nonempty = |k: &str| env(k).filter(|v| !v.trim().is_empty());
        let listen_raw = nonempty("A2A_LISTEN")
            .or_else(|| file.listen.clone())
            .unwrap_or_else(|| "127.0.0.1:8080".into());
        let listen: SocketAddr = listen_raw.parse().map_err(|e| {
            format!("A2A_LISTEN={listen_raw:?} is not an address like 127.0.0.1:8080: {e}")
        })?;
        let mut file = file;
        if let Some(raw) = nonempty("A2A_ADMIN_TOKEN_SHA256") {
            file.admin.token_sha256 = raw
                .split(',')
                .map(str::trim)
                .filter(|t| !t.is_empty())
                .map(str::to_owned)
                .collect();
        }
        file.admin.validate(file.auth.as_ref())?;
        let admin_listen = nonempty("A2A_ADMIN_LISTEN")
            .map(|raw| {
                raw.parse().map_err(|e| {
                    format!("A2A_ADMIN_LISTEN={raw:?} is not an address like 127.0.0.1:9464: {e}")
                })
            })
            .transpose()?;
        let tls = tls_config(file.tls.clone(), &nonempty)?;
        let scheme = if tls.is_some() { "https" } else { "http" };
        let public_url = nonempty("A2A_PUBLIC_URL")
            .or_else(|| file.public_url.clone())
            .unwrap_or_else(|| format!("{scheme}://{listen}"));
        let public_url = public_url.trim_end_matches('/').to_owned();
        url::Url::parse(&public_url)
            .map_err(|e| format!("A2A_PUBLIC_URL={public_url:?} is not a URL: {e}"))?;
        if file.limits.max_body_bytes < 1024 {
            return Err("limits.max_body_bytes must be at least 1024".into());
        }
        if file.limits.max_parts == 0 {
            return Err("limits.max_parts must be at least 1".into());
        }
        let database = database_config(&file.database, &nonempty)?;
        let mut file = file;
        if let Some(v) = env("A2A_BUILTIN_AGENTS") {
            let names = v
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect();
            file.builtin_agents = Some(
                check_builtin_agents(names)
                    .map_err(|e| format!("A2A_BUILTIN_AGENTS={v:?}: {e}"))?,
            );
        }
        // Secrets named by reference (`api_key_env`, `..._file`) are read once, here.
        for agent in &mut file.agents {
            if let Some(c) = &mut agent.credentials {
                c.resolve(&agent.name, nonempty)?;
            }
        }
        file.push = push_config(file.push, &nonempty)?;
        if let Some(v) = nonempty("A2A_TRUSTED_PROXIES") {
            file.limits.rate.trusted_proxies = v
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect();
            crate::limits::clients::parse_networks(&file.limits.rate.trusted_proxies)
                .map_err(|e| format!("A2A_TRUSTED_PROXIES: {e}"))?;
        }
        file.limits.rate.check_proxies()?;
        file.limits.connections.apply_env(&nonempty)?;
        file.limits.connections.validate()?;
        let allow_unauthenticated = match nonempty("A2A_ALLOW_UNAUTHENTICATED") {
            Some(v) => match v.trim().to_ascii_lowercase().as_str() {
                "1" | "true" | "yes" => true,
                "0" | "false" | "no" => false,
                _ => {
                    return Err(format!(
                        "A2A_ALLOW_UNAUTHENTICATED={v:?} must be true or false"
                    ));
                }
            },
            None => file.allow_unauthenticated,
        };
        let redis_url = nonempty("A2A_REDIS_URL");
        let redis_cluster_nodes = nonempty("A2A_REDIS_CLUSTER_NODES");
        if redis_url.is_some() && redis_cluster_nodes.is_some() {
            // The message names both and says which is for what.
            a2a_bus::RedisTarget::from_settings(
                redis_url.as_deref(),
                redis_cluster_nodes.as_deref(),
            )?;
        }
        if let Some(nodes) = &redis_cluster_nodes {
            a2a_bus::RedisTarget::cluster(nodes)?;
        }
        let redis_prefix = nonempty("A2A_REDIS_PREFIX").unwrap_or_else(|| "a2a:".into());
        a2a_bus::keys::check_prefix(&redis_prefix)?;
        let redis_partitions =
            a2a_bus::keys::partitions(nonempty("A2A_REDIS_PARTITIONS").as_deref())?;
        if file.limits.rate.backend == crate::limits::Backend::Redis {
            let target = a2a_bus::RedisTarget::from_settings(
                redis_url.as_deref(),
                redis_cluster_nodes.as_deref(),
            )?
            .ok_or(
                "limits.rate.backend = \"redis\" needs a Redis: set A2A_REDIS_URL or \
                 A2A_REDIS_CLUSTER_NODES",
            )?;
            file.limits.rate.redis = Some(crate::limits::RedisTarget {
                target,
                prefix: redis_prefix.clone(),
            });
        }
        file.tls = tls;
        Ok(Self {
            listen,
            admin_listen,
            public_url,
            database_url: nonempty("A2A_DATABASE_URL"),
            database,
            redis_url,
            redis_cluster_nodes,
            redis_prefix,
            outbox: outbox_settings(&nonempty)?,
            redis_partitions,
            allow_unauthenticated,
            replica: uuid::Uuid::now_v7().to_string(),
            file,
        })
    }

    /// The built-in agents to route to: `builtin_agents` when set, else both built-ins in
    /// embedded mode (the one-command gateway keeps its test agent) and only `echo` otherwise
    /// (a deployment enables the `scenario` test tool on purpose).
    pub fn builtin_agents(&self) -> Vec<String> {
        match &self.file.builtin_agents {
            Some(names) => names.clone(),
            None if self.database_url.is_none() && !self.has_redis() => {
                crate::agents::AgentRegistry::BUILTIN
                    .map(str::to_owned)
                    .to_vec()
            }
            None => vec!["echo".to_owned()],
        }
    }

    /// Whether the public listener serves TLS.
    pub fn tls(&self) -> Option<&crate::tls::TlsConfig> {
        self.file.tls.as_ref()
    }

    /// Embedded when neither PostgreSQL nor Redis is configured.
    pub fn mode(&self) -> &'static str {
        match (&self.database_url, self.has_redis()) {
            (None, false) => "embedded (in-memory store, in-process bus)",
            (Some(_), false) => "PostgreSQL store, in-process bus",
            _ => "distributed",
        }
    }

    /// Whether a Redis (one server or a cluster) is configured.
    pub fn has_redis(&self) -> bool {
        self.redis_url.is_some() || self.redis_cluster_nodes.is_some()
    }

    /// The Redis of `A2A_REDIS_URL` or `A2A_REDIS_CLUSTER_NODES`, if any.
    pub fn redis_target(&self) -> Result<Option<a2a_bus::RedisTarget>, String> {
        a2a_bus::RedisTarget::from_settings(
            self.redis_url.as_deref(),
            self.redis_cluster_nodes.as_deref(),
        )
    }
}

/// Seed node URLs without their passwords.
fn redact_nodes(nodes: &str) -> String {
    nodes
        .split(',')
        .map(|n| a2a_store::redact_url(n.trim()))
        .collect::<Vec<_>>()
        .join(",")
}

/// The outbox relay's settings (see `service/outbox.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutboxSettings {
    /// An outbox row this old is left behind: any replica relays it.
    pub relay_after: std::time::Duration,
    /// Events encoded larger than this many bytes are announced on the bus, not carried.
    pub inline_max: usize,
}

impl Default for OutboxSettings {
    fn default() -> Self {
        Self {
            relay_after: std::time::Duration::from_secs(5),
            inline_max: a2a_bus::DEFAULT_INLINE_MAX,
        }
    }
}

fn outbox_settings(env: &impl Fn(&str) -> Option<String>) -> Result<OutboxSettings, String> {
    let mut settings = OutboxSettings::default();
    if let Some(v) = env("A2A_OUTBOX_RELAY_AFTER_MS") {
        let ms: u64 = v
            .trim()
            .parse()
            .map_err(|_| format!("A2A_OUTBOX_RELAY_AFTER_MS={v:?} is not a whole number"))?;
        if ms == 0 {
            return Err("A2A_OUTBOX_RELAY_AFTER_MS must be at least 1".into());
        }
        settings.relay_after = std::time::Duration::from_millis(ms);
    }
    if let Some(v) = env("A2A_REDIS_INLINE_MAX_BYTES") {
        settings.inline_max = v
            .trim()
            .parse()
            .map_err(|_| format!("A2A_REDIS_INLINE_MAX_BYTES={v:?} is not a whole number"))?;
    }
    Ok(settings)
}

/// `builtin_agents` (or `A2A_BUILTIN_AGENTS`): built-in names, each once.
fn check_builtin_agents(names: Vec<String>) -> Result<Vec<String>, String> {
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

/// `[push]` with `A2A_PUSH_ALLOWED_HOSTS` / `A2A_PUSH_SIGNING_KEYS` applied (env wins), the
/// allowlist checked and the keys read.
fn push_config(
    mut push: PushConfig,
    env: &impl Fn(&str) -> Option<String>,
) -> Result<PushConfig, String> {
    let list = |v: String| -> Vec<String> {
        v.split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect()
    };
    if let Some(v) = env(a2a_push::ALLOWED_HOSTS_VAR) {
        push.allowed_hosts = list(v);
    }
    if let Some(v) = env(a2a_push::SIGNING_KEYS_VAR) {
        push.signing_keys = list(v);
    }
    a2a_push::AddressPolicy::from_entries(&push.allowed_hosts)
        .map_err(|e| format!("push.allowed_hosts ({}): {e}", a2a_push::ALLOWED_HOSTS_VAR))?;
    push.keys = a2a_push::SigningKeys::load(&push.signing_keys.join(","))
        .map_err(|e| format!("push.signing_keys ({}): {e}", a2a_push::SIGNING_KEYS_VAR))?;
    if push.max_attempts == 0 {
        return Err("push.max_attempts must be at least 1".into());
    }
    if push.attempt_timeout_ms < 100 {
        return Err("push.attempt_timeout_ms must be at least 100".into());
    }
    Ok(push)
}

/// `[database]` with the `A2A_DATABASE_*` / `A2A_MIGRATE` variables applied (env wins).
fn database_config(
    file: &DatabaseConfig,
    env: &impl Fn(&str) -> Option<String>,
) -> Result<DatabaseConfig, String> {
    fn number<T: std::str::FromStr>(k: &str, v: String) -> Result<T, String> {
        v.trim()
            .parse()
            .map_err(|_| format!("{k}={v:?} is not a whole number"))
    }
    let mut db = file.clone();
    if let Some(v) = env("A2A_DATABASE_POOL_SIZE") {
        db.pool_size = number("A2A_DATABASE_POOL_SIZE", v)?;
    }
    if let Some(v) = env("A2A_DATABASE_ACQUIRE_TIMEOUT_MS") {
        db.acquire_timeout_ms = number("A2A_DATABASE_ACQUIRE_TIMEOUT_MS", v)?;
    }
    if let Some(v) = env("A2A_MIGRATE") {
        db.migrate = match v.trim() {
            "1" | "true" | "yes" => true,
            "0" | "false" | "no" => false,
            _ => return Err(format!("A2A_MIGRATE={v:?} must be 1 or 0")),
        };
    }
    if db.pool_size < 2 {
        return Err("database.pool_size (A2A_DATABASE_POOL_SIZE) must be at least 2".into());
    }
    if db.acquire_timeout_ms == 0 {
        return Err("database.acquire_timeout_ms must be at least 1".into());
    }
    Ok(db)
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

#[cfg(test)]
mod tests {
    use super::*;
    use a2a_testing::env_of as env;

    #[test]
    fn a_card_provider_needs_both_fields() {
        let err = FileConfig::parse("[card]\nprovider_organization = \"Example\"").unwrap_err();
        assert!(err.contains("provider_url"), "{err}");
        assert!(FileConfig::parse("[card]\nprovider_url = \"https://example.com\"").is_err());
        FileConfig::parse(
            "[card]\nprovider_organization = \"Example\"\nprovider_url = \"https://example.com\"",
        )
        .unwrap();
    }

    #[test]
    fn defaults_are_embedded_on_8080() {
        let c = Config::from_parts(FileConfig::default(), env(&[])).unwrap();
        assert_eq!(c.listen.to_string(), "127.0.0.1:8080");
        assert_eq!(c.public_url, "http://127.0.0.1:8080");
        assert!(c.mode().starts_with("embedded"));
    }

    #[test]
    fn tls_comes_from_the_file_or_the_environment_in_pairs() {
        let file = FileConfig::parse(
            "[tls]\ncert = \"/f/cert.pem\"\nkey = \"/f/key.pem\"\nclient_ca = \"/f/ca.pem\"",
        )
        .unwrap();
        let c = Config::from_parts(file.clone(), env(&[])).unwrap();
        let tls = c.tls().unwrap();
        assert_eq!(tls.cert.to_str(), Some("/f/cert.pem"));
        assert_eq!(tls.reload_interval_ms, 10_000);
        assert_eq!(c.public_url, "https://127.0.0.1:8080");
        // The environment's pair wins and keeps the file's client CA unless it names one.
        let pair = [
            ("A2A_TLS_CERT", "/e/cert.pem"),
            ("A2A_TLS_KEY", "/e/key.pem"),
        ];
        let c = Config::from_parts(file.clone(), env(&pair)).unwrap();
        let tls = c.tls().unwrap();
        assert_eq!(tls.key.to_str(), Some("/e/key.pem"));
        assert_eq!(
            tls.client_ca.as_deref().and_then(|p| p.to_str()),
            Some("/f/ca.pem")
        );
        let mut with_ca = pair.to_vec();
        with_ca.push(("A2A_TLS_CLIENT_CA", "/e/ca.pem"));
        let c = Config::from_parts(FileConfig::default(), env(&with_ca)).unwrap();
        let ca = c.tls().unwrap().client_ca.clone();
        assert_eq!(ca.as_deref().and_then(|p| p.to_str()), Some("/e/ca.pem"));
        // Half a pair, or a client CA without TLS, is refused with the variables named.
        let e = Config::from_parts(FileConfig::default(), env(&pair[..1])).unwrap_err();
        assert!(e.contains("A2A_TLS_KEY"), "{e}");
        let e = Config::from_parts(FileConfig::default(), env(&[("A2A_TLS_CLIENT_CA", "/ca")]))
            .unwrap_err();
        assert!(e.contains("A2A_TLS_CLIENT_CA needs TLS"), "{e}");
        assert!(
            Config::from_parts(FileConfig::default(), env(&[]))
                .unwrap()
                .tls()
                .is_none()
        );
    }

    #[test]
    fn a_client_crl_needs_a_client_ca() {
        let pair = [("A2A_TLS_CERT", "/c.pem"), ("A2A_TLS_KEY", "/k.pem")];
        let mut crl = pair.to_vec();
        crl.push(("A2A_TLS_CLIENT_CRL", "/crl.pem"));
        let e = Config::from_parts(FileConfig::default(), env(&crl)).unwrap_err();
        assert!(e.contains("needs a client CA"), "{e}");
        crl.push(("A2A_TLS_CLIENT_CA", "/ca.pem"));
        let c = Config::from_parts(FileConfig::default(), env(&crl)).unwrap();
        let tls = c.tls().unwrap();
        assert_eq!(
            tls.client_crl.as_deref().and_then(|p| p.to_str()),
            Some("/crl.pem")
        );
        let e = Config::from_parts(
            FileConfig::default(),
            env(&[("A2A_TLS_CLIENT_CRL", "/crl.pem")]),
        )
        .unwrap_err();
        assert!(e.contains("A2A_TLS_CLIENT_CRL needs TLS"), "{e}");
    }

    #[test]
    fn env_wins_over_file() {
        let file =
            FileConfig::parse("listen = \"127.0.0.1:1\"\npublic_url = \"http://file\"").unwrap();
        let c = Config::from_parts(
            file,
            env(&[
                ("A2A_LISTEN", "0.0.0.0:9000"),
                ("A2A_PUBLIC_URL", "https://gw.example.com/"),
            ]),
        )
        .unwrap();
        assert_eq!(c.listen.to_string(), "0.0.0.0:9000");
        assert_eq!(c.public_url, "https://gw.example.com");
    }

    #[test]
    fn bad_values_fail_with_one_clear_line() {
        let err =
            Config::from_parts(FileConfig::default(), env(&[("A2A_LISTEN", "nope")])).unwrap_err();
        assert!(err.contains("A2A_LISTEN"), "{err}");
        assert!(FileConfig::parse("[card]\nnmae = \"typo\"").is_err());
        let err = Config::from_parts(FileConfig::default(), env(&[("A2A_ADMIN_LISTEN", ":9464")]))
            .unwrap_err();
        assert!(err.contains("A2A_ADMIN_LISTEN"), "{err}");
    }

    #[test]
    fn the_admin_listener_is_off_unless_set() {
        let off = Config::from_parts(FileConfig::default(), env(&[])).unwrap();
        assert_eq!(off.admin_listen, None);
        let on = Config::from_parts(
            FileConfig::default(),
            env(&[("A2A_ADMIN_LISTEN", "127.0.0.1:9464")]),
        )
        .unwrap();
        assert_eq!(on.admin_listen, Some("127.0.0.1:9464".parse().unwrap()));
    }

    #[test]
    fn database_settings_come_from_file_and_env() {
        let file = FileConfig::parse("[database]\npool_size = 8\nmigrate = true").unwrap();
        let c = Config::from_parts(file.clone(), env(&[])).unwrap();
        assert_eq!((c.database.pool_size, c.database.migrate), (8, true));
        assert_eq!(c.database.acquire_timeout_ms, 3000);
        let c = Config::from_parts(
            file,
            env(&[
                ("A2A_DATABASE_POOL_SIZE", "32"),
                ("A2A_DATABASE_ACQUIRE_TIMEOUT_MS", "500"),
                ("A2A_MIGRATE", "0"),
            ]),
        )
        .unwrap();
        assert_eq!(c.database.pool_size, 32);
        assert_eq!(c.database.acquire_timeout_ms, 500);
        assert!(!c.database.migrate);
        let err = Config::from_parts(FileConfig::default(), env(&[("A2A_MIGRATE", "maybe")]))
            .unwrap_err();
        assert!(err.contains("A2A_MIGRATE"), "{err}");
    }

    #[test]
    fn the_shipped_example_is_valid() {
        let f = FileConfig::parse(include_str!("../../../examples/gateway.toml")).unwrap();
        let c = Config::from_parts(f, env(&[])).unwrap();
        assert_eq!(c.file.default_agent.as_deref(), Some("echo"));
        assert!(c.file.extended_card.is_some());
        let defaults = crate::retention::RetentionConfig::default();
        assert_eq!(c.file.retention.task_ttl, defaults.task_ttl);
        assert_eq!(c.file.retention.max_tasks, defaults.max_tasks);
        assert_eq!(c.file.retention.sweep_interval, defaults.sweep_interval);
        assert!(c.file.limits.rate.ip.is_some());
    }

    /// Debug output (what a log line or a panic message shows) holds no secret of the
    /// configuration: URL passwords, API keys, upstream credentials.
    #[test]
    fn debug_redacts_secrets() {
        let file = FileConfig::parse(
            r#"
            [auth.schemes.key]
            scheme = { apiKeySecurityScheme = { location = "header", name = "X-API-Key" } }
            keys = [{ id = "ci", key = "plain-api-key" }]
            [[agents]]
            name = "up"
            card_url = "http://127.0.0.1:9"
            credentials = { client_id = "robot", client_secret = "client-secret-value" }
            [[agents]]
            name = "up2"
            card_url = "http://127.0.0.1:9"
            credentials = { api_key = "upstream-api-key" }
            "#,
        )
        .unwrap();
        let c = Config::from_parts(
            file,
            env(&[
                ("A2A_DATABASE_URL", "postgres://app:db-password@db/a2a"),
                ("A2A_REDIS_URL", "redis://:redis-password@cache:6379"),
            ]),
        )
        .unwrap();
        let debug = format!("{c:?}");
        for secret in [
            "db-password",
            "redis-password",
            "plain-api-key",
            "client-secret-value",
            "upstream-api-key",
        ] {
            assert!(!debug.contains(secret), "{secret} in {debug}");
        }
        assert!(debug.contains("postgres://app:***@db/a2a"), "{debug}");
        assert!(debug.contains("\"ci\""), "the key id still prints: {debug}");
    }

    #[test]
    fn one_redis_or_a_cluster_not_both() {
        let both = env(&[
            ("A2A_REDIS_URL", "redis://r:6379"),
            ("A2A_REDIS_CLUSTER_NODES", "redis://a:7000,redis://b:7001"),
        ]);
        let err = Config::from_parts(FileConfig::default(), both).unwrap_err();
        assert!(
            err.contains("A2A_REDIS_URL") && err.contains("A2A_REDIS_CLUSTER_NODES"),
            "{err}"
        );
        let cluster = env(&[(
            "A2A_REDIS_CLUSTER_NODES",
            "redis://:pw-secret@a:7000,redis://:pw-secret@b:7001",
        )]);
        let c = Config::from_parts(FileConfig::default(), cluster).unwrap();
        assert!(c.redis_target().unwrap().unwrap().is_cluster());
        assert_eq!(c.mode(), "distributed");
        assert!(!format!("{c:?}").contains("pw-secret"));
        let bad = env(&[("A2A_REDIS_PREFIX", "a{b}:")]);
        assert!(Config::from_parts(FileConfig::default(), bad).is_err());
    }

    #[test]
    fn scenario_is_on_embedded_and_off_elsewhere_unless_listed() {
        let embedded = Config::from_parts(FileConfig::default(), env(&[])).unwrap();
        assert_eq!(embedded.builtin_agents(), ["echo", "scenario"]);
        for var in ["A2A_DATABASE_URL", "A2A_REDIS_URL"] {
            let deployed =
                Config::from_parts(FileConfig::default(), env(&[(var, "postgres://db/a2a")]))
                    .unwrap();
            assert_eq!(deployed.builtin_agents(), ["echo"], "{var}");
        }
        let listed = FileConfig::parse("builtin_agents = [\"echo\", \"scenario\"]").unwrap();
        let c = Config::from_parts(listed, env(&[("A2A_REDIS_URL", "redis://r")])).unwrap();
        assert_eq!(c.builtin_agents(), ["echo", "scenario"]);
        let off = FileConfig::parse("builtin_agents = [\"echo\"]").unwrap();
        let c = Config::from_parts(off.clone(), env(&[])).unwrap();
        assert_eq!(c.builtin_agents(), ["echo"]);
        let on = env(&[("A2A_BUILTIN_AGENTS", "echo, scenario")]);
        let c = Config::from_parts(off, on).unwrap();
        assert_eq!(c.builtin_agents(), ["echo", "scenario"], "the env wins");
        let bad = env(&[("A2A_BUILTIN_AGENTS", "echo,billing")]);
        let err = Config::from_parts(FileConfig::default(), bad).unwrap_err();
        assert!(err.contains("A2A_BUILTIN_AGENTS"), "{err}");
        for bad in [
            "builtin_agents = [\"billing\"]",
            "builtin_agents = [\"echo\", \"echo\"]",
            "[limits.builtin_max_turn_secs]\nbilling = 5",
        ] {
            let err = FileConfig::parse(bad).unwrap_err();
            assert!(
                err.contains("built-in") || err.contains("twice"),
                "{bad}: {err}"
            );
        }
    }

    #[test]
    fn quotas_nest_under_the_flat_limits() {
        let f = FileConfig::parse(
            "[limits]\nmax_streams = 50\nmax_turn_secs = 0\n\
             builtin_max_turn_secs = { scenario = 5 }\n\
             [limits.quotas]\nstreams_per_owner = 3\npush_configs_per_task = 0",
        )
        .unwrap();
        let l = &f.limits;
        assert_eq!((l.max_streams, l.max_turn_secs), (50, 0));
        assert_eq!(l.builtin_max_turn_secs["scenario"], 5);
        assert_eq!(l.quotas.streams_per_owner, 3);
        assert_eq!(l.quotas.push_configs_per_task, 0);
        // Unset keys keep their defaults.
        assert_eq!(l.quotas.running_turns_per_owner, 1_000);
        assert_eq!(l.quotas.push_configs_per_owner, 10_000);
        assert_eq!(l.quotas.open_tasks_per_owner, 10_000);
        assert_eq!(l.quotas.stored_bytes_per_owner, 1 << 30);
        assert_eq!(
            l.quotas.interrupted_task_ttl,
            Some(std::time::Duration::from_secs(86_400))
        );
        let off = FileConfig::parse("[limits.quotas]\ninterrupted_task_ttl = 0").unwrap();
        assert_eq!(off.limits.quotas.interrupted_task_ttl, None);
        let short = FileConfig::parse("[limits.quotas]\ninterrupted_task_ttl = \"90m\"").unwrap();
        assert_eq!(
            short.limits.quotas.interrupted_task_ttl,
            Some(std::time::Duration::from_secs(5_400))
        );
        assert!(FileConfig::parse("[limits.quotas]\ninterrupted_task_ttl = 5").is_err());
        assert!(FileConfig::parse("[limits.quotas]\nstreams = 1").is_err());
        let d = Limits::default();
        assert_eq!(
            (d.max_turn_secs, d.quotas.push_configs_per_task),
            (3_600, 10)
        );
    }

    #[test]
    fn parses_a_full_file() {
        let f = FileConfig::parse(
            r#"
            default_agent = "scenario"
            [card]
            name = "gw"
            push_notifications = false
            [limits]
            max_body_bytes = 2048
            [[extensions]]
            uri = "urn:x"
            required = true
            [extended_card]
            description = "more"
            [[extended_card.skills]]
            id = "secret"
            name = "Secret"
            description = "only for callers who authenticated"
            tags = ["private"]
            "#,
        )
        .unwrap();
        assert_eq!(f.card.name, "gw");
        assert!(!f.card.push_notifications);
        assert_eq!(f.limits.max_body_bytes, 2048);
        assert!(f.extensions[0].required);
        assert_eq!(f.extended_card.unwrap().skills[0].id, "secret");
    }
}

#[cfg(test)]
mod docs {
    /// The gateway's table in docs/configuration.md names every variable the gateway reads.
    #[test]
    fn the_configuration_reference_lists_every_variable() {
        let doc = include_str!("../../../docs/configuration.md");
        // The gateway's table: from its heading to the worker's.
        let section = doc
            .split("\n## The gateway\n")
            .nth(1)
            .and_then(|rest| rest.split("\n## ").next())
            .expect("a section for the gateway");
        for (name, _) in super::ENV_VARS
            .iter()
            .chain(a2a_process::telemetry::ENV_VARS)
        {
            assert!(
                section.contains(&format!("| `{name}` |")),
                "docs/configuration.md (gateway) misses {name}"
            );
        }
    }
}
