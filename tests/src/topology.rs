//! The deployed shape on loopback, from the real binaries: three `a2a-gateway` replicas behind
//! haproxy (the committed `deploy/haproxy/haproxy.cfg` with only addresses and check timing
//! rewritten), two `a2a-worker`s, a private PostgreSQL and a private Redis with AOF on (or a
//! private Redis Cluster of three primaries and three replicas, [`Options::redis_cluster`]), a
//! scripted upstream agent (an embedded `a2a-gateway` whose default agent is `scenario`, which
//! the replicas reach as the `[[agents]]` entry `up`) and a webhook receiver.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use a2a_testing::receiver::Receiver;
use a2a_testing::{PgServer, RedisCluster, RedisServer, TestDatabase};

use crate::process::{Proc, free_ports, wait_ready};
use crate::proxy::TcpProxy;

/// How long a replica has to stop after SIGTERM (its drain bound is 10 s).
pub const STOP_LIMIT: Duration = Duration::from_secs(30);
const READY_LIMIT: Duration = Duration::from_secs(60);

/// The directory holding the test executable's sibling binaries (`target/<profile>`), after
/// `cargo build -p a2a-gateway -p a2a-worker` there: a no-op when they are fresh, and never a
/// stale binary when they are not. Once per process.
pub fn bin_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let exe = std::env::current_exe().expect("the test executable's path");
        // target/<profile>/deps/system-<hash>
        let profile_dir = exe
            .parent()
            .and_then(Path::parent)
            .expect("the test runs from target/<profile>/deps")
            .to_path_buf();
        let profile = profile_dir
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("debug")
            .to_owned();
        let target = profile_dir.parent().expect("a target directory");
        let root = Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .expect("the workspace root");
        let mut cmd = Command::new(env!("CARGO"));
        cmd.current_dir(root).env("CARGO_TARGET_DIR", target).args([
            "build",
            "--quiet",
            "-p",
            "a2a-gateway",
            "-p",
            "a2a-worker",
        ]);
        if profile != "debug" {
            cmd.args(["--profile", &profile]);
        }
        let out = cmd.output().expect("cargo runs");
        assert!(
            out.status.success(),
            "building a2a-gateway and a2a-worker failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        profile_dir
    })
}

/// haproxy from Debian, installed as `scripts/deploy-test` does when it is missing.
fn ensure_haproxy() {
    static DONE: OnceLock<()> = OnceLock::new();
    DONE.get_or_init(|| {
        if Command::new("haproxy").arg("-v").output().is_ok() {
            return;
        }
        let root = Command::new("id")
            .arg("-u")
            .output()
            .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
        let sudo: &[&str] = if root { &[] } else { &["sudo", "-n"] };
        let apt = |args: &[&str]| {
            let mut all: Vec<&str> = sudo.to_vec();
            all.extend_from_slice(args);
            Command::new(all[0])
                .args(&all[1..])
                .env("DEBIAN_FRONTEND", "noninteractive")
                .status()
                .is_ok_and(|s| s.success())
        };
        let installed = apt(&["apt-get", "update", "-qq"])
            && apt(&[
                "apt-get",
                "install",
                "-y",
                "-qq",
                "--no-install-recommends",
                "haproxy",
            ]);
        assert!(
            installed,
            "haproxy is missing and could not be installed (needs apt-get as root or passwordless sudo)"
        );
    });
}

/// What a scenario changes in the topology.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// Redis with its append-only file (what a deployment runs); `false`: no persistence at all
    /// (`--save '' --appendonly no`), so a restart loses every stream and group.
    pub redis_aof: bool,
    /// This replica reaches PostgreSQL through a [`TcpProxy`] that can black-hole it.
    pub partitionable: Option<usize>,
    /// Redis's `maxmemory` (with `noeviction`), set before anything uses it.
    pub redis_maxmemory: Option<&'static str>,
    /// A Redis Cluster (`a2a_testing::RedisCluster`: three primaries, each with a replica, no
    /// persistence) instead of the single Redis: every replica and worker gets
    /// `A2A_REDIS_CLUSTER_NODES` and no `A2A_REDIS_URL`. `redis_aof` and `redis_maxmemory` are
    /// the single Redis's and refused with it (a replica's copy is the cluster's durability).
    pub redis_cluster: bool,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            redis_aof: true,
            partitionable: None,
            redis_maxmemory: None,
            redis_cluster: false,
        }
    }
}

/// A replica's fixed ports: it comes back on them after a restart.
#[derive(Clone, Copy)]
pub struct Ports {
    pub public: u16,
    pub admin: u16,
}

