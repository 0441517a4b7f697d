//! The environment's side of the configuration: [`ENV_VARS`], the closed list of variables the
//! gateway reads, and the overlays that apply them over the file's sections (env wins), each
//! checking what it applies so a bad value stops the start with one clear line.

use super::{DatabaseConfig, PushConfig};
/// The outbox relay's settings: the service's, which runs the relay.
pub use crate::service::OutboxSettings;

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
/// `[tls]` with `A2A_TLS_CERT`, `A2A_TLS_KEY` (a pair: both or neither) and
/// `A2A_TLS_CLIENT_CA` over it.
pub(super) fn tls_config(
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

pub(super) fn outbox_settings(
    env: &impl Fn(&str) -> Option<String>,
) -> Result<OutboxSettings, String> {
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
/// `[push]` with `A2A_PUSH_ALLOWED_HOSTS` / `A2A_PUSH_SIGNING_KEYS` applied (env wins), the
/// allowlist checked and the keys read.
pub(super) fn push_config(
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
pub(super) fn database_config(
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
