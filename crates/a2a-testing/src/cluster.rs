//! A private Redis Cluster for tests: six `redis-server --cluster-enabled yes` on free loopback
//! ports (three primaries, each with one replica), joined by `redis-cli --cluster create`,
//! stopped by their PIDs on drop. A node timeout of one second makes a killed primary's
//! replica take over within a few seconds.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

/// Nodes in the cluster: 3 primaries and 3 replicas.
const NODES: usize = 6;
/// `cluster-node-timeout`: how long a node may be unreachable before it counts as failed.
const NODE_TIMEOUT_MS: u64 = 1000;

/// One test's slice of a cluster: its own key prefix (the cluster is thrown away whole).
pub struct TestCluster {
    cluster: Arc<RedisCluster>,
    prefix: String,
}

impl TestCluster {
    /// A fresh prefix on the cluster shared by the tests of this process (started on first
    /// use); panics with instructions when none can be started.
    pub async fn create() -> Self {
        let cluster = tokio::task::spawn_blocking(shared_cluster)
            .await
            .map_err(|e| format!("starting a cluster panicked: {e}"))
            .and_then(|r| r)
            .unwrap_or_else(|e| {
                panic!("Redis Cluster for tests: {e}\nInstall redis-server and redis-cli (7+).")
            });
        Self::on(&cluster)
    }

    /// A fresh prefix on a cluster the test controls (for fault tests).
    pub fn on(cluster: &Arc<RedisCluster>) -> Self {
        Self {
            cluster: cluster.clone(),
            prefix: format!("a2a-test-{}:", uuid::Uuid::new_v4().simple()),
        }
    }

    /// The value for `A2A_REDIS_CLUSTER_NODES`.
    pub fn nodes(&self) -> String {
        self.cluster.nodes()
    }

    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    pub fn cluster(&self) -> &Arc<RedisCluster> {
        &self.cluster
    }
}

fn shared_cluster() -> Result<Arc<RedisCluster>, String> {
    static SHARED: Mutex<Weak<RedisCluster>> = Mutex::new(Weak::new());
    let mut shared = SHARED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(cluster) = shared.upgrade() {
        return Ok(cluster);
    }
    let cluster = Arc::new(RedisCluster::start()?);
    *shared = Arc::downgrade(&cluster);
    Ok(cluster)
}

struct Node {
    port: u16,
    child: Mutex<Option<Child>>,
}

/// Six private `redis-server`s in cluster mode, in a temporary directory, without persistence.
pub struct RedisCluster {
    root: PathBuf,
    nodes: Vec<Node>,
}

