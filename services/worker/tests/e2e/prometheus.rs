//! The dashboard and the alert rules against a real Prometheus: `prometheus` (the Debian package,
//! installed by `scripts/prometheus`) scrapes a real gateway's admin listener (PostgreSQL, Redis,
//! an upstream agent) and a real `a2a-worker` every second while a small load runs over the three
//! bindings (sends, a stream, an idempotent send, errors, a delivered and a dead-lettered push).
//! Then every PromQL expression of `deploy/grafana/a2a-gateway.json` and every rule of
//! `deploy/prometheus/alerts.yml` is evaluated through the HTTP API: none may fail, and each
//! must return series unless it is listed below with the reason it may be empty here.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use a2a_client::{A2aClient, Binding};
use a2a_gateway::app;
use a2a_gateway::config::{Config, FileConfig};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::harness::Deployment;
use crate::receiver::Receiver;

/// Dashboard expressions (by a part of their text) that may return no series in this test.
const DASHBOARD_MAY_BE_EMPTY: &[(&str, &str)] = &[
    (
        "a2a_auth_failures_total",
        "the test gateway has no [auth]: no caller is refused",
    ),
    (
        "a2a_bus_redis_reconnects_total",
        "the counter appears on the first Redis reconnect; Redis stays up",
    ),
    (
        "a2a_bus_delivery_lag_seconds",
        "measures events the reader hands over that another process published; this \
         deployment has one gateway, whose own events reach its subscribers at publish (it was \
         seen before only when the reader won the race against the publish's reply, for the \
         entries of a task's creating commit, which no longer go to Redis)",
    ),
    (
        "a2a_worker_reclaimed_total",
        "appears once the worker's XAUTOCLAIM round runs; no worker died",
    ),
    (
        "a2a_rate_limited_total",
        "the test gateway sets no [limits.rate]: nothing is refused",
    ),
    (
        "a2a_rate_limit_fail_open_total",
        "no shared (Redis) rate limiter is configured",
    ),
    (
        "a2a_quota_refusals_total",
        "the load stays far below the default quotas",
    ),
    (
        "a2a_retention_deleted_tasks_total",
        "no task outlives [retention] task_ttl during the test",
    ),
    (
        "a2a_tls_handshake_failures_total",
        "the test gateway listens without TLS",
    ),
    (
        "a2a_upstream_card_rejected_total",
        "the test's upstream card is not checked for a signature",
    ),
    (
        "a2a_connections_refused_total",
        "the load stays far below [limits.connections]: no connection is refused",
    ),
    (
        "a2a_connections_closed_total",
        "no client is slow enough for a read timeout",
    ),
    (
        "a2a_request_loops_total",
        "the test's upstream does not route back: no loop",
    ),
    (
        "a2a_turns_fenced_total",
        "no replica dies: no task is taken over",
    ),
    (
        "a2a_dispatch_lease_lapsed_waits_total",
        "PostgreSQL stays up: the dispatch lease never lapses",
    ),
    (
        "a2a_push_tap_",
        "the in-process push tap exists in embedded mode only; the test runs a2a-worker",
    ),
    (
        "a2a_worker_sweep_",
        "the counters appear after the worker's first reconciliation sweep",
    ),
];

/// Alert signals (by alert name) that may return no series in this test.
const ALERTS_MAY_BE_EMPTY: &[(&str, &str)] = &[
    (
        "A2AStoreUnavailable",
        "PostgreSQL stays up: no store operation ends `unavailable`",
    ),
    (
        "A2ARequestLoop",
        "the test's upstream does not route back: no loop",
    ),
];

