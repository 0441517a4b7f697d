//! The worker's configuration, from the environment only (tests pass a map to [`WorkerConfig::load`]).
//! The closed list of variables is [`ENV_VARS`] plus the logging and tracing ones
//! (`a2a_process::telemetry::ENV_VARS`); the README's table mirrors them.

use std::net::SocketAddr;
use std::time::Duration;

pub use a2a_delivery::{MAX_RETRY_AFTER, RetryPolicy};
use a2a_push::{AddressPolicy, SigningKeys};

/// Every environment variable the worker reads, with its meaning (the README mirrors this).
pub const ENV_VARS: &[(&str, &str)] = &[
    ("A2A_DATABASE_URL", "PostgreSQL URL (required)"),
    (
        "A2A_REDIS_URL",
        "Redis URL (`serve` needs it or A2A_REDIS_CLUSTER_NODES)",
    ),
    (
        "A2A_REDIS_CLUSTER_NODES",
        "Redis Cluster seed nodes, `redis://h1:7000,redis://h2:7001,...`, instead of \
         A2A_REDIS_URL (not both)",
    ),
    (
        "A2A_REDIS_PREFIX",
        "prefix of every Redis key; the gateway's value; default `a2a:`",
    ),
    (
        "A2A_REDIS_PARTITIONS",
        "partitions of the worker's input; the gateways' value; default 8",
    ),
    (
        "A2A_PUBLIC_URL",
        "the gateway's public base URL: the `iss` of delivery JWTs; default http://127.0.0.1:8080",
    ),
    (
        "A2A_PUSH_SIGNING_KEYS",
        "signing keys, the gateway's value: comma separated `[kid=]path` of PKCS#8 PEM files, \
         the first signs (required for `serve`)",
    ),
    (
        "A2A_PUSH_ALLOWED_HOSTS",
        "internal webhook hosts and networks allowed (host names, IP literals, CIDRs; `*` = all); \
         default none",
    ),
    (
        "A2A_WORKER_LISTEN",
        "address of /metrics and /healthz; default 127.0.0.1:9090",
    ),
    (
        "A2A_WORKER_NAME",
        "consumer name in the group (unique per process); default <host>-<pid>-<random>",
    ),
    ("A2A_WORKER_GROUP", "consumer group name; default `push`"),
    (
        "A2A_WORKER_CONCURRENCY",
        "webhook attempts in flight at once, all destinations (a task's events go out in \
         order); default 256",
    ),
    (
        "A2A_WORKER_DESTINATION_CONCURRENCY",
        "attempts in flight at once to one webhook host (host:port): a slow or hanging \
         destination holds at most this many; default 16",
    ),
    (
        "A2A_WORKER_OWNER_CONCURRENCY",
        "attempts in flight at once for the tasks of one owner; default 64",
    ),
    (
        "A2A_WORKER_OWNER_TASKS",
        "tasks of one owner in delivery at once in this worker; more wait in the ledger for \
         the sweep; default 1024",
    ),
    (
        "A2A_WORKER_QUEUE",
        "events queued in memory (and tasks in delivery), all owners; beyond it entries are \
         left to the sweep; default 16384",
    ),
    (
        "A2A_WORKER_MAX_RETRY_AFTER_SECS",
        "longest Retry-After honoured (a webhook asking for more is retried after this); \
         default 60",
    ),
    (
        "A2A_WORKER_SWEEP_INTERVAL_MS",
        "how often the reconciliation sweep looks for tasks whose delivery is behind their \
         event log (and how long before it looks at the same task again); default 5000",
    ),
    (
        "A2A_WORKER_SWEEP_BATCH",
        "tasks the sweep examines per statement; default 500",
    ),
    (
        "A2A_WORKER_DEAD_LETTERS_PER_OWNER",
        "dead letters kept per owner, the newest; 0 = no cap; default 10000",
    ),
    (
        "A2A_WORKER_MAX_ATTEMPTS",
        "attempts per event and webhook before it becomes a dead letter; default 8",
    ),
    (
        "A2A_WORKER_ATTEMPT_TIMEOUT_MS",
        "timeout of one attempt (connect to end of response); default 10000",
    ),
    (
        "A2A_WORKER_BACKOFF_BASE_MS",
        "delay before the second attempt; doubles per attempt, with jitter; default 500",
    ),
    (
        "A2A_WORKER_BACKOFF_MAX_MS",
        "longest delay between attempts (Retry-After may ask for more, up to \
         A2A_WORKER_MAX_RETRY_AFTER_SECS); default 60000",
    ),
    (
        "A2A_WORKER_CLAIM_IDLE_MS",
        "entries pending this long on a worker that stopped renewing them are taken over; \
         default 60000",
    ),
    (
        "A2A_WORKER_LEASE_MS",
        "lease of a task's deliveries, renewed while a worker works on it; a dead worker's \
         tasks move on after it; default 30000",
    ),
    (
        "A2A_WORKER_TOKEN_TTL_SECS",
        "lifetime of a delivery JWT (`exp - iat`); default 300",
    ),
    (
        "A2A_WORKER_LOG_RETENTION_HOURS",
        "delivery log rows (`push_delivery_log`) older than this are deleted (dead letters go \
         with their task's retention); 0 = keep forever; default 168 (7 days)",
    ),
    (
        "A2A_DATABASE_POOL_SIZE",
        "PostgreSQL connections; default 16",
    ),
    ("A2A_MIGRATE", "1 = apply migrations at start; default 0"),
    ("RUST_LOG", "log filter; default info"),
];

