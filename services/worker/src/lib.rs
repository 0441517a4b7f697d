//! `a2a-worker`: delivers push notifications.
//!
//! Layout: [`config`] (environment), [`stream`] (the Redis consumer group), [`retention`]
//! (pruning the delivery log), [`sweep`] (the reconciliation against the ledger),
//! [`dead_letters`] and [`keygen`] (the CLI). Delivery itself —
//! [`pipeline`], [`deliver`], [`webhook`], [`metrics`] — is `a2a-delivery`, which the embedded
//! gateway runs too; here it reads the consumer group and keeps its state in PostgreSQL. [`run`]
//! assembles them and serves `/metrics` and `/healthz` until a shutdown token fires.
//!
//! *Invariant*: the ledger (`push_progress` against `tasks.seq` and the event log) is the record
//! of what must be delivered; the stream wakes the worker. An entry is acknowledged once its
//! task's lease and progress cover it (or it was left to the sweep); whatever Redis loses,
//! trims or never got is found by the sweep and delivered from the event log, in order.

pub mod cli;
pub mod config;
pub mod dead_letters;
pub mod keygen;
pub mod retention;
pub mod stream;
pub mod sweep;

pub use a2a_delivery::{deliver, metrics, pipeline, webhook};

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use a2a_store::pg::PgDeliveryStore;
use a2a_store::pg::health::Health;
use axum::Router;
use axum::routing::get;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::config::WorkerConfig;
use crate::deliver::{Deliverer, LogSink};
use crate::pipeline::{Dispatched, Entry, Pipeline};
use crate::stream::{Consumer, id_millis, is_nogroup};
use crate::webhook::Webhooks;

/// How long a stopping worker waits for its in-flight deliveries before it exits (what is left
/// is taken over by another worker after the claim idle time).
const DRAIN: Duration = Duration::from_secs(10);
/// How long the read loop waits for room in the pipeline before it reads anyway (what then
/// finds the queue full is left to the sweep: the reader never stalls for good).
const ROOM_WAIT: Duration = Duration::from_secs(2);

/// The database connection the configuration names.
pub fn store(config: &WorkerConfig) -> Result<PgDeliveryStore, String> {
    PgDeliveryStore::connect_lazy(
        &config.database_url,
        config.pool_size,
        Duration::from_secs(3),
    )
    .map_err(|e| format!("A2A_DATABASE_URL: {e}"))
}

/// The HTTP sender the configuration describes.
pub fn webhooks(config: &WorkerConfig) -> Result<Webhooks, String> {
    Webhooks::new(
        config.policy.clone(),
        config.keys.clone(),
        &config.issuer,
        config.token_ttl,
        config.attempt_timeout,
    )
}