/// What `$__rate_interval` and friends become: the test's data is a few seconds old at most, and
/// a scrape every second gives any 1-minute window enough samples.
const GRAFANA_VARIABLES: &[(&str, &str)] = &[
    ("$__rate_interval", "1m"),
    ("${__rate_interval}", "1m"),
    ("$__interval", "1s"),
    ("${__interval}", "1s"),
    ("$__range", "1m"),
    // The release selectors (namespace, job, instance), at "All".
    ("$namespace", ".*"),
    ("$job", ".*"),
    ("$instance", ".*"),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn dashboard_and_alert_expressions_evaluate_on_a_real_prometheus() {
    let (prometheus, promtool) = tools();
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let alerts = repo
        .join("deploy/prometheus/alerts.yml")
        .canonicalize()
        .unwrap();
    let dashboard: Value = serde_json::from_slice(
        &std::fs::read(repo.join("deploy/grafana/a2a-gateway.json")).unwrap(),
    )
    .expect("the dashboard is JSON");

    // An upstream agent: another gateway (embedded, its echo agent), behind `[[agents]] up`.
    let upstream = EmbeddedGateway::start().await;
    let toml = format!(
        "[[agents]]\nname = \"up\"\nhealth_interval_secs = 1\ncard_url = \"{}\"\n",
        upstream.url
    );
    let dep = Deployment::with_admin("127.0.0.1", &toml).await;
    let admin = dep.admin.expect("an admin listener");
    // Two attempts, so that the push to a closed port becomes a dead letter within a second.
    let worker = dep.worker(&[("A2A_WORKER_MAX_ATTEMPTS", "2")]);

    let dir = TempDir::new();
    let config = dir.0.join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n\
             rule_files:\n  - {alerts}\n\
             scrape_configs:\n\
             \x20 - job_name: a2a-gateway\n    static_configs:\n      - targets: ['{admin}']\n\
             \x20 - job_name: a2a-worker\n    static_configs:\n      - targets: ['{worker}']\n",
            alerts = alerts.display(),
            worker = worker.addr,
        ),
    )
    .unwrap();
    run(Command::new(&promtool)
        .arg("check")
        .arg("config")
        .arg(&config));
    run(Command::new(&promtool)
        .arg("check")
        .arg("rules")
        .arg(&alerts));

    let port = free_port();
    let prom = PrometheusProcess::start(&prometheus, &config, &dir.0.join("data"), port);
    let api = Api::new(port);
    api.wait_until_targets_up(Duration::from_secs(15)).await;

    // The load, in two rounds a few scrapes apart so that rates have something to differ by.
    let receiver = Receiver::start().await;
    for round in 0..2 {
        load(&dep, &receiver, round).await;
        tokio::time::sleep(Duration::from_millis(2500)).await;
    }
    receiver
        .wait_for(Duration::from_secs(10), |r| {
            r.iter()
                .any(|r| crate::receiver::describe(&r.json).contains("COMPLETED"))
        })
        .await;
    // Until the worker's delivery and dead-letter counters are in Prometheus, plus two scrapes.
    api.wait_for_series("a2a_worker_dead_letters_total", Duration::from_secs(15))
        .await;
    api.wait_for_series(
        "a2a_worker_deliveries_total{outcome=\"delivered\"}",
        Duration::from_secs(15),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(2500)).await;

    let mut failures = Vec::new();
    let mut evaluated = 0;
    for (title, expr) in dashboard_expressions(&dashboard) {
        let query = GRAFANA_VARIABLES
            .iter()
            .fold(expr.clone(), |q, (var, value)| q.replace(var, value));
        assert!(
            !query.contains('$'),
            "an unknown Grafana variable in {query}"
        );
        let may_be_empty = DASHBOARD_MAY_BE_EMPTY
            .iter()
            .any(|(part, _)| query.contains(part));
        evaluated += 1;
        if let Err(e) = api.check(&query, may_be_empty).await {
            failures.push(format!("dashboard panel {title:?}: {query}: {e}"));
        }
    }

    // The rules as Prometheus loaded them: each must have evaluated without error, and its
    // signal (the expression without its threshold) must have data.
    let rules = api.get("/api/v1/rules", &[]).await;
    let rules: Vec<Value> = rules["data"]["groups"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g["rules"].as_array().unwrap().clone())
        .collect();
    assert_eq!(
        rules.len(),
        12,
        "every rule of alerts.yml is loaded: {rules:?}"
    );
    for rule in &rules {
        let name = rule["name"].as_str().unwrap();
        let expr = rule["query"].as_str().unwrap();
        if rule["health"] != "ok" {
            failures.push(format!(
                "alert {name}: health {} {}",
                rule["health"], rule["lastError"]
            ));
        }
        evaluated += 1;
        if let Err(e) = api.check(expr, true).await {
            failures.push(format!("alert {name}: {expr}: {e}"));
        }
        let may_be_empty = ALERTS_MAY_BE_EMPTY.iter().any(|(n, _)| *n == name);
        for signal in signals(expr) {
            evaluated += 1;
            if let Err(e) = api.check(&signal, may_be_empty).await {
                failures.push(format!("alert {name}, signal {signal}: {e}"));
            }
        }
    }
    assert!(evaluated > 50, "only {evaluated} expressions evaluated");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    drop(prom);
    drop(upstream);
}

