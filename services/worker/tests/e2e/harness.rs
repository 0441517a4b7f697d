//! A deployment for the tests: a fresh database and Redis prefix, a signing key on disk, the
//! gateway (in-process, real socket, `A2A_DATABASE_URL` + `A2A_REDIS_URL`) and `a2a-worker`
//! processes on the same database, Redis prefix and key.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::{Child, Command};
use std::time::Duration;

use a2a_gateway::app;
use a2a_gateway::config::{Config, FileConfig};
use a2a_store::pg::PgDeliveryStore;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

pub struct Deployment {
    pub db: a2a_testing::TestDatabase,
    pub redis: a2a_testing::TestRedis,
    /// The Redis Cluster the gateway and the workers use instead of `redis`, when started on one.
    pub cluster: Option<a2a_testing::TestCluster>,
    pub gateway_url: String,
    /// The gateway's admin listener (`/metrics`), when started with one.
    pub admin: Option<std::net::SocketAddr>,
    key_path: PathBuf,
    gateway_stop: CancellationToken,
    client: reqwest::Client,
}

impl Deployment {
    /// A gateway whose push allowlist is `allowed_hosts` (the tests' receivers run on 127.0.0.1).
    pub async fn start(allowed_hosts: &str) -> Self {
        Self::start_with(allowed_hosts, None).await
    }

    /// [`Self::start`] on `redis` (a private server the test controls, for fault tests).
    pub async fn start_on(allowed_hosts: &str, redis: a2a_testing::TestRedis) -> Self {
        Self::start_full(allowed_hosts, None, Some(redis), None).await
    }

    /// [`Self::start`] with a gateway config file (`toml`, e.g. `[[agents]]`) and an admin
    /// listener on a free port, started the way `main` starts it (`app::start`: upstream cards
    /// fetched, the dispatch lease taken).
    pub async fn with_admin(allowed_hosts: &str, toml: &str) -> Self {
        Self::start_with(allowed_hosts, Some(toml)).await
    }

    async fn start_with(allowed_hosts: &str, admin_with: Option<&str>) -> Self {
        Self::start_full(allowed_hosts, admin_with, None, None).await
    }

    /// [`Self::start`] on a Redis Cluster (`A2A_REDIS_CLUSTER_NODES`) of three primaries.
    pub async fn start_on_cluster(allowed_hosts: &str) -> Self {
        let cluster = a2a_testing::TestCluster::create().await;
        Self::start_full(allowed_hosts, None, None, Some(cluster)).await
    }

    async fn start_full(
        allowed_hosts: &str,
        admin_with: Option<&str>,
        redis: Option<a2a_testing::TestRedis>,
        cluster: Option<a2a_testing::TestCluster>,
    ) -> Self {
        let db = a2a_testing::TestDatabase::create().await;
        let redis = match redis {
            Some(r) => r,
            None => a2a_testing::TestRedis::create().await,
        };
        let key_path =
            std::env::temp_dir().join(format!("a2a-worker-test-{}.pem", uuid::Uuid::new_v4()));
        std::fs::write(&key_path, a2a_worker::keygen::es256_pem().unwrap()).unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let gateway_url = format!("http://{addr}");
        let mut env: HashMap<&str, String> = HashMap::from([
            ("A2A_LISTEN", addr.to_string()),
            ("A2A_PUBLIC_URL", gateway_url.clone()),
            ("A2A_DATABASE_URL", db.url().to_owned()),
            ("A2A_REDIS_URL", redis.url().to_owned()),
            ("A2A_REDIS_PREFIX", redis.prefix().to_owned()),
            (
                "A2A_PUSH_SIGNING_KEYS",
                format!("test-key={}", key_path.display()),
            ),
            ("A2A_PUSH_ALLOWED_HOSTS", allowed_hosts.to_owned()),
        ]);
        if let Some(cluster) = &cluster {
            env.remove("A2A_REDIS_URL");
            env.insert("A2A_REDIS_CLUSTER_NODES", cluster.nodes());
            env.insert("A2A_REDIS_PREFIX", cluster.prefix().to_owned());
        }
        let mut file = admin_with.map_or_else(FileConfig::default, |toml| {
            FileConfig::parse(toml).expect("test config parses")
        });
        // The tests drive the `scenario` test agent, which a deployment on PostgreSQL enables
        // on purpose.
        file.builtin_agents
            .get_or_insert_with(|| vec!["echo".into(), "scenario".into()]);
        let config = Config::from_parts(file, |k| env.get(k).cloned()).unwrap();
        app::migrate(&config).await.expect("migrations apply");
        let stop = CancellationToken::new();
        let svc = app::build(&config, stop.clone()).unwrap();
        let mut admin = None;
        if admin_with.is_some() {
            app::start(&config, &svc).await;
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            admin = Some(listener.local_addr().unwrap());
            tokio::spawn(app::serve_admin(listener, svc.clone(), stop.clone()));
        }
        tokio::spawn(app::serve(listener, svc, stop.clone()));
        Self {
            db,
            redis,
            cluster,
            gateway_url,
            admin,
            key_path,
            gateway_stop: stop,
            client: reqwest::Client::new(),
        }
    }