/// Runs the worker until `shutdown` fires: consumes, delivers, serves `/metrics`, `/healthz`
/// and `/readyz` on `listener`. Consumes only once the database schema is this binary's.
pub async fn run(
    config: WorkerConfig,
    listener: TcpListener,
    shutdown: CancellationToken,
) -> Result<(), String> {
    let redis = config.check_serve()?;
    let store = store(&config)?;
    if config.migrate {
        store.migrate().await.map_err(|e| e.to_string())?;
    }
    let handle = a2a_process::metrics::install("a2a-worker", env!("CARGO_PKG_VERSION"));
    metrics::group(None, None);
    // Served from here on: `/healthz` for the startup probe while the schema gate and Redis are
    // awaited, `/readyz` once both passed (see `Readiness`).
    let ready = Readiness {
        health: Arc::new(Health::of(store.pool())),
        consuming: Arc::new(AtomicBool::new(false)),
    };
    let server = tokio::spawn(serve_http(
        listener,
        handle,
        ready.clone(),
        shutdown.clone(),
    ));
    wait_for_schema(&ready.health, &shutdown).await?;
    let consumer = connect(&config, &redis, &shutdown).await?;
    ready.consuming.store(true, Ordering::Relaxed);
    let (log, log_task) = LogSink::spawn(Arc::new(store.clone()), config.name.clone());
    let deliverer = Deliverer {
        store: Arc::new(store.clone()),
        webhooks: webhooks(&config)?,
        retry: config.retry,
        log,
        gates: Arc::new(a2a_delivery::gates::Gates::new(config.limits)),
        dead_letters_per_owner: config.dead_letters_per_owner,
    };
    let pipeline = Pipeline::new(
        deliverer,
        Arc::new(consumer.clone()),
        consumer.name.clone(),
        config.lease,
    );
    let sweeping = tokio::spawn(sweep::run(
        pipeline.clone(),
        Arc::new(store.clone()),
        config.sweep_batch,
        config.sweep_interval,
        shutdown.clone(),
    ));
    let pruning = tokio::spawn(retention::run(
        store,
        config.log_retention,
        shutdown.clone(),
    ));
    let maintenance = tokio::spawn(maintain(
        pipeline.clone(),
        consumer.clone(),
        config.claim_idle,
        shutdown.clone(),
    ));
    tracing::info!(consumer = %consumer.name, group = %consumer.group,
        partitions = consumer.keys.len(), "a2a-worker consuming");
    // One reader per read set: every partition in one XREADGROUP on one Redis, one reader per
    // partition on a cluster (they are on different nodes).
    let readers = consumer
        .read_sets()
        .into_iter()
        .map(|set| read_loop(&pipeline, &consumer, set, &shutdown));
    futures::future::join_all(readers).await;
    // Drain: no more reads; let the runners finish what they hold, for a while.
    let deadline = tokio::time::Instant::now() + DRAIN;
    while pipeline.in_flight() > 0 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    maintenance.abort();
    sweeping.abort();
    pruning.abort();
    drop(pipeline);
    let _ = tokio::time::timeout(Duration::from_secs(2), log_task).await;
    let _ = server.await;
    Ok(())
}

/// What the worker's `/readyz` reads: the schema gate and PostgreSQL on a dedicated connection
/// (`a2a_store::pg::health`), and whether the consumer group was joined.
#[derive(Clone)]
struct Readiness {
    health: Arc<Health>,
    consuming: Arc<AtomicBool>,
}

/// Waits until the database holds this binary's schema (a worker must not deliver against
/// another one: its statements would fail or misread), logging why at every attempt.
async fn wait_for_schema(health: &Health, shutdown: &CancellationToken) -> Result<(), String> {
    loop {
        match health.check().await {
            Ok(()) => {
                tracing::info!("the database schema matches this binary's migrations");
                return Ok(());
            }
            Err(e)
                if e.to_string()
                    .contains(a2a_store::pg::health::SCHEMA_MISMATCH) =>
            {
                tracing::error!("{e}; waiting for it to match before consuming")
            }
            Err(e) => tracing::warn!(error = %e, "cannot check the database schema yet; retrying"),
        }
        tokio::select! {
            _ = shutdown.cancelled() => return Err("stopped before the database schema matched".into()),
            _ = tokio::time::sleep(Duration::from_secs(5)) => {}
        }
    }
}

async fn connect(
    config: &WorkerConfig,
    redis: &a2a_bus::RedisTarget,
    shutdown: &CancellationToken,
) -> Result<Consumer, String> {
    let keys: Vec<String> = (0..config.redis_partitions)
        .map(|p| a2a_bus::events_key(&config.redis_prefix, p))
        .collect();
    let mut wait = Duration::from_millis(200);
    loop {
        let attempt = async {
            let c = Consumer::connect(
                redis.clone(),
                keys.clone(),
                config.group.clone(),
                config.name.clone(),
            )
            .await?;
            c.ensure_group().await?;
            Ok::<_, redis::RedisError>(c)
        };
        match attempt.await {
            Ok(c) => return Ok(c),
            Err(e) => tracing::warn!(error = %e, "cannot reach Redis yet; retrying"),
        }
        tokio::select! {
            _ = shutdown.cancelled() => return Err("stopped before Redis was reachable".into()),
            _ = tokio::time::sleep(wait) => {}
        }
        wait = (wait * 2).min(Duration::from_secs(5));
    }
}

