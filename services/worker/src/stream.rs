//! The worker's side of the Redis stream `{prefix}events` (see `a2a_bus::events_key`): one
//! consumer of a consumer group. Reads block on a connection of their own; acknowledgements,
//! take-overs and heartbeats share a second, multiplexed one, so they never wait behind a read.

use std::time::Duration;

use std::sync::Arc;

use a2a_bus::{Conn, Patience, RedisTarget, SharedConn};
use redis::RedisResult;
use redis::streams::{StreamAutoClaimReply, StreamId, StreamReadReply};

/// Entries read per XREADGROUP.
const READ_COUNT: usize = 512;
/// How long one XREADGROUP waits for new entries.
const BLOCK_MS: u64 = 1000;
/// Entries taken over per XAUTOCLAIM call.
const CLAIM_COUNT: usize = 512;

/// One consumer (`name`) of `group` on the stream `key`.
#[derive(Clone)]
pub struct Consumer {
    target: RedisTarget,
    /// Acknowledgements, take-overs, heartbeats (reopened after a cluster node failed it).
    conn: Arc<SharedConn>,
    pub key: String,
    pub group: String,
    pub name: String,
}

impl Consumer {
    pub async fn connect(
        target: RedisTarget,
        key: String,
        group: String,
        name: String,
    ) -> RedisResult<Self> {
        let patience = Patience {
            connect: Duration::from_secs(2),
            response: Duration::from_secs(5),
            retries: 6,
        };
        let conn = Arc::new(SharedConn::new(target.clone(), patience));
        conn.get().await?;
        Ok(Self {
            target,
            conn,
            key,
            group,
            name,
        })
    }

    /// Creates the group if it does not exist, starting at the beginning of the stream: events
    /// committed before the first worker started are delivered too.
    pub async fn ensure_group(&self) -> RedisResult<()> {
        let created: RedisResult<()> = redis::cmd("XGROUP")
            .arg("CREATE")
            .arg(&self.key)
            .arg(&self.group)
            .arg("0")
            .arg("MKSTREAM")
            .query_via(self)
            .await;
        match created {
            Err(e) if e.code() == Some("BUSYGROUP") => Ok(()),
            other => other,
        }
    }

    /// A connection for blocking reads.
    pub async fn reader(&self) -> RedisResult<Conn> {
        self.target.blocking(Duration::from_millis(BLOCK_MS)).await
    }

    /// New entries for this consumer (waits up to a second for some).
    pub async fn read(&self, conn: &mut Conn) -> RedisResult<Vec<StreamId>> {
        let reply: Option<StreamReadReply> = redis::cmd("XREADGROUP")
            .arg("GROUP")
            .arg(&self.group)
            .arg(&self.name)
            .arg("COUNT")
            .arg(READ_COUNT)
            .arg("BLOCK")
            .arg(BLOCK_MS)
            .arg("STREAMS")
            .arg(&self.key)
            .arg(">")
            .query_async(conn)
            .await?;
        Ok(reply
            .map(|r| r.keys.into_iter().flat_map(|k| k.ids).collect())
            .unwrap_or_default())
    }

    /// Takes over entries idle for `min_idle` on any consumer, from `start`; returns the next
    /// start (`0-0` when the scan is complete), the entries, and ids no longer in the stream.
    pub async fn take_over(
        &self,
        min_idle: Duration,
        start: &str,
    ) -> RedisResult<StreamAutoClaimReply> {
        redis::cmd("XAUTOCLAIM")
            .arg(&self.key)
            .arg(&self.group)
            .arg(&self.name)
            .arg(min_idle.as_millis() as u64)
            .arg(start)
            .arg("COUNT")
            .arg(CLAIM_COUNT)
            .query_via(self)
            .await
    }

    /// Resets the idle time of entries this consumer is still working on, so that no other
    /// worker takes them over (the heartbeat).
    pub async fn touch(&self, ids: &[String]) -> RedisResult<()> {
        for chunk in ids.chunks(1000) {
            redis::cmd("XCLAIM")
                .arg(&self.key)
                .arg(&self.group)
                .arg(&self.name)
                .arg(0)
                .arg(chunk)
                .arg("JUSTID")
                .query_via::<redis::Value>(self)
                .await?;
        }
        Ok(())
    }

    pub async fn ack(&self, ids: &[String]) -> RedisResult<()> {
        if ids.is_empty() {
            return Ok(());
        }
        redis::cmd("XACK")
            .arg(&self.key)
            .arg(&self.group)
            .arg(ids)
            .query_via(self)
            .await
    }

    /// The group's `lag` (entries not read yet; Redis 7) and `pending` (read, not acknowledged).
    pub async fn group_state(&self) -> RedisResult<(Option<i64>, Option<i64>)> {
        let groups: Vec<std::collections::HashMap<String, redis::Value>> = redis::cmd("XINFO")
            .arg("GROUPS")
            .arg(&self.key)
            .query_via(self)
            .await?;
        let ours = groups.into_iter().find(|g| {
            g.get("name")
                .and_then(|v| redis::from_redis_value_ref::<String>(v).ok())
                .is_some_and(|n| n == self.group)
        });
        let field = |name: &str| {
            ours.as_ref()
                .and_then(|g| g.get(name))
                .and_then(|v| redis::from_redis_value_ref::<i64>(v).ok())
        };
        Ok((field("lag"), field("pending")))
    }
}

/// Whether Redis answered that the stream or the consumer group does not exist: Redis lost
/// them (a restart without persistence, a failover to a replica without them, a FLUSHALL).
pub fn is_nogroup(e: &redis::RedisError) -> bool {
    e.code() == Some("NOGROUP")
}

/// The pipeline acknowledges what it is done with to the group.
#[async_trait::async_trait]
impl a2a_delivery::Acknowledge for Consumer {
    async fn ack(&self, ids: &[String]) -> Result<(), String> {
        Consumer::ack(self, ids).await.map_err(|e| e.to_string())
    }
}

/// The milliseconds part of a stream id: when Redis appended the entry.
pub fn id_millis(id: &str) -> Option<u64> {
    id.split_once('-').and_then(|(ms, _)| ms.parse().ok())
}

/// Sends a command on the consumer's shared connection; a failure to reach a cluster node makes
/// the next command open it anew (see [`SharedConn`]).
trait QueryVia {
    async fn query_via<T: redis::FromRedisValue>(&self, consumer: &Consumer) -> RedisResult<T>;
}

impl QueryVia for redis::Cmd {
    async fn query_via<T: redis::FromRedisValue>(&self, consumer: &Consumer) -> RedisResult<T> {
        let mut conn = consumer.conn.get().await?;
        let result = self.query_async(&mut conn).await;
        if let Err(e) = &result {
            consumer.conn.failed(e).await;
        }
        result
    }
}
