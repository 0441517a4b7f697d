//! `a2a-loadtest` against an embedded gateway (in-memory store and bus, `echo` and `scenario`
//! agents, started in this process as `main` starts it): each scenario runs briefly over a
//! binding, its JSON report must add up with no error, and a missed threshold must fail the run.

use std::net::SocketAddr;
use std::path::Path;
use std::process::Output;

use a2a_gateway::app;
use a2a_gateway::config::{Config, FileConfig};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

async fn gateway(shutdown: CancellationToken) -> SocketAddr {
    gateway_with(shutdown, "", &[]).await
}

/// [`gateway`] with more configuration (`toml`, appended: upstream agents, `[tls]`, served over
/// TLS then) and environment (a database, a bus...).
async fn gateway_with(shutdown: CancellationToken, toml: &str, env: &[(&str, &str)]) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    // The `push` scenario's receiver runs on 127.0.0.1, internal, so allowed explicitly.
    let toml = format!("[push]\nallowed_hosts = [\"127.0.0.1\"]\n{toml}");
    let mut file = FileConfig::parse(&toml).unwrap();
    file.builtin_agents = Some(vec!["echo".into(), "scenario".into()]);
    let listen = addr.to_string();
    let config = Config::from_parts(file, |k| {
        if k == "A2A_LISTEN" {
            return Some(listen.clone());
        }
        env.iter()
            .find(|(n, _)| *n == k)
            .map(|(_, v)| v.to_string())
    })
    .unwrap();
    if config.database_url.is_some() {
        app::migrate(&config).await.unwrap();
    }
    let svc = app::build(&config, shutdown.clone()).unwrap();
    app::start(&config, &svc).await;
    match config.tls() {
        Some(tls) => {
            let tls = a2a_gateway::tls::ServerTls::load(tls).unwrap();
            tokio::spawn(app::serve_tls(listener, tls, svc, shutdown));
        }
        None => {
            tokio::spawn(app::serve(listener, svc, shutdown));
        }
    }
    addr
}

/// Runs the tool (off the runtime, which keeps serving the gateway meanwhile).
async fn loadtest(args: Vec<String>) -> Output {
    tokio::task::spawn_blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_a2a-loadtest"))
            .args(["--threads", "1"])
            .args(&args)
            .output()
            .unwrap()
    })
    .await
    .unwrap()
}