/// Reads new entries and dispatches them, until shutdown.
async fn read_loop(
    pipeline: &Arc<Pipeline>,
    consumer: &Consumer,
    partitions: Vec<usize>,
    shutdown: &CancellationToken,
) {
    let mut wait = Duration::from_millis(100);
    'connect: while !shutdown.is_cancelled() {
        let mut conn = match consumer.reader().await {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(error = %e, "cannot connect to Redis to read; retrying");
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(Duration::from_secs(5));
                continue;
            }
        };
        wait = Duration::from_millis(100);
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::timeout(ROOM_WAIT, pipeline.wait_for_room()) => {}
            }
            let entries = tokio::select! {
                _ = shutdown.cancelled() => return,
                read = consumer.read(&mut conn, &partitions) => match read {
                    Ok(entries) => entries,
                    Err(e) if is_nogroup(&e) => {
                        recreate_group(consumer).await;
                        continue;
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "reading the event stream failed; reconnecting");
                        tokio::time::sleep(wait).await;
                        continue 'connect;
                    }
                },
            };
            dispatch_all(pipeline, consumer, entries).await;
        }
    }
}

/// The group is gone (Redis lost it): creates it again, at the start of what the stream holds
/// now. What Redis lost with it is behind in the ledger, where the sweep finds it.
async fn recreate_group(consumer: &Consumer) {
    match consumer.ensure_group().await {
        Ok(()) => {
            metrics::group_recreated();
            tracing::warn!(group = %consumer.group, partitions = consumer.keys.len(),
                "the consumer group was missing (Redis lost it); created it again, the sweep \
                 delivers what was lost from the event log");
        }
        Err(e) => {
            tracing::warn!(error = %e, "cannot create the consumer group again yet");
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
}

/// Decodes and dispatches entries; one that names no task, or that the pipeline left to the
/// ledger (its queue is full), is acknowledged.
async fn dispatch_all(
    pipeline: &Arc<Pipeline>,
    consumer: &Consumer,
    entries: Vec<(usize, redis::streams::StreamId)>,
) {
    let mut done = Vec::new();
    for (partition, entry) in entries {
        match decode(partition, &entry) {
            Some(e) => {
                let id = e.id.clone();
                if let Dispatched::Deferred(_) = pipeline.dispatch(e) {
                    done.push(id);
                }
            }
            None => {
                tracing::warn!(id = %entry.id, partition, "skipping a stream entry without a task");
                done.push(stream::tag(partition, &entry.id));
            }
        }
    }
    if let Err(e) = consumer.ack(&done).await {
        tracing::warn!(error = %e, "cannot acknowledge skipped entries");
    }
}

/// An entry of partition `partition`, for the pipeline (its id [`stream::tag`]ged).
fn decode(partition: usize, entry: &redis::streams::StreamId) -> Option<Entry> {
    let published_ms = id_millis(&entry.id);
    if let Some(ev) = a2a_bus::decode_entry(entry) {
        return Some(Entry {
            id: stream::tag(partition, &entry.id),
            task_id: ev.task_id,
            seq: ev.seq,
            event: Some(ev.event),
            published_ms,
            trace: ev.trace,
        });
    }
    // A payload this build cannot read: the task and sequence number suffice, the event log
    // has the event.
    let task_id: String = entry.get("t")?;
    let seq: u64 = entry.get("s").filter(|s| *s > 0)?;
    Some(Entry {
        id: stream::tag(partition, &entry.id),
        task_id,
        seq,
        event: None,
        published_ms,
        trace: entry.get("tp"),
    })
}

/// The heartbeat (keeps this worker's entries from being taken over), the take-over of
/// entries idle on a stopped worker (XAUTOCLAIM), and the group's lag for the metrics.
async fn maintain(
    pipeline: Arc<Pipeline>,
    consumer: Consumer,
    claim_idle: Duration,
    shutdown: CancellationToken,
) {
    let mut tick = tokio::time::interval((claim_idle / 3).min(Duration::from_secs(5)));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tick.tick() => {}
        }
        let held = pipeline.in_flight_ids();
        if let Err(e) = consumer.touch(&held).await {
            tracing::warn!(error = %e, "heartbeat failed");
        }
        take_over(&pipeline, &consumer, claim_idle).await;
        match consumer.group_state().await {
            Ok((lag, pending)) => metrics::group(lag, pending),
            Err(e) => tracing::debug!(error = %e, "XINFO GROUPS failed"),
        }
    }
}

