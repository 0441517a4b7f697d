//! The system suite (README, *Reliability*): the deployed topology under load while one process
//! or service fails, then every fault in sequence; each scenario accounts for every operation
//! and fails on any loss. `A2A_SYSTEM_LONG=1` lengthens the load around each fault.

use a2a_system_tests::load::{BIG_CYCLE, CYCLE, PUSH_CYCLE};
use a2a_system_tests::topology::Options;
use a2a_system_tests::{CLIENTS_PER_BINDING, faults, run_scenario, run_scenario_with};

// Several runtime threads: the harness waits on processes while the load clients run.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kill_9_of_a_replica() {
    run_scenario("kill -9 replica", faults::kill_replica).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn rolling_restart_of_every_replica() {
    run_scenario("rolling restart", faults::rolling_restart).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kill_9_of_a_worker() {
    run_scenario("kill -9 worker", faults::kill_worker).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn workers_stopped_past_the_stream_cap() {
    run_scenario(
        "workers stopped past the stream cap",
        faults::workers_stopped_past_the_stream_cap,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn redis_restart_and_outage() {
    run_scenario("redis down", faults::redis_outage).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_restart_and_outage() {
    run_scenario("postgres down", faults::postgres_outage).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn upstream_hangs_then_dies() {
    run_scenario("upstream dies", faults::upstream_hangs_then_dies).await;
}

/// `kill -9` of random replicas at random moments (8 kills in about 30 s) under the steady load
/// and a send loop with push configs: no push lost, no turn run twice upstream.
///
/// A replica killed while it creates a send's task cannot leave the task without its inline
/// push config: the task, its config and the config's delivery progress (from the task as
/// created) are one write (`Runner::create`, `NewTask::push`). When they were two writes, a kill
/// between them lost the task's pushes (the webhook got nothing).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn random_kills_of_replicas_during_a_push_send_loop() {
    run_scenario_with(
        "random kills",
        Options::default(),
        &[(&CYCLE, CLIENTS_PER_BINDING), (&PUSH_CYCLE, 1)],
        faults::random_replica_kills,
    )
    .await;
}

/// Redis without persistence killed and started again: every stream and group gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn redis_restart_without_persistence() {
    run_scenario_with(
        "redis lost all",
        Options {
            redis_aof: false,
            ..Options::default()
        },
        &[(&CYCLE, CLIENTS_PER_BINDING), (&PUSH_CYCLE, 1)],
        faults::redis_restart_without_persistence,
    )
    .await;
}

/// A 3-primary Redis Cluster (each primary with a replica): `kill -9` of a primary under the
/// steady load and a send loop with push configs, its replica promoted, the killed node started
/// again as a replica.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn redis_cluster_primary_failover() {
    run_scenario_with(
        "cluster failover",
        Options {
            redis_cluster: true,
            ..Options::default()
        },
        &[(&CYCLE, CLIENTS_PER_BINDING), (&PUSH_CYCLE, 1)],
        faults::redis_cluster_primary_failover,
    )
    .await;
}

/// A tarpit webhook tenant beside a healthy one: the healthy tenant's delivery latency beside a
/// second tenant whose three senders push to a tarpit (429 with `Retry-After: 600`, or 30 s stalls)
/// is bounded by its latency beside the same three senders pushing to a healthy webhook (the
/// control phase: identical load, no tarpit): p50 within twice the control's (never below 100 ms),
/// p99 within twice the control's (never below 200 ms). Its latency alone comes first and is
/// reported, not bounded.
///
/// Why the control phase (issue 27): bounded against the phase alone, the scenario failed on a
/// quiet machine (p50 25 ms / p99 154 ms alone, 151 ms / 1.10 s beside the tarpit). The control
/// shows that jump is the second tenant's sends on two cores, not the tarpit holding delivery
/// capacity: 27 runs on this 2-core machine shared with other builds (2026-11-28), alone p50 18-142
/// ms, p99 131-752 ms; beside the healthy load p50 84-215 ms, p99 307-1076 ms; beside the tarpit
/// p50 82-210 ms, p99 338-1392 ms; p50 beside the tarpit / beside the healthy load 0.71-1.36. A
/// worker that lets the tarpit hold shared slots fails at once (`A2A_WORKER_CONCURRENCY=8` and
/// `A2A_WORKER_DESTINATION_CONCURRENCY=8`: p50 4.7 s, p99 18.9 s beside the tarpit against 195 ms
/// and 550 ms beside the healthy load).
///
/// Found by making the phases 30 s (they were 15 s) and fixed: each task a worker held renewed
/// its lease with a statement of its own every second, and beside the tarpit a worker holds
/// hundreds (p99 beside the tarpit 2.4-4.0 times the control's in 4 runs of 4); the worker now
/// renews them all in one statement (1.10-1.70 in 6 runs of 7, and 2.56 in the seventh, in the
/// worker's part of the latency: from the event's stream entry to the webhook). That tail was a
/// worker polling a lease the other worker held, every 100 ms backing off to 5 s (11,659 claims
/// in the tarpit phase, and 1,080 even in the control's: a healthy task's next event waited for
/// the poll after its holder was done). Now the entries are left to the holder, which keeps the
/// lease while the task's log goes on and delivers the rest from the log: on one machine, minutes
/// apart (2026-11-29), the control's p50 / p99 went from 53 / 169 ms to 30-43 / 85-112 ms in 3
/// runs, and the p99 beside the tarpit from 1.16 times the control's to 0.75-1.19.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_tarpit_tenant_beside_a_healthy_one() {
    a2a_system_tests::tenants::tarpit_beside_a_healthy_tenant().await;
}

/// Sends answered with two 1 MiB chunks beside the steady load, Redis at 2 MiB (noeviction). It
/// was 64 MiB, which the load filled while every commit also went to the worker's stream; since
/// only tasks with push configs do, the run ended at 3 MiB used and no write refused, so the
/// scenario no longer saw a full Redis. At 2 MiB it fills in seconds and refuses writes (3,520
/// in the first run, 2026-11-29): publishes stay in the outbox, followers and the worker read
/// the event log.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn large_payloads_on_a_small_redis() {
    run_scenario_with(
        "1 MiB, redis 2mb",
        Options {
            redis_maxmemory: Some("2mb"),
            ..Options::default()
        },
        &[(&CYCLE, CLIENTS_PER_BINDING), (&BIG_CYCLE, 1)],
        faults::large_payloads_on_a_small_redis,
    )
    .await;
}

/// One replica cut off from PostgreSQL (a black-holing proxy) for 12 s while its turns run: a
/// survivor takes them over, the stale runners' commits are refused (fencing), no turn runs
/// twice upstream, no push is lost. A send's inline push config is written with its task (one
/// transaction): when it came second, its write could hang in the partition and land after a
/// survivor had completed the task, so the webhook got only the last event.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_replica_partitioned_from_postgres() {
    run_scenario_with(
        "pg partition",
        Options {
            partitionable: Some(0),
            ..Options::default()
        },
        &[(&CYCLE, CLIENTS_PER_BINDING), (&PUSH_CYCLE, 1)],
        faults::partition_replica_from_postgres,
    )
    .await;
}

/// Every fault above in sequence.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_fault_in_sequence() {
    run_scenario("all in sequence", faults::all_in_sequence).await;
}

/// The soak (README, *Reliability*): `A2A_SYSTEM_LONG=1 cargo nextest run -p a2a-system-tests
/// --run-ignored all` (5 minutes of load; `A2A_SYSTEM_SOAK_SECS` to change): the replicas' RSS
/// and open descriptors stay flat and nothing is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "the soak runs in the long mode: A2A_SYSTEM_LONG=1 ... --run-ignored all"]
async fn soak_keeps_memory_and_descriptors_flat() {
    a2a_system_tests::soak().await;
}
