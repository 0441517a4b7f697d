//! Where Redis is: one server (`A2A_REDIS_URL`, also a primary with replicas behind one
//! address) or a Redis Cluster (`A2A_REDIS_CLUSTER_NODES`, seed nodes), for the bus, the push
//! worker and the shared rate limiter alike.
//!
//! On a cluster every command is routed by its key's slot (the `redis` crate's cluster
//! connection follows `MOVED`/`ASK` and a failover's new topology by itself); a command or
//! pipeline names keys of one slot only (see [`super::keys`]). Blocking reads get a connection
//! of their own ([`RedisTarget::blocking`]): a blocked command holds the node's connection it
//! was sent on.

use std::time::Duration;

use redis::aio::{
    ConnectionLike, ConnectionManager, ConnectionManagerConfig, MultiplexedConnection,
};
use redis::cluster::{ClusterClient, ClusterClientBuilder, ClusterConfig};
use redis::cluster_async::ClusterConnection;
use redis::{AsyncConnectionConfig, Client, Cmd, Pipeline, RedisFuture, RedisResult, Value};

/// The environment variables naming the Redis, for error messages.
pub const URL_VAR: &str = "A2A_REDIS_URL";
pub const CLUSTER_NODES_VAR: &str = "A2A_REDIS_CLUSTER_NODES";

/// Seed nodes accepted in `A2A_REDIS_CLUSTER_NODES`.
const MAX_SEED_NODES: usize = 64;

/// One Redis server, or a Redis Cluster by its seed nodes.
#[derive(Clone)]
pub enum RedisTarget {
    Single(Client),
    Cluster(Vec<String>),
}

impl std::fmt::Debug for RedisTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Addresses only: a URL's password stays out of logs.
        match self {
            Self::Single(client) => write!(f, "Single({})", client.get_connection_info().addr()),
            Self::Cluster(nodes) => write!(f, "Cluster({} seed nodes)", nodes.len()),
        }
    }
}

/// How long a shared connection waits, and how often it retries a command, before the caller
/// gets the error (and degrades).
#[derive(Clone, Copy, Debug)]
pub struct Patience {
    pub connect: Duration,
    pub response: Duration,
    pub retries: u32,
}

impl RedisTarget {
    /// From `A2A_REDIS_URL` and `A2A_REDIS_CLUSTER_NODES` (either, not both; `None` for
    /// neither); checks their syntax, connects to nothing.
    pub fn from_settings(
        url: Option<&str>,
        cluster_nodes: Option<&str>,
    ) -> Result<Option<Self>, String> {
        match (url, cluster_nodes) {
            (Some(_), Some(_)) => Err(format!(
                "{URL_VAR} and {CLUSTER_NODES_VAR} are both set: set {URL_VAR} for one Redis \
                 (or a primary with replicas behind one address), {CLUSTER_NODES_VAR} for a \
                 Redis Cluster, not both"
            )),
            (Some(url), None) => Client::open(url)
                .map(|c| Some(Self::Single(c)))
                .map_err(|e| format!("{URL_VAR}: {e}")),
            (None, Some(nodes)) => Self::cluster(nodes).map(Some),
            (None, None) => Ok(None),
        }
    }

    /// `redis://h1:7000,redis://h2:7001,...`: any reachable one tells the client the rest.
    pub fn cluster(nodes: &str) -> Result<Self, String> {
        let nodes: Vec<String> = nodes
            .split(',')
            .map(str::trim)
            .filter(|n| !n.is_empty())
            .map(str::to_owned)
            .collect();
        if nodes.is_empty() {
            return Err(format!("{CLUSTER_NODES_VAR} names no node"));
        }
        if nodes.len() > MAX_SEED_NODES {
            return Err(format!(
                "{CLUSTER_NODES_VAR} names {} nodes; at most {MAX_SEED_NODES} (a few seeds suffice)",
                nodes.len()
            ));
        }
        for (i, node) in nodes.iter().enumerate() {
            // The error, not the value: it may hold a password.
            redis::IntoConnectionInfo::into_connection_info(node.as_str())
                .map_err(|e| format!("{CLUSTER_NODES_VAR}: node {}: {e}", i + 1))?;
        }
        ClusterClient::new(nodes.clone()).map_err(|e| format!("{CLUSTER_NODES_VAR}: {e}"))?;
        Ok(Self::Cluster(nodes))
    }

    pub fn is_cluster(&self) -> bool {
        matches!(self, Self::Cluster(_))
    }

    fn cluster_client(nodes: &[String], patience: Patience) -> RedisResult<ClusterClient> {
        ClusterClientBuilder::new(nodes.to_vec())
            .connection_timeout(patience.connect)
            .response_timeout(patience.response)
            .retries(patience.retries)
            .max_retry_wait(500)
            .build()
    }

    /// A connection shared by the callers of a process for commands that do not block; it
    /// reconnects (single) or follows the cluster's topology (cluster) by itself.
    pub async fn shared(&self, patience: Patience) -> RedisResult<Conn> {
        match self {
            Self::Single(client) => {
                let config = ConnectionManagerConfig::new()
                    .set_number_of_retries(patience.retries as usize)
                    .set_max_delay(Duration::from_secs(2))
                    .set_response_timeout(Some(patience.response))
                    .set_connection_timeout(Some(patience.connect));
                ConnectionManager::new_with_config(client.clone(), config)
                    .await
                    .map(Conn::Manager)
            }
            Self::Cluster(nodes) => Self::cluster_client(nodes, patience)?
                .get_async_connection()
                .await
                .map(Conn::Cluster),
        }
    }