impl RedisCluster {
    /// Starts the nodes, creates the cluster and waits until every slot is served and every
    /// replica has synchronised with its primary.
    pub fn start() -> Result<Self, String> {
        let root =
            std::env::temp_dir().join(format!("a2a-cluster-{}", uuid::Uuid::new_v4().simple()));
        let mut cluster = Self {
            root,
            nodes: Vec::new(),
        };
        for _ in 0..NODES {
            let port = free_cluster_port(&cluster.nodes)?;
            let child = cluster.spawn_node(port)?;
            // Pushed at once: a failure below stops what was started (drop).
            cluster.nodes.push(Node {
                port,
                child: Mutex::new(Some(child)),
            });
        }
        for node in &cluster.nodes {
            wait_listening(node.port)?;
        }
        let create = Command::new("redis-cli")
            .arg("--cluster")
            .arg("create")
            .args(
                cluster
                    .nodes
                    .iter()
                    .map(|n| format!("127.0.0.1:{}", n.port)),
            )
            .args(["--cluster-replicas", "1", "--cluster-yes"])
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("redis-cli cannot be started: {e}"))?;
        if !create.status.success() {
            return Err(format!(
                "redis-cli --cluster create failed: {}{}",
                String::from_utf8_lossy(&create.stdout),
                String::from_utf8_lossy(&create.stderr)
            ));
        }
        cluster.wait_healthy(Duration::from_secs(30))?;
        Ok(cluster)
    }

    /// Starts the node on `port` in its own directory. Its `nodes.conf` there (the cluster's
    /// view, written by the node itself whatever the persistence) is what lets a killed node
    /// started again rejoin under its old identity. Its log is `redis.log` there.
    fn spawn_node(&self, port: u16) -> Result<Child, String> {
        let bin = std::env::var("A2A_TEST_REDIS_BIN").unwrap_or_else(|_| "redis-server".into());
        let dir = self.root.join(port.to_string());
        std::fs::create_dir_all(&dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        Command::new(&bin)
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--cluster-enabled", "yes"])
            .args(["--cluster-config-file", "nodes.conf"])
            .args(["--cluster-node-timeout", &NODE_TIMEOUT_MS.to_string()])
            // A replica takes over however long ago it last heard from its primary.
            .args(["--cluster-replica-validity-factor", "0"])
            .args(["--save", "", "--appendonly", "no"])
            .args(["--logfile", "redis.log"])
            .current_dir(&dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("{bin} cannot be started: {e}"))
    }

    /// `redis://127.0.0.1:<port>,...`, every node: the value for `A2A_REDIS_CLUSTER_NODES`.
    pub fn nodes(&self) -> String {
        self.nodes
            .iter()
            .map(|n| format!("redis://127.0.0.1:{}", n.port))
            .collect::<Vec<_>>()
            .join(",")
    }

    fn alive(&self) -> impl Iterator<Item = &Node> {
        self.nodes.iter().filter(|n| {
            n.child
                .lock()
                .map(|mut c| {
                    c.as_mut()
                        .is_some_and(|c| c.try_wait().ok().flatten().is_none())
                })
                .unwrap_or(false)
        })
    }

    /// Waits until every running node says `cluster_state:ok`, the cluster has three primaries
    /// serving all slots, and every running replica's link to its primary is up.
    pub fn wait_healthy(&self, within: Duration) -> Result<(), String> {
        let deadline = Instant::now() + within;
        loop {
            let state = self.health();
            match state {
                Ok(()) => return Ok(()),
                Err(e) if Instant::now() > deadline => {
                    return Err(format!("the cluster is not healthy after {within:?}: {e}"));
                }
                Err(_) => std::thread::sleep(Duration::from_millis(100)),
            }
        }
    }

    fn health(&self) -> Result<(), String> {
        for node in self.alive() {
            let info = node_command(node.port, &["CLUSTER", "INFO"])?;
            if !info.contains("cluster_state:ok") {
                return Err(format!("node {}: not ok", node.port));
            }
            let replication = node_command(node.port, &["INFO", "replication"])?;
            if replication.contains("role:slave") && !replication.contains("master_link_status:up")
            {
                return Err(format!(
                    "replica {}: link to its primary is down",
                    node.port
                ));
            }
        }
        Ok(())
    }

    /// The port of the primary that serves `key` now.
    pub fn primary_of(&self, key: &str) -> Result<u16, String> {
        let node = self.alive().next().ok_or("no node is running")?;
        let slot: u16 = node_command(node.port, &["CLUSTER", "KEYSLOT", key])?
            .trim()
            .parse()
            .map_err(|e| format!("CLUSTER KEYSLOT: {e}"))?;
        // `CLUSTER NODES`: id addr flags master ping pong epoch link slot-ranges...
        let nodes = node_command(node.port, &["CLUSTER", "NODES"])?;
        for line in nodes.lines() {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let (Some(addr), Some(flags)) = (fields.get(1), fields.get(2)) else {
                continue;
            };
            if !flags.contains("master") || flags.contains("fail") {
                continue;
            }
            let serves = fields.iter().skip(8).any(|range| {
                let (lo, hi) = range.split_once('-').unwrap_or((range, range));
                matches!((lo.parse::<u16>(), hi.parse::<u16>()), (Ok(lo), Ok(hi)) if (lo..=hi).contains(&slot))
            });
            if serves {
                let port = addr
                    .split(['@', ':'])
                    .nth(1)
                    .and_then(|p| p.parse().ok())
                    .ok_or_else(|| format!("cannot read the address {addr}"))?;
                return Ok(port);
            }
        }
        Err(format!("no primary serves slot {slot}"))
    }

    /// Kills (SIGKILL, by its PID) the node on `port` and waits for it to exit.
    pub fn kill(&self, port: u16) -> Result<(), String> {
        let node = self
            .nodes
            .iter()
            .find(|n| n.port == port)
            .ok_or_else(|| format!("no node on {port}"))?;
        let mut child = node.child.lock().map_err(|_| "lock poisoned".to_owned())?;
        if let Some(mut c) = child.take() {
            c.kill()
                .map_err(|e| format!("cannot kill node {port}: {e}"))?;
            let _ = c.wait();
        }
        Ok(())
    }

    /// Starts the node on `port` again after [`Self::kill`] (empty: no persistence). It rejoins
    /// the cluster under its old identity and, its slots having moved to its promoted replica
    /// (a newer configuration epoch), becomes that node's replica; see [`Self::wait_replica`].
    pub fn restart(&self, port: u16) -> Result<(), String> {
        let node = self
            .nodes
            .iter()
            .find(|n| n.port == port)
            .ok_or_else(|| format!("no node on {port}"))?;
        let mut child = node.child.lock().map_err(|_| "lock poisoned".to_owned())?;
        if let Some(c) = child.as_mut()
            && c.try_wait().ok().flatten().is_none()
        {
            return Err(format!("node {port} is still running"));
        }
        *child = Some(self.spawn_node(port)?);
        drop(child);
        wait_listening(port)
    }

    /// The node's `role` from `INFO replication`: `master` or `slave`.
    pub fn role(&self, port: u16) -> Result<String, String> {
        let replication = node_command(port, &["INFO", "replication"])?;
        replication
            .lines()
            .find_map(|l| l.strip_prefix("role:"))
            .map(|r| r.trim().to_owned())
            .ok_or_else(|| format!("node {port}: no role in INFO replication"))
    }

    /// How many keys the node on `port` holds (`DBSIZE`).
    pub fn dbsize(&self, port: u16) -> Result<u64, String> {
        node_command(port, &["DBSIZE"])?
            .trim()
            .parse()
            .map_err(|e| format!("node {port}: DBSIZE: {e}"))
    }

    /// Waits until the node on `port` is a replica whose link to its primary is up, and every
    /// running node is ok.
    pub fn wait_replica(&self, port: u16, within: Duration) -> Result<(), String> {
        let deadline = Instant::now() + within;
        loop {
            let synced = node_command(port, &["INFO", "replication"])
                .is_ok_and(|r| r.contains("role:slave") && r.contains("master_link_status:up"));
            if synced && self.health().is_ok() {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "node {port} is not a synchronised replica after {within:?}: role {:?}, {:?}",
                    self.role(port),
                    self.health()
                ));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Waits until a primary other than `old` serves `key` and the running nodes are ok.
    pub fn wait_promoted(&self, key: &str, old: u16, within: Duration) -> Result<u16, String> {
        let deadline = Instant::now() + within;
        loop {
            if let Ok(port) = self.primary_of(key)
                && port != old
                && self.health().is_ok()
            {
                return Ok(port);
            }
            if Instant::now() > deadline {
                return Err(format!("no replica took over from {old} in {within:?}"));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for RedisCluster {
    fn drop(&mut self) {
        for node in &self.nodes {
            if let Ok(mut child) = node.child.lock()
                && let Some(mut c) = child.take()
            {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

/// One command to one node (not routed), its reply as text.
fn node_command(port: u16, args: &[&str]) -> Result<String, String> {
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}"))
        .map_err(|e| format!("node {port}: {e}"))?;
    let mut conn = client
        .get_connection_with_timeout(Duration::from_secs(1))
        .map_err(|e| format!("node {port}: {e}"))?;
    let mut cmd = redis::cmd(args[0]);
    for arg in &args[1..] {
        cmd.arg(*arg);
    }
    let reply: redis::Value = cmd
        .query(&mut conn)
        .map_err(|e| format!("node {port}: {e}"))?;
    match reply {
        redis::Value::Int(n) => Ok(n.to_string()),
        other => redis::from_redis_value::<String>(other).map_err(|e| format!("node {port}: {e}")),
    }
}

/// A port free on loopback whose cluster bus port (port + 10000) is free too.
fn free_cluster_port(taken: &[Node]) -> Result<u16, String> {
    for _ in 0..500 {
        let port = 15_000 + (uuid::Uuid::new_v4().as_u128() % 20_000) as u16;
        if taken
            .iter()
            .any(|n| [0, 10_000].contains(&n.port.abs_diff(port)))
        {
            continue;
        }
        let free = |p: u16| std::net::TcpListener::bind(("127.0.0.1", p)).is_ok();
        if free(port) && free(port + 10_000) {
            return Ok(port);
        }
    }
    Err("no free pair of ports for a cluster node".into())
}

fn wait_listening(port: u16) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        if Instant::now() > deadline {
            return Err(format!("redis-server did not listen on {port} in 10 s"));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    Ok(())
}
