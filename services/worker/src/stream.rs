//! The worker's side of its input, the partitions `{<prefix>events:<p>}` (see
//! `a2a_bus::events_key`): one consumer of a consumer group on each. Reads block on a connection of their own; acknowledgements,
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

/// One consumer (`name`) of `group` on each partition of the worker's input (`keys[p]` is
/// partition `p`). Entry ids handed to the pipeline name their partition, `<p>/<ms>-<seq>`
/// ([`tag`]), so acknowledgements and heartbeats reach the right stream.
#[derive(Clone)]
pub struct Consumer {
    target: RedisTarget,
    /// Acknowledgements, take-overs, heartbeats (reopened after a cluster node failed it).
    conn: Arc<SharedConn>,
    pub keys: Vec<String>,
    pub group: String,
    pub name: String,
}

/// The id the pipeline holds for entry `id` of partition `partition`.
pub fn tag(partition: usize, id: &str) -> String {
    format!("{partition}/{id}")
}

/// The partition and stream id of a [`tag`]ged id (`None`: not one of ours).
pub fn untag(tagged: &str) -> Option<(usize, &str)> {
    let (p, id) = tagged.split_once('/')?;
    Some((p.parse().ok()?, id))
}

impl Consumer {
    pub async fn connect(
        target: RedisTarget,
        keys: Vec<String>,
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
            keys,
            group,
            name,
        })
    }

    /// Creates the group on every partition where it does not exist, starting at the beginning
    /// of the stream: events committed before the first worker started are delivered too.
    pub async fn ensure_group(&self) -> RedisResult<()> {
        for key in &self.keys {
            let created: RedisResult<()> = redis::cmd("XGROUP")
                .arg("CREATE")
                .arg(key)
                .arg(&self.group)
                .arg("0")
                .arg("MKSTREAM")
                .query_via(self)
                .await;
            match created {
                Err(e) if e.code() == Some("BUSYGROUP") => {}
                other => other?,
            }
        }
        Ok(())
    }

    /// Which partitions one blocking read names: all of them on one Redis (one `XREADGROUP`
    /// over every partition), each alone on a cluster (the partitions are on different slots,
    /// so different nodes; each gets a reader of its own).
    pub fn read_sets(&self) -> Vec<Vec<usize>> {
        let all: Vec<usize> = (0..self.keys.len()).collect();
        if self.target.is_cluster() {
            all.into_iter().map(|p| vec![p]).collect()
        } else {
            vec![all]
        }
    }

    /// A connection for blocking reads.
    pub async fn reader(&self) -> RedisResult<Conn> {
        self.target.blocking(Duration::from_millis(BLOCK_MS)).await
    }

    /// New entries of `partitions` for this consumer (waits up to a second for some), each
    /// with its partition.
    pub async fn read(
        &self,
        conn: &mut Conn,
        partitions: &[usize],
    ) -> RedisResult<Vec<(usize, StreamId)>> {
        let mut cmd = redis::cmd("XREADGROUP");
        cmd.arg("GROUP")
            .arg(&self.group)
            .arg(&self.name)
            .arg("COUNT")
            .arg(READ_COUNT)
            .arg("BLOCK")
            .arg(BLOCK_MS)
            .arg("STREAMS");
        for &p in partitions {
            cmd.arg(&self.keys[p]);
        }
        for _ in partitions {
            cmd.arg(">");
        }
        let reply: Option<StreamReadReply> = cmd.query_async(conn).await?;
        let by_key: std::collections::HashMap<&str, usize> = partitions
            .iter()
            .map(|&p| (self.keys[p].as_str(), p))
            .collect();
        Ok(reply
            .map(|r| {
                r.keys
                    .into_iter()
                    .filter_map(|k| {
                        let p = *by_key.get(k.key.as_str())?;
                        Some(k.ids.into_iter().map(move |id| (p, id)))
                    })
                    .flatten()
                    .collect()
            })
            .unwrap_or_default())
    }

    /// Takes over entries of `partition` idle for `min_idle` on any consumer, from `start`;
    /// returns the next start (`0-0` when the scan is complete), the entries, and ids no longer
    /// in the stream.
    pub async fn take_over(
        &self,
        partition: usize,
        min_idle: Duration,
        start: &str,
    ) -> RedisResult<StreamAutoClaimReply> {
        redis::cmd("XAUTOCLAIM")
            .arg(&self.keys[partition])
            .arg(&self.group)
            .arg(&self.name)
            .arg(min_idle.as_millis() as u64)
            .arg(start)
            .arg("COUNT")
            .arg(CLAIM_COUNT)
            .query_via(self)
            .await
    }

    /// Groups [`tag`]ged ids by partition (ids that are not ours are dropped).
    fn by_partition<'a>(
        &self,
        ids: &'a [String],
    ) -> std::collections::BTreeMap<usize, Vec<&'a str>> {
        let mut out: std::collections::BTreeMap<usize, Vec<&str>> = Default::default();
        for (p, id) in ids.iter().filter_map(|t| untag(t)) {
            if p < self.keys.len() {
                out.entry(p).or_default().push(id);
            }
        }
        out
    }

    /// Resets the idle time of entries this consumer is still working on, so that no other
    /// worker takes them over (the heartbeat).
    pub async fn touch(&self, ids: &[String]) -> RedisResult<()> {
        for (p, ids) in self.by_partition(ids) {
            for chunk in ids.chunks(1000) {
                redis::cmd("XCLAIM")
                    .arg(&self.keys[p])
                    .arg(&self.group)
                    .arg(&self.name)
                    .arg(0)
                    .arg(chunk)
                    .arg("JUSTID")
                    .query_via::<redis::Value>(self)
                    .await?;
            }
        }
        Ok(())
    }

    /// Acknowledges [`tag`]ged ids.
    pub async fn ack(&self, ids: &[String]) -> RedisResult<()> {
        for (p, ids) in self.by_partition(ids) {
            redis::cmd("XACK")
                .arg(&self.keys[p])
                .arg(&self.group)
                .arg(ids)
                .query_via::<()>(self)
                .await?;
        }
        Ok(())
    }

    /// The group's `lag` (entries not read yet; Redis 7) and `pending` (read, not acknowledged),
    /// summed over the partitions.
    pub async fn group_state(&self) -> RedisResult<(Option<i64>, Option<i64>)> {
        let (mut lag, mut pending) = (None::<i64>, None::<i64>);
        for key in &self.keys {
            let groups: Vec<std::collections::HashMap<String, redis::Value>> = redis::cmd("XINFO")
                .arg("GROUPS")
                .arg(key)
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
            if let Some(l) = field("lag") {
                lag = Some(lag.unwrap_or(0) + l);
            }
            if let Some(n) = field("pending") {
                pending = Some(pending.unwrap_or(0) + n);
            }
        }
        Ok((lag, pending))
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