    /// A connection of its own for blocking reads (`XREAD BLOCK`, `XREADGROUP BLOCK`) of at
    /// most `block`: a blocked command holds the connection it was sent on.
    pub async fn blocking(&self, block: Duration) -> RedisResult<Conn> {
        let response = block + Duration::from_secs(5);
        let connect = Duration::from_secs(2);
        match self {
            Self::Single(client) => {
                let config = AsyncConnectionConfig::new()
                    .set_response_timeout(Some(response))
                    .set_connection_timeout(Some(connect));
                client
                    .get_multiplexed_async_connection_with_config(&config)
                    .await
                    .map(Conn::Multiplexed)
            }
            Self::Cluster(nodes) => {
                let patience = Patience {
                    connect,
                    response,
                    retries: 2,
                };
                Self::cluster_client(nodes, patience)?
                    .get_async_connection_with_config(
                        ClusterConfig::new()
                            .set_connection_timeout(connect)
                            .set_response_timeout(response),
                    )
                    .await
                    .map(Conn::Cluster)
            }
        }
    }
}

/// A shared connection ([`RedisTarget::shared`]) opened on first use and opened anew after a
/// cluster node failed it. The cluster connection of the `redis` crate learns a new topology
/// from `MOVED` answers only, and a dead primary answers nothing: its slots' commands would
/// keep failing after a replica took over. A new connection reads the topology from the live
/// nodes (at most once per [`REOPEN_AFTER`]).
pub struct SharedConn {
    target: RedisTarget,
    patience: Patience,
    /// The connection and when it was opened; read (and cloned) by every command.
    current: std::sync::RwLock<Option<(Conn, std::time::Instant)>>,
    /// Held while a connection is opened, so callers open one, not one each.
    opening: tokio::sync::Mutex<()>,
}

/// A cluster connection younger than this is kept after a failure (no storm of reconnects).
const REOPEN_AFTER: Duration = Duration::from_millis(500);

impl SharedConn {
    pub fn new(target: RedisTarget, patience: Patience) -> Self {
        Self {
            target,
            patience,
            current: std::sync::RwLock::new(None),
            opening: tokio::sync::Mutex::new(()),
        }
    }

    pub fn target(&self) -> &RedisTarget {
        &self.target
    }

    fn current(&self) -> Option<Conn> {
        let current = self.current.read().unwrap_or_else(|e| e.into_inner());
        current.as_ref().map(|(c, _)| c.clone())
    }

    /// The connection, opened now if there is none (an error if Redis cannot be reached).
    pub async fn get(&self) -> RedisResult<Conn> {
        if let Some(c) = self.current() {
            return Ok(c);
        }
        let _opening = self.opening.lock().await;
        if let Some(c) = self.current() {
            return Ok(c); // opened while this call waited
        }
        let c = self.target.shared(self.patience).await?;
        *self.current.write().unwrap_or_else(|e| e.into_inner()) =
            Some((c.clone(), std::time::Instant::now()));
        Ok(c)
    }

    /// Tells that a command failed with `e`: on a cluster, a failure to reach a node drops the
    /// connection, so the next [`get`](Self::get) reads the topology again.
    pub async fn failed(&self, e: &redis::RedisError) {
        let unreachable = e.is_io_error()
            || e.is_timeout()
            || e.is_connection_dropped()
            || e.is_connection_refusal()
            || e.is_cluster_error();
        if !self.target.is_cluster() || !unreachable {
            return;
        }
        let mut current = self.current.write().unwrap_or_else(|e| e.into_inner());
        if current
            .as_ref()
            .is_some_and(|(_, opened)| opened.elapsed() >= REOPEN_AFTER)
        {
            *current = None;
        }
    }
}

/// A connection to a [`RedisTarget`]; cheap to clone (every kind is a handle to shared state).
#[derive(Clone)]
pub enum Conn {
    Manager(ConnectionManager),
    Multiplexed(MultiplexedConnection),
    Cluster(ClusterConnection),
}

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Self::Manager(c) => c.req_packed_command(cmd),
            Self::Multiplexed(c) => c.req_packed_command(cmd),
            Self::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Self::Manager(c) => c.req_packed_commands(pipeline, offset, count),
            Self::Multiplexed(c) => c.req_packed_commands(pipeline, offset, count),
            Self::Cluster(c) => c.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Self::Manager(c) => c.get_db(),
            Self::Multiplexed(c) => c.get_db(),
            Self::Cluster(c) => c.get_db(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_redis_or_a_cluster_not_both() {
        let both = RedisTarget::from_settings(Some("redis://a"), Some("redis://b:7000"));
        let err = both.unwrap_err();
        assert!(
            err.contains(URL_VAR) && err.contains(CLUSTER_NODES_VAR),
            "{err}"
        );
        assert!(RedisTarget::from_settings(None, None).unwrap().is_none());
        let cluster = RedisTarget::from_settings(None, Some(" redis://a:7000, redis://b:7001 ,"));
        assert!(cluster.unwrap().unwrap().is_cluster());
        assert!(RedisTarget::cluster(" , ").is_err());
        let bad = RedisTarget::cluster("redis://:secret@a:7000,nonsense://x").unwrap_err();
        assert!(bad.contains("node 2") && !bad.contains("secret"), "{bad}");
    }
}
