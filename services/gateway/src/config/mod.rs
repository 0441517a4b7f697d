//! Configuration: an optional TOML file (`A2A_CONFIG`) and the environment, env winning.
//! Parsing has no side effects, so tests build a [`Config`] from a map.
//!
//! The closed list of environment variables is [`ENV_VARS`] plus the logging and tracing ones
//! (`a2a_process::telemetry::ENV_VARS`); the README's table mirrors them.
//!
//! [`Config`] (here) is what the gateway runs with: the file's sections ([`file`]) with the
//! environment's overrides applied and checked ([`env`]).

use std::net::SocketAddr;
use std::path::Path;

mod env;
mod file;
mod service;

pub use env::{ENV_VARS, OutboxSettings};
use env::{database_config, outbox_settings, push_config, tls_config};
use file::check_builtin_agents;
pub use file::{
    CardConfig, DatabaseConfig, DispatchConfig, ExtendedCardConfig, ExtensionConfig, FileConfig,
    IdempotencyConfig, Limits, PushConfig, SkillConfig,
};

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
                &self
                    .redis_cluster_nodes
                    .as_deref()
                    .map(a2a_store::redact_urls),
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

#[cfg(test)]
mod tests;
