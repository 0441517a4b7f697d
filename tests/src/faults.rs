//! The faults, one function each, applied to a running topology while the load runs.

use std::time::Duration;

use crate::topology::Topology;

async fn pause(secs: u64) {
    tokio::time::sleep(Duration::from_secs(secs)).await;
}

/// Runs blocking process control (pg_ctl, redis-server start) off the runtime's threads.
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(f).await.expect("a fault step")
}

/// `kill -9` of a replica: its streams resume on the others through the balancer, its running
/// upstream turns are taken over once its dispatch lease (1.5 s) expires. Then it comes back.
pub async fn kill_replica(top: &mut Topology) {
    top.kill_replica(0);
    pause(4).await;
    top.restart_replica(0).await;
}

/// SIGTERM to every replica in turn, each started again before the next one stops.
pub async fn rolling_restart(top: &mut Topology) {
    for i in 0..top.replicas.len() {
        top.stop_replica(i).await;
        top.restart_replica(i).await;
        pause(1).await;
    }
}

/// `kill -9` of a push worker: the other takes over its stream entries and task leases.
pub async fn kill_worker(top: &mut Topology) {
    top.kill_worker(0);
    pause(6).await;
    top.restart_worker(0).await;
}

/// Both push workers stopped (`kill -9`) while the load goes on, and the worker stream trimmed
/// past everything they had not read (`XTRIM MAXLEN 0`: what the stream's `MAXLEN` cap does to
/// a backlog larger than it, here at once, since a short run never reaches 100,000 entries);
/// then started again. The old workers never saw those entries; now the reconciliation sweep
/// finds every push task behind its event log and delivers the rest from it.
pub async fn workers_stopped_past_the_stream_cap(top: &mut Topology) {
    for i in 0..top.workers.len() {
        top.kill_worker(i);
    }
    pause(4).await;
    let client = redis::Client::open(top.redis().url()).expect("the Redis URL");
    let mut conn = client
        .get_multiplexed_async_connection()
        .await
        .expect("Redis answers");
    let mut trimmed: i64 = 0;
    for p in 0..a2a_bus::keys::DEFAULT_PARTITIONS {
        let n: i64 = redis::cmd("XTRIM")
            .arg(a2a_bus::events_key("sys:", p))
            .arg("MAXLEN")
            .arg(0)
            .query_async(&mut conn)
            .await
            .expect("XTRIM");
        trimmed += n;
    }
    println!("trimmed {trimmed} unread entries of the worker stream");
    for i in 0..top.workers.len() {
        top.restart_worker(i).await;
    }
}

/// Redis restarted (AOF keeps its data), then down for 10 s: the replicas run degraded (no bus:
/// followers poll the event log) and catch up when it is back; the workers resume the stream.
pub async fn redis_outage(top: &mut Topology) {
    let restart = top.redis().restart();
    restart.expect("redis restarts");
    pause(3).await;
    top.redis().terminate().expect("redis stops");
    pause(10).await;
    top.redis().start_again().expect("redis starts again");
}

/// PostgreSQL restarted, then down for 10 s: requests are refused as retryable (503,
/// UNAVAILABLE), never answered wrongly, and everything goes on when it is back.
pub async fn postgres_outage(top: &mut Topology) {
    let pg = top.pg.clone();
    blocking(move || {
        pg.stop().expect("PostgreSQL stops");
        pg.start_again().expect("PostgreSQL starts again");
    })
    .await;
    pause(3).await;
    let pg = top.pg.clone();
    blocking(move || pg.stop().expect("PostgreSQL stops")).await;
    pause(10).await;
    let pg = top.pg.clone();
    blocking(move || pg.start_again().expect("PostgreSQL starts again")).await;
}

/// The upstream agent hangs (SIGSTOP: connections open, nothing answers) for 6 s, then dies
/// (`kill -9`), and a new one starts on its port: turns in flight end terminal (FAILED), new
/// sends are refused as retryable while it is away.
pub async fn upstream_hangs_then_dies(top: &mut Topology) {
    top.upstream_signal("-STOP");
    pause(6).await;
    top.kill_upstream();
    pause(2).await;
    top.restart_upstream().await;
}

