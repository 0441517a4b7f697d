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
    let client = redis::Client::open(top.redis.url()).expect("the Redis URL");
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
    let restart = top.redis.restart();
    restart.expect("redis restarts");
    pause(3).await;
    top.redis.terminate().expect("redis stops");
    pause(10).await;
    top.redis.start_again().expect("redis starts again");
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