/// One round: over each binding a send to echo, a streaming send and a GetTask of an unknown
/// task (TASK_NOT_FOUND); over JSON-RPC an idempotent send, a send to the upstream agent, a
/// scenario task with a push config delivered to `receiver`, and one to a closed port.
async fn load(dep: &Deployment, receiver: &Receiver, round: usize) {
    let bindings = [
        Binding::JsonRpc {
            url: format!("{}/a2a/jsonrpc", dep.gateway_url),
        },
        Binding::Rest {
            url: format!("{}/a2a/rest", dep.gateway_url),
        },
        Binding::Grpc {
            endpoint: dep.gateway_url.clone(),
        },
    ];
    for binding in bindings {
        let client = A2aClient::new(binding).unwrap();
        client.send_message(request("echo", "hello")).await.unwrap();
        let mut stream = client
            .send_streaming_message(request("echo", "stream"))
            .await
            .unwrap();
        while futures::StreamExt::next(&mut stream).await.is_some() {}
        let missing = serde_json::from_value(json!({"id": uuid::Uuid::new_v4().to_string()}));
        assert!(client.get_task(missing.unwrap()).await.is_err());
    }
    let up = dep
        .rpc(
            "SendMessage",
            json!({"tenant": "up", "message": message("via upstream")}),
        )
        .await;
    assert!(
        up.get("error").is_none(),
        "send to the upstream agent: {up}"
    );
    let keyed = reqwest::Client::new()
        .post(format!("{}/a2a/jsonrpc", dep.gateway_url))
        .header("a2a-version", "1.0")
        .header("idempotency-key", format!("prometheus-{round}"))
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
                      "params": {"message": message("keyed")}}))
        .send()
        .await
        .unwrap();
    assert!(keyed.status().is_success());
    let push = |url: String| json!({"url": url});
    dep.scenario_task(json!({"chunks": 0}), push(receiver.url("/hook")), false)
        .await;
    dep.scenario_task(
        json!({"chunks": 0}),
        push(format!("http://127.0.0.1:{}/gone", free_port())),
        false,
    )
    .await;
}

fn message(text: &str) -> Value {
    json!({"messageId": uuid::Uuid::new_v4().to_string(), "role": "ROLE_USER",
           "parts": [{"text": text}]})
}

fn request(tenant: &str, text: &str) -> a2a_types::v1::SendMessageRequest {
    serde_json::from_value(json!({"tenant": tenant, "message": message(text)})).unwrap()
}

/// Every `expr` of every panel (rows included), with the panel's title.
fn dashboard_expressions(dashboard: &Value) -> Vec<(String, String)> {
    fn walk(panels: &Value, out: &mut Vec<(String, String)>) {
        for panel in panels.as_array().into_iter().flatten() {
            for target in panel["targets"].as_array().into_iter().flatten() {
                if let Some(expr) = target["expr"].as_str() {
                    out.push((
                        panel["title"].as_str().unwrap_or("").to_owned(),
                        expr.to_owned(),
                    ));
                }
            }
            walk(&panel["panels"], out);
        }
    }
    let mut out = Vec::new();
    walk(&dashboard["panels"], &mut out);
    assert!(!out.is_empty(), "the dashboard has no expressions");
    out
}

/// An alert's signals: its expression split at `and`, each without its trailing
/// `<comparison> <number>` (the rules are written in that shape).
/// `absent(...)` companions have no signal of their own (they fire on no data).
fn signals(expr: &str) -> Vec<String> {
    if expr.trim_start().starts_with("absent(") {
        return Vec::new();
    }
    expr.split(" and ")
        .map(|part| {
            let part = part.trim();
            let mut tokens = part.rsplitn(3, char::is_whitespace);
            match (tokens.next(), tokens.next(), tokens.next()) {
                (Some(number), Some(op), Some(rest))
                    if number.parse::<f64>().is_ok()
                        && ["==", "!=", ">", "<", ">=", "<="].contains(&op) =>
                {
                    rest.trim().to_owned()
                }
                _ => {
                    panic!("an alert expression not of the shape `<signal> <op> <number>`: {part}")
                }
            }
        })
        .collect()
}