/// Every fault, one after the other, under one load.
pub async fn all_in_sequence(top: &mut Topology) {
    kill_replica(top).await;
    pause(2).await;
    rolling_restart(top).await;
    pause(2).await;
    kill_worker(top).await;
    pause(2).await;
    redis_outage(top).await;
    pause(2).await;
    postgres_outage(top).await;
    pause(2).await;
    upstream_hangs_then_dies(top).await;
}

/// A number in `0..n` (the kill schedule; uuid's generator, no extra crate).
fn random_below(n: u64) -> u64 {
    (uuid::Uuid::new_v4().as_u128() % u128::from(n.max(1))) as u64
}

/// How many replicas [`random_replica_kills`] kills (one at a time, each started again before
/// the next): about 30 s of kills under a send loop with push configs.
pub const RANDOM_KILLS: usize = 8;

/// `kill -9` of a random replica at a random moment (0.3–2.5 s apart), [`RANDOM_KILLS`] times,
/// each started again before the next kill: with short turns committing and publishing all the
/// time, some kills land between a commit and its publish (what the event log and the push
/// worker's reconciliation must make up for), some while a turn is being sent upstream (the
/// survivor re-sends it under the same key, and the upstream must run it once).
pub async fn random_replica_kills(top: &mut Topology) {
    let started = std::time::Instant::now();
    for _ in 0..RANDOM_KILLS {
        tokio::time::sleep(Duration::from_millis(300 + random_below(2200))).await;
        let i = random_below(top.replicas.len() as u64) as usize;
        println!(
            "kill -9 gateway-{} at {:.1} s",
            i + 1,
            started.elapsed().as_secs_f64()
        );
        top.kill_replica(i);
        top.restart_replica(i).await;
    }
    // Commits a killed replica left in the outbox (killed between its commit and its publish,
    // or before the row's delete) are relayed by another once older than the relay threshold
    // (5 s by default, passes every second). Counted by the replicas alive now since their last
    // start, so a lower bound of how often the kills hit that window.
    pause(7).await;
    let mut relayed = 0.0;
    for ports in &top.replica_ports {
        let url = format!("http://127.0.0.1:{}/metrics", ports.admin);
        let Ok(resp) = reqwest::get(&url).await else {
            continue;
        };
        let text = resp.text().await.unwrap_or_default();
        relayed += text
            .lines()
            .filter(|l| l.starts_with("a2a_outbox_relayed_total{") && l.contains("left_behind"))
            .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
            .sum::<f64>();
    }
    println!(
        "outbox: {relayed} commits left behind by killed replicas relayed by another (counted \
         by the replicas alive now, since their last start)"
    );
}

/// Redis, without any persistence, killed (SIGKILL, by PID) and started again on its port after
/// 3 s: every stream, consumer group and pending entry is gone. The replicas' followers and the
/// workers must resume (the group is recreated), and the push worker must deliver what the lost
/// stream held from the event log.
pub async fn redis_restart_without_persistence(top: &mut Topology) {
    top.redis().stop().expect("redis stops");
    pause(3).await;
    top.redis().start_again().expect("redis starts again");
    let client = redis::Client::open(top.redis().url()).expect("the Redis URL");
    let mut conn = client
        .get_multiplexed_async_connection()
        .await
        .expect("Redis answers");
    let keys: i64 = redis::cmd("DBSIZE")
        .query_async(&mut conn)
        .await
        .expect("DBSIZE");
    println!("Redis restarted empty ({keys} keys right after the restart)");
}

/// Replica 1 (started behind the PostgreSQL proxy, [`Options::partitionable`]) cut off from
/// PostgreSQL for 12 s while turns run on it (a black hole: its connections stay open, nothing
/// goes through), then healed (what it sent meanwhile arrives late). Its dispatch lease lapses:
/// the others take its turns over, and when the partition heals its late commits are refused
/// (fenced), so no turn is sent upstream twice and nothing is lost.
///
/// [`Options::partitionable`]: crate::topology::Options::partitionable
pub async fn partition_replica_from_postgres(top: &mut Topology) {
    let proxy = top.pg_proxy.as_ref().expect("a replica behind the proxy");
    let before = proxy.forwarded();
    crate::proxy::wait_traffic(proxy, before, Duration::from_secs(10)).await;
    proxy.black_hole();
    println!("gateway-1 cut off from PostgreSQL");
    pause(12).await;
    let proxy = top.pg_proxy.as_ref().expect("a replica behind the proxy");
    proxy.heal();
    println!("gateway-1 reaches PostgreSQL again");
    assert!(
        top.replicas[0].running(),
        "the partitioned replica died:\n{}",
        top.replicas[0].tail(30)
    );
}