#[derive(Clone)]
pub struct WorkerConfig {
    pub database_url: String,
    pub redis_url: Option<String>,
    /// Redis Cluster seed nodes (`A2A_REDIS_CLUSTER_NODES`), instead of `redis_url`.
    pub redis_cluster_nodes: Option<String>,
    pub redis_prefix: String,
    /// Partitions of the input (`A2A_REDIS_PARTITIONS`): the gateways' value.
    pub redis_partitions: usize,
    /// `iss` of every delivery JWT: the gateway's public URL, which serves the JWKS.
    pub issuer: String,
    pub keys: SigningKeys,
    pub policy: AddressPolicy,
    pub listen: SocketAddr,
    pub name: String,
    pub group: String,
    pub concurrency: usize,
    /// The fair-delivery bounds (per destination, per owner, the queue).
    pub limits: a2a_delivery::Limits,
    pub sweep_interval: Duration,
    pub sweep_batch: u32,
    pub dead_letters_per_owner: u64,
    pub retry: RetryPolicy,
    pub attempt_timeout: Duration,
    pub claim_idle: Duration,
    pub lease: Duration,
    pub token_ttl: Duration,
    /// Age after which delivery log rows are deleted; zero keeps them forever.
    pub log_retention: Duration,
    pub pool_size: u32,
    pub migrate: bool,
}

/// The URLs print without their passwords (the signing keys print only their ids).
impl std::fmt::Debug for WorkerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkerConfig")
            .field("database_url", &a2a_store::redact_url(&self.database_url))
            .field(
                "redis_url",
                &self.redis_url.as_deref().map(a2a_store::redact_url),
            )
            .field(
                "redis_cluster_nodes",
                &self
                    .redis_cluster_nodes
                    .as_deref()
                    .map(a2a_store::redact_urls),
            )
            .field("redis_prefix", &self.redis_prefix)
            .field("redis_partitions", &self.redis_partitions)
            .field("issuer", &self.issuer)
            .field("keys", &self.keys)
            .field("policy", &self.policy)
            .field("listen", &self.listen)
            .field("name", &self.name)
            .field("group", &self.group)
            .field("concurrency", &self.concurrency)
            .field("limits", &self.limits)
            .field("sweep_interval", &self.sweep_interval)
            .field("sweep_batch", &self.sweep_batch)
            .field("dead_letters_per_owner", &self.dead_letters_per_owner)
            .field("retry", &self.retry)
            .field("attempt_timeout", &self.attempt_timeout)
            .field("claim_idle", &self.claim_idle)
            .field("lease", &self.lease)
            .field("token_ttl", &self.token_ttl)
            .field("log_retention", &self.log_retention)
            .field("pool_size", &self.pool_size)
            .field("migrate", &self.migrate)
            .finish()
    }
}

/// The longest delivery log retention accepted (100 years, beyond any use): a value so large
/// that `now() - retention` overflows in PostgreSQL would fail every pass instead of keeping the
/// log; 0 is how to keep it forever.
pub const MAX_LOG_RETENTION_HOURS: u64 = 876_000;