/// `prometheus` and `promtool`, or a failure that says how to get them.
fn tools() -> (PathBuf, PathBuf) {
    let find = |name: &str| {
        std::env::var_os("PATH")
            .and_then(|path| {
                std::env::split_paths(&path)
                    .map(|dir| dir.join(name))
                    .find(|p| p.is_file())
            })
            .unwrap_or_else(|| {
                panic!(
                    "`{name}` is not on PATH: this test runs a real Prometheus. Run scripts/prometheus \
                     (it installs the Debian package `prometheus`, which includes promtool; .ci/run \
                     does this before the tests)"
                )
            })
    };
    (find("prometheus"), find("promtool"))
}

fn run(cmd: &mut Command) {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{cmd:?} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A `prometheus` process of this test, stopped (by its PID) when dropped.
struct PrometheusProcess(Child);

impl PrometheusProcess {
    fn start(binary: &Path, config: &Path, data: &Path, port: u16) -> Self {
        let log = std::env::var_os("A2A_TEST_LOG").is_some();
        let child = Command::new(binary)
            .arg(format!("--config.file={}", config.display()))
            .arg(format!("--storage.tsdb.path={}", data.display()))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(if log { Stdio::inherit() } else { Stdio::null() })
            .spawn()
            .expect("prometheus starts");
        Self(child)
    }
}

impl Drop for PrometheusProcess {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A directory of this test, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> Self {
        let dir = std::env::temp_dir().join(format!("a2a-prometheus-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Prometheus's HTTP API.
struct Api {
    base: String,
    client: reqwest::Client,
}

impl Api {
    fn new(port: u16) -> Self {
        Self {
            base: format!("http://127.0.0.1:{port}"),
            client: reqwest::Client::new(),
        }
    }

    async fn get(&self, path: &str, query: &[(&str, &str)]) -> Value {
        let url = url::Url::parse_with_params(&format!("{}{path}", self.base), query).unwrap();
        let resp = self
            .client
            .get(url)
            .send()
            .await
            .unwrap_or_else(|e| panic!("prometheus answers {path}: {e}"));
        resp.json().await.unwrap()
    }

    /// An instant query's result, or the error Prometheus gave.
    async fn query(&self, query: &str) -> Result<Vec<Value>, String> {
        let body = self.get("/api/v1/query", &[("query", query)]).await;
        if body["status"] != "success" {
            return Err(format!("{}: {}", body["errorType"], body["error"]));
        }
        Ok(body["data"]["result"]
            .as_array()
            .cloned()
            .unwrap_or_default())
    }

    async fn check(&self, query: &str, may_be_empty: bool) -> Result<(), String> {
        let result = self.query(query).await?;
        if result.is_empty() {
            if !may_be_empty {
                return Err("no series".into());
            }
            eprintln!("empty, as allowed: {query}");
        }
        Ok(())
    }

    /// Until Prometheus answers `/-/ready`, then until both targets were scraped successfully.
    async fn wait_until_targets_up(&self, patience: Duration) {
        let deadline = Instant::now() + patience;
        loop {
            let ready = self
                .client
                .get(format!("{}/-/ready", self.base))
                .send()
                .await;
            if ready.is_ok_and(|r| r.status().is_success()) {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "prometheus did not get ready in {patience:?} (A2A_TEST_LOG=1 shows its log)"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        loop {
            if let Ok(up) = self.query("up == 1").await
                && up.len() == 2
            {
                return;
            }
            let targets = self.get("/api/v1/targets", &[]).await;
            assert!(
                Instant::now() < deadline,
                "prometheus did not scrape both targets in {patience:?}: {targets}"
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    async fn wait_for_series(&self, query: &str, patience: Duration) {
        let deadline = Instant::now() + patience;
        while self.query(query).await.unwrap().is_empty() {
            assert!(
                Instant::now() < deadline,
                "no {query} in prometheus after {patience:?}"
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }
}

/// The upstream agent: an embedded gateway in this process on its own socket.
struct EmbeddedGateway {
    url: String,
    stop: CancellationToken,
}

impl EmbeddedGateway {
    async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let listen = listener.local_addr().unwrap().to_string();
        let env = a2a_testing::env_of(&[("A2A_LISTEN", &listen), ("A2A_PUBLIC_URL", &url)]);
        let config = Config::from_parts(FileConfig::default(), env).unwrap();
        let stop = CancellationToken::new();
        let svc = app::build(&config, stop.clone()).unwrap();
        tokio::spawn(app::serve(listener, svc, stop.clone()));
        Self { url, stop }
    }
}

impl Drop for EmbeddedGateway {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}