fn report(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// A clean run: successes only, counts that add up, percentiles in order.
/// Runs the tool, which must succeed, and returns its clean JSON report (written to `json`).
async fn run_clean(scenario: &str, json: &Path, args: Vec<String>) -> Value {
    let out = loadtest(args).await;
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let r = report(json);
    check_clean(&r, scenario);
    r
}

fn check_clean(r: &Value, scenario: &str) {
    assert_eq!(r["scenario"], scenario, "{r}");
    let ok = r["ok"].as_u64().unwrap();
    assert!(ok > 0, "{r}");
    assert_eq!(r["errors"], 0, "{r}");
    assert_eq!(r["latency_ms"]["count"].as_u64().unwrap(), ok, "{r}");
    let per_second: u64 = r["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["ok"].as_u64().unwrap())
        .sum();
    assert_eq!(per_second, ok, "the timeline adds up to the total: {r}");
    let l = &r["latency_ms"];
    let q = |k: &str| l[k].as_f64().unwrap();
    assert!(
        q("p50") > 0.0 && q("p50") <= q("p90") && q("p90") <= q("p99"),
        "{l}"
    );
    assert!(q("p99") <= q("p99_9") && q("p99_9") <= q("max"), "{l}");
    assert!(r["throughput_rps"].as_f64().unwrap() > 0.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenarios_against_an_embedded_gateway() {
    let shutdown = CancellationToken::new();
    let addr = gateway(shutdown.clone()).await;
    let url = format!("http://{addr}");
    let dir = std::env::temp_dir().join(format!("a2a-loadtest-e2e-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = |name: &str| dir.join(name).to_string_lossy().into_owned();
    let args = |s: &[&str]| s.iter().map(|a| a.to_string()).collect::<Vec<_>>();

    // Open loop at 200/s over JSON-RPC: 1.5 s measured after 0.5 s of warm-up = 300 sends.
    let out = loadtest(args(&[
        "send",
        "--url",
        &url,
        "--binding",
        "jsonrpc",
        "--rate",
        "200",
        "--duration",
        "1500ms",
        "--warmup",
        "500ms",
        "--json",
        &path("send.json"),
        "--report",
        &path("send.html"),
        "--max-p99",
        "5s",
        "--min-rps",
        "50",
        "--max-error-rate",
        "0%",
    ]))
    .await;
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let r = report(&dir.join("send.json"));
    check_clean(&r, "send");
    assert_eq!(r["binding"], "JSONRPC");
    assert_eq!(r["ok"], 300, "the open loop sends on its schedule: {r}");
    assert_eq!(r["warmup_ok"], 100);
    assert!(
        r["thresholds"]
            .as_array()
            .unwrap()
            .iter()
            .all(|v| v["passed"] == true)
    );
    let html = std::fs::read_to_string(dir.join("send.html")).unwrap();
    assert_eq!(html.matches("<svg").count(), 2);
    let summary = String::from_utf8_lossy(&out.stdout);
    assert!(summary.contains("300 ok, 0 errors"), "{summary}");

    // Closed loop, a fixed number of streams over HTTP+JSON: time to the first event too.
    let r = run_clean(
        "stream",
        &dir.join("stream.json"),
        args(&[
            "stream",
            "--url",
            &url,
            "--binding",
            "rest",
            "--concurrency",
            "4",
            "--requests",
            "200",
            "--warmup",
            "0s",
            "--json",
            &path("stream.json"),
        ]),
    )
    .await;
    assert_eq!(r["ok"], 200);
    assert_eq!(r["extra_ms"]["first_event"]["count"], 200);

    // Polling over gRPC, and subscribers following the scenario agent's chunks.
    let out = loadtest(args(&[
        "send-async",
        "--url",
        &url,
        "--binding",
        "grpc",
        "--concurrency",
        "4",
        "--duration",
        "1s",
        "--warmup",
        "0s",
        "--json",
        &path("async.json"),
    ]))
    .await;
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    check_clean(&report(&dir.join("async.json")), "send-async");
    let r = run_clean(
        "subscribe",
        &dir.join("subscribe.json"),
        args(&[
            "subscribe",
            "--url",
            &url,
            "--tenant",
            "scenario",
            "--data",
            r#"{"chunks": 5, "delayMs": 40}"#,
            "--subscribers",
            "3",
            "--concurrency",
            "4",
            "--duration",
            "1s",
            "--warmup",
            "0s",
            "--json",
            &path("subscribe.json"),
        ]),
    )
    .await;
    assert!(
        r["latency_ms"]["p50"].as_f64().unwrap() >= 160.0,
        "5 chunks 40 ms apart: {r}"
    );

    // Push deliveries to the built-in receiver, over HTTP+JSON.
    let r = run_clean(
        "push",
        &dir.join("push.json"),
        args(&[
            "push",
            "--url",
            &url,
            "--binding",
            "rest",
            "--concurrency",
            "4",
            "--duration",
            "1s",
            "--warmup",
            "0s",
            "--push-timeout",
            "10s",
            "--json",
            &path("push.json"),
        ]),
    )
    .await;
    assert_eq!(r["extra_ms"]["accepted"]["count"], r["ok"]);

    // Streams dropped and resumed with Last-Event-ID over JSON-RPC: no gap.
    let r = run_clean(
        "resume",
        &dir.join("resume.json"),
        args(&[
            "resume",
            "--url",
            &url,
            "--tenant",
            "scenario",
            "--data",
            r#"{"chunks": 6, "delayMs": 30}"#,
            "--concurrency",
            "4",
            "--duration",
            "1s",
            "--warmup",
            "0s",
            "--json",
            &path("resume.json"),
        ]),
    )
    .await;
    assert_eq!(r["extra_ms"]["resumed_first_event"]["count"], r["ok"]);

    // A mix: each scenario's own latency beside the whole.
    let out = loadtest(args(&[
        "mixed",
        "--url",
        &url,
        "--mix",
        "send=3,stream=1",
        "--concurrency",
        "4",
        "--requests",
        "200",
        "--warmup",
        "0s",
        "--json",
        &path("mixed.json"),
    ]))
    .await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r = report(&dir.join("mixed.json"));
    check_clean(&r, "mixed");
    let part = |k: &str| r["extra_ms"][k]["count"].as_u64().unwrap();
    assert_eq!(part("send") + part("stream"), 200, "{r}");
    assert!(part("send") > part("stream"), "{r}");

    // A threshold no run can meet: exit status 3, the verdict in the report.
    let out = loadtest(args(&[
        "send",
        "--url",
        &url,
        "--concurrency",
        "2",
        "--requests",
        "50",
        "--warmup",
        "0s",
        "--max-p99",
        "1us",
        "--json",
        &path("missed.json"),
    ]))
    .await;
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r = report(&dir.join("missed.json"));
    assert_eq!(r["thresholds"][0]["name"], "max-p99");
    assert_eq!(r["thresholds"][0]["passed"], false);

    // Answers in an unexpected state fail the run (exit 1) and are counted by kind.
    let out = loadtest(args(&[
        "send",
        "--url",
        &url,
        "--concurrency",
        "2",
        "--requests",
        "20",
        "--warmup",
        "0s",
        "--expect-state",
        "failed",
        "--json",
        &path("wrong.json"),
    ]))
    .await;
    assert_eq!(out.status.code(), Some(1));
    let r = report(&dir.join("wrong.json"));
    assert_eq!(r["errors_by_kind"]["check:state"], 20, "{r}");

    // --compare reads two reports.
    let out = loadtest(args(&["--compare", &path("send.json"), &path("send.json")])).await;
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("req/s"));

    shutdown.cancel();
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The raw limits: each row measured, on a database and Redis prefix of the test's own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn baseline_measures_http_postgres_and_redis() {
    let db = a2a_testing::TestDatabase::create().await;
    let redis = a2a_testing::TestRedis::create().await;
    let out = loadtest(
        [
            "baseline",
            "--concurrency",
            "4",
            "--duration",
            "500ms",
            "--warmup",
            "0s",
            "--postgres",
            db.url(),
            "--redis",
            redis.url(),
            "--json",
        ]
        .map(String::from)
        .to_vec(),
    )
    .await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows: Value = serde_json::from_slice(&out.stdout).unwrap();
    let names: Vec<&str> = rows
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["scenario"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["baseline-http", "baseline-postgres", "baseline-redis"]
    );
    for r in rows.as_array().unwrap() {
        check_clean(r, r["scenario"].as_str().unwrap());
    }
    // The table was this run's own and is gone.
    let pool = sqlx::PgPool::connect(db.url()).await.unwrap();
    let left: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM pg_tables WHERE tablename LIKE 'a2a_loadtest_baseline%'",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(left, 0);
}

/// (CA certificate, server certificate, server key), PEM, for 127.0.0.1.
fn test_certificates() -> (String, String, String) {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_pem = ca.self_signed(&ca_key).unwrap().pem();
    let issuer = Issuer::new(ca, ca_key);
    let key = KeyPair::generate().unwrap();
    let server = CertificateParams::new(vec!["127.0.0.1".to_owned()])
        .unwrap()
        .signed_by(&key, &issuer)
        .unwrap();
    (ca_pem, server.pem(), key.serialize_pem())
}

/// `upstream-overhead`: the same sends straight to an agent (a plaintext gateway running echo)
/// and through a gateway fronting it over TLS (`--ca`): two clean reports and the difference.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_overhead_through_a_tls_gateway() {
    let shutdown = CancellationToken::new();
    let agent = format!("http://{}", gateway(shutdown.clone()).await);
    let dir = std::env::temp_dir().join(format!("a2a-loadtest-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (ca, cert, key) = test_certificates();
    for (name, pem) in [("ca.pem", &ca), ("server.pem", &cert), ("server.key", &key)] {
        std::fs::write(dir.join(name), pem).unwrap();
    }
    let toml = format!(
        "[tls]\ncert = {:?}\nkey = {:?}\n\n[[agents]]\nname = \"up\"\ncard_url = \"{agent}\"\n",
        dir.join("server.pem"),
        dir.join("server.key"),
    );
    let front = gateway_with(shutdown.clone(), &toml, &[]).await;

    let json = dir.join("overhead.json");
    let out = loadtest(
        [
            "upstream-overhead",
            "--agent-url",
            &agent,
            "--url",
            &format!("https://{front}"),
            "--tenant",
            "up",
            "--ca",
            &dir.join("ca.pem").to_string_lossy(),
            "--concurrency",
            "2",
            "--requests",
            "100",
            "--warmup",
            "0s",
            "--json",
            &json.to_string_lossy(),
        ]
        .map(String::from)
        .to_vec(),
    )
    .await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let reports = report(&json);
    let [direct, through] = reports.as_array().unwrap().as_slice() else {
        panic!("two reports: {reports}");
    };
    for r in [direct, through] {
        check_clean(r, "send");
        assert_eq!(r["ok"], 100, "{r}");
    }
    assert_eq!(direct["target"], agent.as_str());
    assert_eq!(through["target"], format!("https://{front}"));
    assert!(stdout.contains("upstream overhead"), "{stdout}");
    assert!(stdout.contains("B-A"), "{stdout}");

    // Without the CA the gateway's certificate is not trusted: the run fails, saying why.
    let out = loadtest(
        [
            "send",
            "--url",
            &format!("https://{front}"),
            "--tenant",
            "up",
            "--requests",
            "5",
        ]
        .map(String::from)
        .to_vec(),
    )
    .await;
    assert!(!out.status.success());

    shutdown.cancel();
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `subscribe --subscribe-url`: tasks created on one replica, followed on another (both on one
/// PostgreSQL database and one Redis): every subscriber sees every task to its end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscribers_on_another_replica() {
    let db = a2a_testing::TestDatabase::create().await;
    let redis = a2a_testing::TestRedis::create().await;
    let shutdown = CancellationToken::new();
    let env = [
        ("A2A_DATABASE_URL", db.url()),
        ("A2A_REDIS_URL", redis.url()),
        ("A2A_REDIS_PREFIX", redis.prefix()),
    ];
    let a = gateway_with(shutdown.clone(), "", &env).await;
    let b = gateway_with(shutdown.clone(), "", &env).await;
    let json =
        std::env::temp_dir().join(format!("a2a-loadtest-fanout-{}.json", std::process::id()));
    let r = run_clean(
        "subscribe",
        &json,
        [
            "subscribe",
            "--url",
            &format!("http://{a}"),
            "--subscribe-url",
            &format!("http://{b}"),
            "--tenant",
            "scenario",
            "--data",
            r#"{"chunks": 5, "delayMs": 100}"#,
            "--subscribers",
            "2",
            "--concurrency",
            "4",
            "--requests",
            "20",
            "--warmup",
            "0s",
            "--json",
            &json.to_string_lossy(),
        ]
        .map(String::from)
        .to_vec(),
    )
    .await;
    assert_eq!(r["ok"], 20, "{r}");
    assert_eq!(r["extra_ms"]["subscribed"]["count"], 20, "{r}");
    shutdown.cancel();
    let _ = std::fs::remove_file(&json);
}