impl WorkerConfig {
    pub fn from_env() -> Result<Self, String> {
        Self::load(|k| std::env::var(k).ok())
    }

    /// Builds the configuration from an environment lookup. Reads the signing key files.
    pub fn load(env: impl Fn(&str) -> Option<String>) -> Result<Self, String> {
        let get = |k: &str| {
            env(k)
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty())
        };
        let ms = |k: &str, default: u64| -> Result<Duration, String> {
            Ok(Duration::from_millis(number(k, get(k), default)?))
        };
        let database_url = get("A2A_DATABASE_URL").ok_or("A2A_DATABASE_URL is required")?;
        let listen_raw = get("A2A_WORKER_LISTEN").unwrap_or_else(|| "127.0.0.1:9090".into());
        let listen = listen_raw
            .parse()
            .map_err(|e| format!("A2A_WORKER_LISTEN={listen_raw:?} is not an address: {e}"))?;
        let policy = AddressPolicy::parse(&get(a2a_push::ALLOWED_HOSTS_VAR).unwrap_or_default())
            .map_err(|e| format!("{}: {e}", a2a_push::ALLOWED_HOSTS_VAR))?;
        let keys = SigningKeys::load(&get(a2a_push::SIGNING_KEYS_VAR).unwrap_or_default())
            .map_err(|e| format!("{}: {e}", a2a_push::SIGNING_KEYS_VAR))?;
        let issuer = get("A2A_PUBLIC_URL")
            .unwrap_or_else(|| "http://127.0.0.1:8080".into())
            .trim_end_matches('/')
            .to_owned();
        let retry = RetryPolicy {
            max_attempts: number("A2A_WORKER_MAX_ATTEMPTS", get("A2A_WORKER_MAX_ATTEMPTS"), 8)?
                as u32,
            base: ms("A2A_WORKER_BACKOFF_BASE_MS", 500)?,
            max: ms("A2A_WORKER_BACKOFF_MAX_MS", 60_000)?,
            max_retry_after: Duration::from_secs(number(
                "A2A_WORKER_MAX_RETRY_AFTER_SECS",
                get("A2A_WORKER_MAX_RETRY_AFTER_SECS"),
                MAX_RETRY_AFTER.as_secs(),
            )?),
        };
        if retry.max_attempts == 0 {
            return Err("A2A_WORKER_MAX_ATTEMPTS must be at least 1".into());
        }
        let retention_hours = number(
            "A2A_WORKER_LOG_RETENTION_HOURS",
            get("A2A_WORKER_LOG_RETENTION_HOURS"),
            168,
        )?;
        if retention_hours > MAX_LOG_RETENTION_HOURS {
            return Err(format!(
                "A2A_WORKER_LOG_RETENTION_HOURS must be at most {MAX_LOG_RETENTION_HOURS} \
                 (0 keeps the log forever)"
            ));
        }
        let concurrency =
            number("A2A_WORKER_CONCURRENCY", get("A2A_WORKER_CONCURRENCY"), 256)?.max(1) as usize;
        let count = |k: &str, default: u64| -> Result<usize, String> {
            Ok(usize::try_from(number(k, get(k), default)?.max(1)).unwrap_or(usize::MAX))
        };
        let limits = a2a_delivery::Limits {
            concurrency,
            per_destination: count("A2A_WORKER_DESTINATION_CONCURRENCY", 16)?,
            per_owner: count("A2A_WORKER_OWNER_CONCURRENCY", 64)?,
            owner_tasks: count("A2A_WORKER_OWNER_TASKS", 1024)?,
            queue: count("A2A_WORKER_QUEUE", 16_384)?,
        };
        let config = Self {
            database_url,
            redis_url: get("A2A_REDIS_URL"),
            redis_cluster_nodes: get("A2A_REDIS_CLUSTER_NODES"),
            redis_prefix: get("A2A_REDIS_PREFIX").unwrap_or_else(|| "a2a:".into()),
            redis_partitions: a2a_bus::keys::partitions(get("A2A_REDIS_PARTITIONS").as_deref())?,
            issuer,
            keys,
            policy,
            listen,
            name: get("A2A_WORKER_NAME").unwrap_or_else(default_name),
            group: get("A2A_WORKER_GROUP").unwrap_or_else(|| "push".into()),
            concurrency,
            limits,
            sweep_interval: ms("A2A_WORKER_SWEEP_INTERVAL_MS", 5000)?,
            sweep_batch: u32::try_from(
                number("A2A_WORKER_SWEEP_BATCH", get("A2A_WORKER_SWEEP_BATCH"), 500)?.max(1),
            )
            .unwrap_or(u32::MAX),
            dead_letters_per_owner: number(
                "A2A_WORKER_DEAD_LETTERS_PER_OWNER",
                get("A2A_WORKER_DEAD_LETTERS_PER_OWNER"),
                10_000,
            )?,
            retry,
            attempt_timeout: ms("A2A_WORKER_ATTEMPT_TIMEOUT_MS", 10_000)?,
            claim_idle: ms("A2A_WORKER_CLAIM_IDLE_MS", 60_000)?,
            lease: ms("A2A_WORKER_LEASE_MS", 30_000)?,
            token_ttl: Duration::from_secs(number(
                "A2A_WORKER_TOKEN_TTL_SECS",
                get("A2A_WORKER_TOKEN_TTL_SECS"),
                300,
            )?),
            log_retention: Duration::from_secs(retention_hours * 3600),
            pool_size: number("A2A_DATABASE_POOL_SIZE", get("A2A_DATABASE_POOL_SIZE"), 16)? as u32,
            migrate: matches!(get("A2A_MIGRATE").as_deref(), Some("1" | "true" | "yes")),
        };
        a2a_bus::keys::check_prefix(&config.redis_prefix)?;
        a2a_bus::RedisTarget::from_settings(
            config.redis_url.as_deref(),
            config.redis_cluster_nodes.as_deref(),
        )?;
        for (name, d) in [
            ("A2A_WORKER_ATTEMPT_TIMEOUT_MS", config.attempt_timeout),
            ("A2A_WORKER_CLAIM_IDLE_MS", config.claim_idle),
            ("A2A_WORKER_LEASE_MS", config.lease),
            ("A2A_WORKER_SWEEP_INTERVAL_MS", config.sweep_interval),
        ] {
            if d < Duration::from_millis(100) {
                return Err(format!("{name} must be at least 100"));
            }
        }
        Ok(config)
    }

    /// What `serve` needs beyond the database: Redis and a signing key.
    pub fn check_serve(&self) -> Result<a2a_bus::RedisTarget, String> {
        if self.keys.is_empty() {
            return Err(format!(
                "{} is required: every delivery is signed (create a key with `a2a-worker keygen`)",
                a2a_push::SIGNING_KEYS_VAR
            ));
        }
        a2a_bus::RedisTarget::from_settings(
            self.redis_url.as_deref(),
            self.redis_cluster_nodes.as_deref(),
        )?
        .ok_or_else(|| {
            "A2A_REDIS_URL (or A2A_REDIS_CLUSTER_NODES) is required: the worker reads the event \
             stream"
                .into()
        })
    }
}