async fn take_over(pipeline: &Arc<Pipeline>, consumer: &Consumer, claim_idle: Duration) {
    for partition in 0..consumer.keys.len() {
        take_over_in(pipeline, consumer, partition, claim_idle).await;
    }
}

async fn take_over_in(
    pipeline: &Arc<Pipeline>,
    consumer: &Consumer,
    partition: usize,
    claim_idle: Duration,
) {
    let mut start = "0-0".to_owned();
    // Bounded per tick, so a huge backlog of stalled entries does not starve the heartbeat.
    for _ in 0..16 {
        let reply = match consumer.take_over(partition, claim_idle, &start).await {
            Ok(r) => r,
            Err(e) if is_nogroup(&e) => {
                recreate_group(consumer).await;
                return;
            }
            Err(e) => {
                tracing::warn!(error = %e, "XAUTOCLAIM failed");
                return;
            }
        };
        if !reply.claimed.is_empty() {
            tracing::info!(
                entries = reply.claimed.len(),
                "took over entries idle on a stalled consumer"
            );
            metrics::reclaimed(reply.claimed.len());
        }
        let claimed = reply.claimed.into_iter().map(|e| (partition, e)).collect();
        dispatch_all(pipeline, consumer, claimed).await;
        // Entries trimmed from the stream while pending: the event log has them, and the sweep
        // finds their task behind it.
        let deleted: Vec<String> = reply
            .deleted_ids
            .iter()
            .map(|id| stream::tag(partition, id))
            .collect();
        if let Err(e) = consumer.ack(&deleted).await {
            tracing::warn!(error = %e, "cannot acknowledge trimmed entries");
        }
        if reply.next_stream_id == "0-0" {
            return;
        }
        start = reply.next_stream_id;
    }
}

async fn serve_http(
    listener: TcpListener,
    handle: metrics_exporter_prometheus::PrometheusHandle,
    ready: Readiness,
    shutdown: CancellationToken,
) {
    let app = Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route(
            "/readyz",
            get(move || {
                let ready = ready.clone();
                async move {
                    use axum::http::StatusCode;
                    if !ready.consuming.load(Ordering::Relaxed) {
                        return (StatusCode::SERVICE_UNAVAILABLE, "starting");
                    }
                    match ready.health.check().await {
                        Ok(()) => (StatusCode::OK, "ready"),
                        Err(e) => {
                            tracing::warn!(error = %e, "not ready");
                            (StatusCode::SERVICE_UNAVAILABLE, "database unreachable")
                        }
                    }
                }
            }),
        )
        .route(
            "/metrics",
            get(move || {
                let handle = handle.clone();
                async move {
                    (
                        [(
                            axum::http::header::CONTENT_TYPE,
                            "text/plain; version=0.0.4",
                        )],
                        a2a_process::metrics::render(&handle),
                    )
                }
            }),
        );
    let _ = axum::serve(listener, app)
        .with_graceful_shutdown(async move { shutdown.cancelled().await })
        .await;
}