pub struct Topology {
    pub dir: PathBuf,
    pub pg: Arc<PgServer>,
    pub db: TestDatabase,
    /// The single Redis, or none on a cluster topology: see [`Self::redis`].
    redis: Option<RedisServer>,
    /// The Redis Cluster of a topology started with [`Options::redis_cluster`].
    pub cluster: Option<Arc<RedisCluster>>,
    pub receiver: Receiver,
    pub upstream: Proc,
    pub upstream_port: u16,
    pub replicas: Vec<Proc>,
    pub replica_ports: Vec<Ports>,
    pub workers: Vec<Proc>,
    worker_ports: Vec<u16>,
    pub haproxy: Option<Proc>,
    pub lb_port: u16,
    /// Between replica `options.partitionable` and PostgreSQL.
    pub pg_proxy: Option<TcpProxy>,
    options: Options,
    key: PathBuf,
    config: PathBuf,
}

impl Topology {
    pub async fn start() -> Self {
        Self::start_with(Options::default()).await
    }

    pub async fn start_with(options: Options) -> Self {
        let dir = std::env::temp_dir().join(format!("a2a-system-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).expect("the run directory");
        let bins = tokio::task::spawn_blocking(|| {
            ensure_haproxy();
            bin_dir()
        })
        .await
        .expect("the build step");

        let pg = Arc::new(
            tokio::task::spawn_blocking(PgServer::start)
                .await
                .unwrap()
                .expect("a private PostgreSQL"),
        );
        let db = TestDatabase::create_on(&pg).await.expect("a database");
        let (redis, cluster) = if options.redis_cluster {
            assert!(
                options.redis_aof && options.redis_maxmemory.is_none(),
                "redis_aof: false and redis_maxmemory are options of the single Redis, not of \
                 the cluster"
            );
            let cluster = tokio::task::spawn_blocking(RedisCluster::start)
                .await
                .unwrap()
                .unwrap_or_else(|e| panic!("a private Redis Cluster: {e}"));
            (None, Some(Arc::new(cluster)))
        } else {
            let redis = tokio::task::spawn_blocking(move || {
                if options.redis_aof {
                    RedisServer::start_with_aof()
                } else {
                    RedisServer::start()
                }
            })
            .await
            .unwrap()
            .expect("a private redis-server");
            if let Some(limit) = options.redis_maxmemory {
                limit_memory(&redis, limit).await;
            }
            (Some(redis), None)
        };
        let receiver = Receiver::start().await;

        let migrate = Command::new(bins.join("a2a-gateway"))
            .arg("migrate")
            .env("A2A_DATABASE_URL", db.url())
            .output()
            .expect("a2a-gateway migrate runs");
        assert!(
            migrate.status.success(),
            "migrate: {}",
            String::from_utf8_lossy(&migrate.stderr)
        );
        let key_pem = Command::new(bins.join("a2a-worker"))
            .arg("keygen")
            .output()
            .expect("a2a-worker keygen runs");
        assert!(key_pem.status.success(), "keygen failed");
        let key = dir.join("push.pem");
        std::fs::write(&key, &key_pem.stdout).unwrap();

        let ports = free_ports(11);
        let (upstream_port, lb_port) = (ports[0], ports[1]);
        let worker_ports = vec![ports[2], ports[3]];
        let config = dir.join("gateway.toml");
        std::fs::write(&config, gateway_config(upstream_port)).unwrap();
        let pg_proxy = match options.partitionable {
            Some(_) => Some(
                TcpProxy::start(
                    ([127, 0, 0, 1], ports[10]).into(),
                    ([127, 0, 0, 1], pg.port()).into(),
                )
                .await,
            ),
            None => None,
        };
        let replica_ports: Vec<Ports> = ports[4..10]
            .chunks(2)
            .map(|p| Ports {
                public: p[0],
                admin: p[1],
            })
            .collect();
        std::fs::write(
            dir.join("haproxy.cfg"),
            haproxy_config(lb_port, &replica_ports),
        )
        .unwrap();

        let mut top = Self {
            upstream: Proc::spawn(&dir, "upstream", upstream_command(&dir, upstream_port)),
            dir,
            pg,
            db,
            redis,
            cluster,
            receiver,
            upstream_port,
            replicas: Vec::new(),
            replica_ports,
            workers: Vec::new(),
            worker_ports,
            haproxy: None,
            lb_port,
            pg_proxy,
            options,
            key,
            config,
        };
        top.wait_upstream().await;
        for i in 0..3 {
            let p = top.spawn_replica(i);
            top.replicas.push(p);
        }
        for i in 0..3 {
            top.wait_replica(i).await;
        }
        for i in 0..2 {
            let w = top.spawn_worker(i);
            top.workers.push(w);
        }
        for i in 0..2 {
            let url = format!("http://127.0.0.1:{}/healthz", top.worker_ports[i]);
            wait_ready(&mut top.workers[i], &url, READY_LIMIT).await;
        }
        top.haproxy = Some(top.spawn_haproxy());
        top.wait_balanced().await;
        top
    }

    /// The single Redis. Faults that restart, stop or trim it refuse a cluster topology here
    /// (the cluster's fault is `faults::redis_cluster_primary_failover`).
    pub fn redis(&self) -> &RedisServer {
        self.redis.as_ref().unwrap_or_else(|| {
            panic!(
                "this fault acts on the single Redis; the topology runs a Redis Cluster \
                 (Options::redis_cluster)"
            )
        })
    }

    /// The Redis Cluster; refused (a panic saying so) on a single-Redis topology.
    pub fn redis_cluster(&self) -> &Arc<RedisCluster> {
        self.cluster.as_ref().unwrap_or_else(|| {
            panic!("this fault needs a Redis Cluster topology (Options::redis_cluster)")
        })
    }

    /// The variable and value telling a replica or worker its Redis: the single Redis's URL, or
    /// the cluster's seed nodes (every node, so a dead one is skipped when a process starts).
    fn redis_env(&self) -> (&'static str, String) {
        match (&self.cluster, &self.redis) {
            (Some(cluster), _) => ("A2A_REDIS_CLUSTER_NODES", cluster.nodes()),
            (None, Some(redis)) => ("A2A_REDIS_URL", redis.url()),
            (None, None) => unreachable!("a topology has a Redis or a cluster"),
        }
    }

    /// The balancer's base URL.
    pub fn lb(&self) -> String {
        format!("http://127.0.0.1:{}", self.lb_port)
    }

    fn spawn_replica(&self, i: usize) -> Proc {
        let ports = self.replica_ports[i];
        let db_url = match &self.pg_proxy {
            Some(proxy) if self.options.partitionable == Some(i) => format!(
                "postgres://postgres@127.0.0.1:{}/{}",
                proxy.addr.port(),
                self.db.name()
            ),
            _ => self.db.url().to_owned(),
        };
        let (redis_var, redis_value) = self.redis_env();
        let mut cmd = Command::new(bin_dir().join("a2a-gateway"));
        cmd.env_clear()
            .envs(base_env())
            .env("A2A_CONFIG", &self.config)
            .env("A2A_DATABASE_URL", db_url)
            .env(redis_var, &redis_value)
            .env("A2A_REDIS_PREFIX", "sys:")
            .env("A2A_LISTEN", format!("127.0.0.1:{}", ports.public))
            .env("A2A_ADMIN_LISTEN", format!("127.0.0.1:{}", ports.admin))
            .env("A2A_PUBLIC_URL", self.lb())
            .env("A2A_PUSH_ALLOWED_HOSTS", "127.0.0.1")
            .env(
                "A2A_PUSH_SIGNING_KEYS",
                format!("sys={}", self.key.display()),
            );
        Proc::spawn(&self.dir, &format!("gateway-{}", i + 1), cmd)
    }

    async fn wait_replica(&mut self, i: usize) {
        let url = format!("http://127.0.0.1:{}/readyz", self.replica_ports[i].admin);
        wait_ready(&mut self.replicas[i], &url, READY_LIMIT).await;
    }

    fn spawn_worker(&self, i: usize) -> Proc {
        let (redis_var, redis_value) = self.redis_env();
        let mut cmd = Command::new(bin_dir().join("a2a-worker"));
        cmd.env_clear()
            .envs(base_env())
            .env("A2A_DATABASE_URL", self.db.url())
            .env(redis_var, &redis_value)
            .env("A2A_REDIS_PREFIX", "sys:")
            .env("A2A_PUBLIC_URL", self.lb())
            .env("A2A_PUSH_ALLOWED_HOSTS", "127.0.0.1")
            .env(
                "A2A_PUSH_SIGNING_KEYS",
                format!("sys={}", self.key.display()),
            )
            .env(
                "A2A_WORKER_LISTEN",
                format!("127.0.0.1:{}", self.worker_ports[i]),
            )
            .env("A2A_WORKER_NAME", format!("worker-{}", i + 1))
            // A dead worker's entries and tasks are taken over within seconds, not a minute.
            .env("A2A_WORKER_CLAIM_IDLE_MS", "3000")
            .env("A2A_WORKER_LEASE_MS", "3000")
            .env("A2A_WORKER_SWEEP_INTERVAL_MS", "1000")
            .env("A2A_WORKER_BACKOFF_BASE_MS", "200")
            .env("A2A_WORKER_BACKOFF_MAX_MS", "2000")
            .env("A2A_WORKER_MAX_ATTEMPTS", "30");
        Proc::spawn(&self.dir, &format!("worker-{}", i + 1), cmd)
    }

    fn spawn_haproxy(&self) -> Proc {
        let cfg = self.dir.join("haproxy.cfg");
        let check = Command::new("haproxy")
            .arg("-c")
            .arg("-f")
            .arg(&cfg)
            .output()
            .expect("haproxy runs");
        assert!(
            check.status.success(),
            "haproxy config: {}{}",
            String::from_utf8_lossy(&check.stdout),
            String::from_utf8_lossy(&check.stderr)
        );
        let mut cmd = Command::new("haproxy");
        cmd.arg("-db").arg("-f").arg(&cfg);
        Proc::spawn(&self.dir, "haproxy", cmd)
    }

    /// Until the balancer has answered from every replica.
    async fn wait_balanced(&mut self) {
        let client = reqwest::Client::new();
        let mut seen = std::collections::BTreeSet::new();
        let deadline = std::time::Instant::now() + READY_LIMIT;
        while seen.len() < self.replicas.len() {
            if let Ok(resp) = client.get(format!("{}/healthz", self.lb())).send().await
                && let Some(r) = resp.headers().get("x-a2a-replica")
            {
                seen.insert(r.to_str().unwrap_or_default().to_owned());
            }
            assert!(
                std::time::Instant::now() < deadline,
                "haproxy routes to {seen:?} only:\n{}",
                self.haproxy
                    .as_ref()
                    .map(|h| h.tail(20))
                    .unwrap_or_default()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    async fn wait_upstream(&mut self) {
        let url = format!("http://127.0.0.1:{}/readyz", self.upstream_port);
        wait_ready(&mut self.upstream, &url, READY_LIMIT).await;
    }

    /// `kill -9` of replica `i`.
    pub fn kill_replica(&mut self, i: usize) {
        self.replicas[i].kill9();
    }

    /// SIGTERM to replica `i`, waited for (it must exit 0 after draining).
    pub async fn stop_replica(&mut self, i: usize) {
        self.replicas[i].terminate(STOP_LIMIT).await;
    }

    /// Starts replica `i` again on its ports; returns once haproxy can see it ready.
    pub async fn restart_replica(&mut self, i: usize) {
        self.replicas[i] = self.spawn_replica(i);
        self.wait_replica(i).await;
        // haproxy checks every 200 ms and needs one success (`rise 1`).
        tokio::time::sleep(Duration::from_millis(600)).await;
    }

    pub fn kill_worker(&mut self, i: usize) {
        self.workers[i].kill9();
    }

    pub async fn restart_worker(&mut self, i: usize) {
        self.workers[i] = self.spawn_worker(i);
        let url = format!("http://127.0.0.1:{}/healthz", self.worker_ports[i]);
        wait_ready(&mut self.workers[i], &url, READY_LIMIT).await;
    }

    /// The upstream agent's process: SIGSTOP makes it hang (connections open, nothing answers).
    pub fn upstream_signal(&self, signal: &str) {
        self.upstream.signal(signal);
    }

    pub fn kill_upstream(&mut self) {
        self.upstream.kill9();
    }

    pub async fn restart_upstream(&mut self) {
        self.upstream = Proc::spawn(
            &self.dir,
            "upstream",
            upstream_command(&self.dir, self.upstream_port),
        );
        self.wait_upstream().await;
    }

    /// The PIDs of the running replicas (for the soak's RSS and descriptor checks).
    pub fn replica_pids(&self) -> Vec<u32> {
        self.replicas.iter().filter_map(Proc::pid).collect()
    }

    /// Worker `i`'s Prometheus endpoint.
    pub fn worker_metrics_url(&self, i: usize) -> String {
        format!("http://127.0.0.1:{}/metrics", self.worker_ports[i])
    }

    /// Every process's log tail, for a failure message.
    pub fn logs(&self) -> String {
        let mut out = String::new();
        for p in self
            .replicas
            .iter()
            .chain(&self.workers)
            .chain([&self.upstream])
            .chain(&self.haproxy)
        {
            out.push_str(&format!("--- {} ---\n{}\n", p.name, p.tail(15)));
        }
        out
    }
}

impl Drop for Topology {
    fn drop(&mut self) {
        // Balancer and clients' targets first, then the data stores (their guards).
        if let Some(h) = self.haproxy.as_mut() {
            h.kill9();
        }
        for p in self.replicas.iter_mut().chain(self.workers.iter_mut()) {
            p.kill9();
        }
        self.upstream.kill9();
        if std::env::var_os("A2A_SYSTEM_KEEP").is_none() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// `maxmemory` `limit` with `noeviction`: writes past it are refused (OOM), nothing is evicted.
async fn limit_memory(redis: &RedisServer, limit: &str) {
    let client = redis::Client::open(redis.url()).expect("the Redis URL");
    let mut conn = client
        .get_multiplexed_async_connection()
        .await
        .expect("Redis answers");
    for (k, v) in [("maxmemory", limit), ("maxmemory-policy", "noeviction")] {
        let _: () = redis::cmd("CONFIG")
            .arg("SET")
            .arg(k)
            .arg(v)
            .query_async(&mut conn)
            .await
            .expect("CONFIG SET");
    }
}

/// Only what a process needs from the test's environment.
fn base_env() -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = ["PATH", "HOME", "LANG", "TMPDIR"]
        .iter()
        .filter_map(|k| std::env::var(k).ok().map(|v| ((*k).to_owned(), v)))
        .collect();
    env.push(("RUST_LOG".into(), "info".into()));
    env.push(("NO_COLOR".into(), "1".into()));
    env
}

/// The scripted upstream: an embedded gateway (in-memory store) whose default agent is
/// `scenario`, so a script in the message decides what each upstream task does.
fn upstream_command(dir: &Path, port: u16) -> Command {
    let config = dir.join("upstream.toml");
    if !config.exists() {
        std::fs::write(&config, "default_agent = \"scenario\"\n").unwrap();
    }
    let mut cmd = Command::new(bin_dir().join("a2a-gateway"));
    cmd.env_clear()
        .envs(base_env())
        .env("A2A_LISTEN", format!("127.0.0.1:{port}"))
        .env("A2A_BUILTIN_AGENTS", "echo,scenario")
        .env("A2A_CONFIG", config);
    cmd
}

/// The replicas' configuration: the test agent on, a short dispatch lease (a dead replica's
/// tasks are taken over in about 1.5 s), a drain bound shorter than the test's patience, and the
/// upstream agent `up`.
fn gateway_config(upstream_port: u16) -> String {
    format!(
        "builtin_agents = [\"echo\", \"scenario\"]\n\n\
         [limits]\ndrain_timeout_secs = 10\n\n\
         [dispatch]\nlease_ms = 1500\n\n\
         [[agents]]\nname = \"up\"\ncard_url = \"http://127.0.0.1:{upstream_port}\"\n\
         health_interval_secs = 1\ntimeout_secs = 5\nmax_concurrency = 64\nqueue_capacity = 256\n"
    )
}

/// The committed haproxy config with its addresses rewritten for loopback (as
/// `deploy/tests/run.py` does): the bind address, one `server` line per replica instead of the
/// DNS `server-template`, no resolvers; and health checks every 200 ms instead of 2 s, so a
/// restarted replica is back in rotation at once.
pub fn haproxy_config(lb_port: u16, replicas: &[Ports]) -> String {
    let committed = include_str!("../../deploy/haproxy/haproxy.cfg");
    let mut out = String::new();
    let mut in_resolvers = false;
    for line in committed.lines() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("resolvers ") {
            in_resolvers = true;
            continue;
        }
        if in_resolvers {
            if line.starts_with(char::is_whitespace) || line.is_empty() {
                continue;
            }
            in_resolvers = false;
        }
        if trimmed.starts_with("bind ") {
            out.push_str(&format!("    bind 127.0.0.1:{lb_port}\n"));
        } else if trimmed.starts_with("default-server ") {
            out.push_str("    default-server inter 200ms fall 2 rise 1 check-proto h1 proto h2\n");
        } else if trimmed.starts_with("server-template ") {
            for (i, p) in replicas.iter().enumerate() {
                out.push_str(&format!(
                    "    server gw{} 127.0.0.1:{} check port {}\n",
                    i + 1,
                    p.public,
                    p.admin
                ));
            }
        } else {
            out.push_str(line);
            out.push('\n');
        }
    }
    assert!(
        out.contains("server gw1") && out.contains("bind 127.0.0.1"),
        "deploy/haproxy/haproxy.cfg no longer has the shape this suite rewrites:\n{out}"
    );
    out
}