fn number(name: &str, value: Option<String>, default: u64) -> Result<u64, String> {
    match value {
        None => Ok(default),
        Some(v) => v
            .parse()
            .map_err(|_| format!("{name}={v:?} is not a whole number")),
    }
}

fn default_name() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "worker".into());
    format!("{host}-{}-{:04x}", std::process::id(), fastrand::u16(..))
}

#[cfg(test)]
mod tests {
    use super::*;
    use a2a_testing::env_of as env;

    #[test]
    fn debug_redacts_the_url_passwords() {
        let c = WorkerConfig::load(env(&[
            ("A2A_DATABASE_URL", "postgres://app:db-password@db/a2a"),
            ("A2A_REDIS_URL", "redis://:redis-password@cache:6379"),
        ]))
        .unwrap();
        let debug = format!("{c:?}");
        assert!(!debug.contains("db-password"), "{debug}");
        assert!(!debug.contains("redis-password"), "{debug}");
        assert!(debug.contains("postgres://app:***@db/a2a"), "{debug}");
        assert!(debug.contains("redis://:***@cache:6379"), "{debug}");
    }

    #[test]
    fn one_redis_or_a_cluster_not_both() {
        let both = WorkerConfig::load(env(&[
            ("A2A_DATABASE_URL", "postgres://x/y"),
            ("A2A_REDIS_URL", "redis://r:6379"),
            ("A2A_REDIS_CLUSTER_NODES", "redis://a:7000"),
        ]));
        let err = both.err().unwrap();
        assert!(err.contains("A2A_REDIS_CLUSTER_NODES"), "{err}");
        let cluster = WorkerConfig::load(env(&[
            ("A2A_DATABASE_URL", "postgres://x/y"),
            (
                "A2A_REDIS_CLUSTER_NODES",
                "redis://:pw-secret@a:7000,redis://:pw-secret@b:7001",
            ),
        ]))
        .unwrap();
        assert!(!format!("{cluster:?}").contains("pw-secret"));
    }

