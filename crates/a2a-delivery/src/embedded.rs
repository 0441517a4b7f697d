//! Delivery inside the embedded gateway (in-memory store, one process): the gateway's bus is
//! tapped ([`a2a_bus::tapped`]) and every committed event of a task with push configs enters
//! the same [`Pipeline`] the worker runs, with [`MemoryDeliveryStore`] as its state. One process
//! owns every task, so no lease is ever contended and nothing is handed over; what is in flight
//! when the process stops is lost with the in-memory tasks themselves.
//!
//! Bounded like the worker: the tap holds at most `a2a_bus::TAP_CAPACITY` events, the pipeline
//! its queue; an event that finds either full is not lost, since the store keeps the task (its
//! retention waits for pending deliveries) and a sweep every [`SWEEP_INTERVAL`] wakes the tasks
//! whose delivery is behind their event log.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use a2a_bus::BusEvent;
use a2a_push::{AddressPolicy, SigningKeys};
use a2a_store::MemoryTaskStore;
use async_trait::async_trait;
use tokio::sync::mpsc::Receiver;
use tokio_util::sync::CancellationToken;

use crate::deliver::{Deliverer, LogSink};
use crate::gates::{Gates, Limits};
use crate::memory::MemoryDeliveryStore;
use crate::pipeline::{Entry, Pipeline};
use crate::webhook::Webhooks;
use crate::{Acknowledge, RetryPolicy};

/// The lease length the pipeline renews (a formality here: nobody else takes a lease).
const LEASE: Duration = Duration::from_secs(30);
/// How often the embedded sweep looks for tasks behind their event log.
pub const SWEEP_INTERVAL: Duration = Duration::from_secs(2);
/// Tasks woken per sweep at most.
const SWEEP_BATCH: u32 = 1000;
/// How long the feed waits for room in the pipeline before it leaves an event to the sweep.
const ROOM_WAIT: Duration = Duration::from_secs(1);

/// How the embedded gateway delivers (its `[push]` section).
#[derive(Debug, Clone)]
pub struct Settings {
    pub policy: AddressPolicy,
    pub keys: SigningKeys,
    /// `iss` of the delivery JWTs: the gateway's public URL, which serves the JWKS.
    pub issuer: String,
    pub retry: RetryPolicy,
    pub attempt_timeout: Duration,
    pub token_ttl: Duration,
    /// Tasks delivered at once (each in order).
    pub concurrency: usize,
}

/// The bus has nothing to be told: an event in the tap is gone from it once read.
struct InProcess;

#[async_trait]
impl Acknowledge for InProcess {
    async fn ack(&self, _ids: &[String]) -> Result<(), String> {
        Ok(())
    }
}

/// Delivers the events that arrive on `feed` (the tap of the gateway's bus) for the tasks of
/// `tasks` that have push configs, until `shutdown`. Returns the delivery state (its dead
/// letters).
pub fn start(
    tasks: Arc<MemoryTaskStore>,
    mut feed: Receiver<BusEvent>,
    settings: Settings,
    shutdown: CancellationToken,
) -> Result<Arc<MemoryDeliveryStore>, String> {
    tasks.keep_pending_pushes();
    let store = Arc::new(MemoryDeliveryStore::new(tasks.clone()));
    let webhooks = Webhooks::new(
        settings.policy,
        settings.keys,
        &settings.issuer,
        settings.token_ttl,
        settings.attempt_timeout,
    )?;
    let name = "embedded".to_owned();
    let (log, _log_task) = LogSink::spawn(store.clone(), name.clone());
    let deliverer = Deliverer {
        store: store.clone(),
        webhooks,
        retry: settings.retry,
        log,
        gates: Arc::new(Gates::new(Limits::from_concurrency(settings.concurrency))),
        dead_letters_per_owner: 0,
    };
    let pipeline = Pipeline::new(deliverer, Arc::new(InProcess), name, LEASE);
    tokio::spawn(sweep(pipeline.clone(), store.clone(), shutdown.clone()));
    tokio::spawn(async move {
        loop {
            let event = tokio::select! {
                _ = shutdown.cancelled() => return,
                event = feed.recv() => match event {
                    Some(event) => event,
                    None => return,
                },
            };
            // Most tasks have no webhook: skip them before they cost a runner. A config stored
            // while its task's event was on the way here makes the webhook start from that
            // event (see `MemoryTaskStore::push_targets`), which the next event then brings
            // from the log, as the worker does for an entry it never got.
            if !tasks.has_push_configs(&event.task_id) {
                continue;
            }
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::timeout(ROOM_WAIT, pipeline.wait_for_room()) => {}
            }
            // Deferred (the queue is full): the sweep finds the task behind its log.
            let announced = event.is_announcement();
            pipeline.dispatch(Entry {
                id: format!("{}/{}", event.task_id, event.seq),
                task_id: event.task_id,
                seq: event.seq,
                // An announcement carries no event: the pipeline reads it from the log.
                event: (!announced).then_some(event.event),
                published_ms: Some(now_ms()),
                trace: event.trace,
            });
        }
    });
    Ok(store)
}

/// Wakes the tasks whose delivery is behind their event log (events the tap or the queue could
/// not take), until `shutdown`.
async fn sweep(
    pipeline: Arc<Pipeline>,
    store: Arc<MemoryDeliveryStore>,
    shutdown: CancellationToken,
) {
    let mut tick = tokio::time::interval(SWEEP_INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tick.tick() => {}
        }
        let Ok((behind, _)) =
            crate::DeliveryStore::behind(&*store, SWEEP_BATCH, SWEEP_INTERVAL).await
        else {
            continue;
        };
        let mut woken = 0;
        for b in &behind {
            if pipeline.wake(&b.task_id, b.seq) {
                woken += 1;
            }
        }
        crate::metrics::swept(woken, 0);
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}