/// Large answers (two 1 MiB chunks per send, [`crate::load::BIG_CYCLE`]) for 20 s beside the
/// steady load, on a Redis of 2 MiB (`Options::redis_maxmemory`, `noeviction`): it fills and
/// then refuses writes (OOM); the gateway must answer sends (or refuse them as retryable) and
/// deliver every acknowledged one. Prints Redis's memory and rejections at the end.
pub async fn large_payloads_on_a_small_redis(top: &mut Topology) {
    pause(20).await;
    let client = redis::Client::open(top.redis().url()).expect("the Redis URL");
    let mut conn = client
        .get_multiplexed_async_connection()
        .await
        .expect("Redis answers");
    let info: String = redis::cmd("INFO")
        .arg("all")
        .query_async(&mut conn)
        .await
        .expect("INFO");
    let pick = |name: &str| {
        info.lines()
            .find_map(|l| l.strip_prefix(&format!("{name}:")))
            .unwrap_or("?")
            .trim()
            .to_owned()
    };
    println!(
        "Redis: used_memory {} (maxmemory {}), rejected OOM commands: {}",
        pick("used_memory_human"),
        pick("maxmemory_human"),
        info.lines()
            .find(|l| l.starts_with("errorstat_OOM:"))
            .unwrap_or("errorstat_OOM: none")
    );
}

/// How long the load runs on the promoted primary before the killed node comes back.
const AFTER_PROMOTION: Duration = Duration::from_secs(8);

/// On a Redis Cluster topology ([`Options::redis_cluster`]): `kill -9` of the primary serving
/// the worker's partition 0 (every commit of a task of that partition is published there, and
/// it serves some of the task stream groups too: the run's keys are hash-tagged per group and
/// partition, spread over the three primaries). Its replica is promoted after the node timeout
/// (1 s); until then commands for its slots fail (publishes are kept in the outbox and
/// republished, followers fall back to the event log). The load runs on for
/// [`AFTER_PROMOTION`], then the killed node is started again (empty, no persistence) and must
/// rejoin as the promoted node's replica.
///
/// [`Options::redis_cluster`]: crate::topology::Options::redis_cluster
pub async fn redis_cluster_primary_failover(top: &mut Topology) {
    let cluster = top.redis_cluster().clone();
    let key = a2a_bus::events_key("sys:", 0);
    let (victim, promoted, took) = blocking(move || {
        let victim = cluster
            .primary_of(&key)
            .unwrap_or_else(|e| panic!("the primary of {key}: {e}"));
        let keys = cluster
            .dbsize(victim)
            .unwrap_or_else(|e| panic!("DBSIZE: {e}"));
        assert!(
            keys > 0,
            "the primary {victim} of {key} holds none of the run's keys"
        );
        println!("kill -9 of the cluster primary on port {victim} ({keys} keys; serves {key})");
        cluster
            .kill(victim)
            .unwrap_or_else(|e| panic!("killing {victim}: {e}"));
        let killed = std::time::Instant::now();
        let promoted = cluster
            .wait_promoted(&key, victim, Duration::from_secs(30))
            .unwrap_or_else(|e| panic!("{e}"));
        let took = killed.elapsed();
        let role = cluster.role(promoted).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(role, "master", "the node serving {key} now");
        (victim, promoted, took)
    })
    .await;
    println!(
        "replica on port {promoted} promoted, cluster_state:ok, {:.1} s after the kill",
        took.as_secs_f64()
    );
    tokio::time::sleep(AFTER_PROMOTION).await;
    let cluster = top.redis_cluster().clone();
    blocking(move || {
        cluster
            .restart(victim)
            .unwrap_or_else(|e| panic!("restarting {victim}: {e}"));
        cluster
            .wait_replica(victim, Duration::from_secs(30))
            .unwrap_or_else(|e| panic!("{e}"));
    })
    .await;
    println!("the killed node {victim} is back, a replica of {promoted}");
}