    #[test]
    fn defaults_follow_the_issue() {
        let c = WorkerConfig::load(env(&[("A2A_DATABASE_URL", "postgres://x/y")])).unwrap();
        assert_eq!(c.retry.max_attempts, 8);
        assert_eq!(c.attempt_timeout, Duration::from_secs(10));
        assert_eq!(c.redis_prefix, "a2a:");
        assert!(c.check_serve().is_err(), "no key, no Redis");
        assert!(WorkerConfig::load(env(&[])).is_err());
        let bad = WorkerConfig::load(env(&[
            ("A2A_DATABASE_URL", "postgres://x/y"),
            ("A2A_WORKER_MAX_ATTEMPTS", "many"),
        ]));
        assert!(bad.unwrap_err().contains("A2A_WORKER_MAX_ATTEMPTS"));
    }

    #[test]
    fn log_retention_is_in_hours_and_zero_keeps_forever() {
        let with = |hours: &str| {
            WorkerConfig::load(env(&[
                ("A2A_DATABASE_URL", "postgres://x/y"),
                ("A2A_WORKER_LOG_RETENTION_HOURS", hours),
            ]))
        };
        let c = WorkerConfig::load(env(&[("A2A_DATABASE_URL", "postgres://x/y")])).unwrap();
        assert_eq!(c.log_retention, Duration::from_secs(7 * 24 * 3600));
        assert_eq!(
            with("2").unwrap().log_retention,
            Duration::from_secs(2 * 3600)
        );
        assert!(with("0").unwrap().log_retention.is_zero());
        assert!(
            with("a week")
                .unwrap_err()
                .contains("A2A_WORKER_LOG_RETENTION_HOURS")
        );
        assert!(with("876001").unwrap_err().contains("at most 876000"));
        assert!(with("876000").is_ok());
    }

    #[test]
    fn backoff_doubles_with_jitter_and_honours_retry_after() {
        let p = RetryPolicy {
            max_attempts: 8,
            base: Duration::from_millis(500),
            max: Duration::from_secs(60),
            max_retry_after: MAX_RETRY_AFTER,
        };
        for _ in 0..100 {
            let d1 = p.delay(1, None);
            assert!(d1 >= Duration::from_millis(250) && d1 <= Duration::from_millis(500));
            let d4 = p.delay(4, None);
            assert!(d4 >= Duration::from_secs(2) && d4 <= Duration::from_secs(4));
            assert!(p.delay(30, None) <= Duration::from_secs(60));
        }
        let asked = p.delay(1, Some(Duration::from_secs(7)));
        assert_eq!(asked, Duration::from_secs(7));
        assert_eq!(p.delay(1, Some(Duration::from_secs(3600))), MAX_RETRY_AFTER);
    }
}

#[cfg(test)]
mod docs {
    /// The worker's table in docs/configuration.md names every variable the worker reads.
    #[test]
    fn the_configuration_reference_lists_every_variable() {
        let doc = include_str!("../../../docs/configuration.md");
        // The worker's table: from its heading to the next.
        let section = doc
            .split("\n## `a2a-worker`\n")
            .nth(1)
            .and_then(|rest| rest.split("\n## ").next())
            .expect("a section for a2a-worker");
        for (name, _) in super::ENV_VARS
            .iter()
            .chain(a2a_process::telemetry::ENV_VARS)
        {
            assert!(
                section.contains(&format!("| `{name}` |")),
                "docs/configuration.md (worker) misses {name}"
            );
        }
    }
}
