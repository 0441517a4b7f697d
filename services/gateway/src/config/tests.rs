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
    let file = FileConfig::parse("listen = \"127.0.0.1:1\"\npublic_url = \"http://file\"").unwrap();
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
    let err =
        Config::from_parts(FileConfig::default(), env(&[("A2A_MIGRATE", "maybe")])).unwrap_err();
    assert!(err.contains("A2A_MIGRATE"), "{err}");
}

#[test]
fn the_shipped_example_is_valid() {
    let f = FileConfig::parse(include_str!("../../../../examples/gateway.toml")).unwrap();
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
            Config::from_parts(FileConfig::default(), env(&[(var, "postgres://db/a2a")])).unwrap();
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

mod docs {
    /// The gateway's table in docs/configuration.md names every variable the gateway reads.
    #[test]
    fn the_configuration_reference_lists_every_variable() {
        let doc = include_str!("../../../../docs/configuration.md");
        // The gateway's table: from its heading to the worker's.
        let section = doc
            .split("\n## The gateway\n")
            .nth(1)
            .and_then(|rest| rest.split("\n## ").next())
            .expect("a section for the gateway");
        for (name, _) in super::super::ENV_VARS
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