    /// The environment a worker of this deployment runs with, plus `extra`.
    pub fn worker_env(&self, extra: &[(&str, &str)]) -> Vec<(String, String)> {
        let mut env: Vec<(String, String)> = [
            ("A2A_DATABASE_URL", self.db.url().to_owned()),
            ("A2A_REDIS_URL", self.redis.url().to_owned()),
            ("A2A_REDIS_PREFIX", self.redis.prefix().to_owned()),
            ("A2A_PUBLIC_URL", self.gateway_url.clone()),
            (
                "A2A_PUSH_SIGNING_KEYS",
                format!("test-key={}", self.key_path.display()),
            ),
            ("A2A_PUSH_ALLOWED_HOSTS", "127.0.0.1".to_owned()),
            ("A2A_WORKER_LISTEN", "127.0.0.1:0".to_owned()),
            ("A2A_WORKER_BACKOFF_BASE_MS", "100".to_owned()),
            ("A2A_WORKER_BACKOFF_MAX_MS", "1000".to_owned()),
            ("A2A_WORKER_CLAIM_IDLE_MS", "2000".to_owned()),
            ("A2A_WORKER_LEASE_MS", "3000".to_owned()),
            ("A2A_WORKER_SWEEP_INTERVAL_MS", "1000".to_owned()),
            ("RUST_LOG", "warn,a2a_worker=info".to_owned()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
        if let Some(cluster) = &self.cluster {
            env.retain(|(name, _)| name != "A2A_REDIS_URL" && name != "A2A_REDIS_PREFIX");
            env.push(("A2A_REDIS_CLUSTER_NODES".into(), cluster.nodes()));
            env.push(("A2A_REDIS_PREFIX".into(), cluster.prefix().to_owned()));
        }
        for (k, v) in extra {
            env.retain(|(name, _)| name != k);
            env.push(((*k).to_owned(), (*v).to_owned()));
        }
        env
    }

    /// Starts an `a2a-worker serve` process.
    pub fn worker(&self, extra: &[(&str, &str)]) -> WorkerProcess {
        WorkerProcess::start(self.worker_env(extra))
    }

    /// Runs an `a2a-worker` subcommand to completion (off the test's thread, which serves the
    /// receiver); returns (success, stdout, stderr).
    pub async fn worker_command(
        &self,
        args: &[&str],
        extra: &[(&str, &str)],
    ) -> (bool, String, String) {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_a2a-worker"));
        cmd.args(args).env_clear().envs(self.worker_env(extra));
        let out = tokio::task::spawn_blocking(move || cmd.output().unwrap())
            .await
            .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    pub fn store(&self) -> PgDeliveryStore {
        PgDeliveryStore::connect_lazy(self.db.url(), 2, Duration::from_secs(3)).unwrap()
    }

    /// A JSON-RPC call to the gateway; returns the whole response.
    pub async fn rpc(&self, method: &str, params: Value) -> Value {
        a2a_testing::jsonrpc(&self.client, &self.gateway_url, method, params).await
    }

    /// SendMessage to the scenario agent with an inline push config; returns the task.
    pub async fn scenario_task(
        &self,
        script: Value,
        push: Value,
        return_immediately: bool,
    ) -> Value {
        let resp = self
            .rpc(
                "SendMessage",
                json!({"tenant": "scenario", "message": script_message(script),
                       "configuration": {"taskPushNotificationConfig": push,
                                         "returnImmediately": return_immediately}}),
            )
            .await;
        assert!(resp.get("error").is_none(), "SendMessage failed: {resp}");
        resp["result"]["task"].clone()
    }

    /// Verifies a delivery's signature header against the gateway's JWKS the way a receiver
    /// would; returns the claims.
    pub async fn verify(&self, jwt: &str, url: &str, body: &[u8]) -> a2a_push::DeliveryClaims {
        a2a_testing::receiver::verify(&self.gateway_url, jwt, url, body).await
    }
}

impl Drop for Deployment {
    fn drop(&mut self) {
        self.gateway_stop.cancel();
        let _ = std::fs::remove_file(&self.key_path);
    }
}

pub fn script_message(script: Value) -> Value {
    json!({"messageId": uuid::Uuid::new_v4().to_string(), "role": "ROLE_USER",
           "parts": [{"text": "run"}, {"data": script}]})
}

/// A running `a2a-worker serve`.
pub struct WorkerProcess {
    child: Child,
    pub addr: String,
}

impl WorkerProcess {
    fn start(env: Vec<(String, String)>) -> Self {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_a2a-worker"));
        cmd.env_clear().envs(env).env("NO_COLOR", "1");
        let (child, addr) = a2a_testing::spawn_listening(cmd, "worker");
        Self { child, addr }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub async fn metrics(&self) -> String {
        reqwest::get(format!("http://{}/metrics", self.addr))
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    }

    /// SIGKILL: no shutdown code runs, nothing is acknowledged on the way out.
    pub fn kill9(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }
}

impl Drop for WorkerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The value of a metric line `name` (with labels as written) in Prometheus text.
pub fn metric(text: &str, name: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name).and_then(|v| v.trim().parse().ok()))
        .unwrap_or(0.0)
}
