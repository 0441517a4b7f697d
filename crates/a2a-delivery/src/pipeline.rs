//! From stream entries to ordered deliveries.
//!
//! Entries are queued per task, ordered by sequence number; one runner per task (at most
//! `concurrency` at once) works through its queue in batches. A batch is delivered only under
//! the task's lease in the [`DeliveryStore`](crate::DeliveryStore) (`push_progress` on
//! PostgreSQL), from the task's delivered sequence number on: events of one task therefore
//! reach each webhook in order even when the consumer group handed them to different workers,
//! an event another worker already delivered is skipped, and an event whose entry never arrived
//! here (published while Redis was unreachable, or handed to a worker that died) is read from
//! the event log. Entries are acknowledged only after the progress that covers them is
//! committed.
//!
//! *Invariant*: an entry is in `State::in_flight` from dispatch until its acknowledgement was
//! sent; the heartbeat keeps exactly those entries from being taken over by another worker.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use a2a_store::Webhook;
use a2a_store::pg::ClaimOutcome;
use a2a_types::Dialect;
use a2a_types::v1::{StreamResponse, Task};
use futures::future::join_all;
use tokio::sync::{Notify, Semaphore};

use crate::deliver::{Deliverer, Delivery};
use crate::{Acknowledge, payload};

/// How long a runner waits before asking again for a lease another worker holds.
const HELD_POLL: Duration = Duration::from_millis(100);

/// One stream entry, decoded.
#[derive(Debug, Clone)]
pub struct Entry {
    pub id: String,
    pub task_id: String,
    pub seq: u64,
    /// `None` when this build cannot decode the payload: the event is read from the log.
    pub event: Option<Arc<StreamResponse>>,
    pub published_ms: Option<u64>,
    /// The W3C `traceparent` the event was published under (the entry's `tp`).
    pub trace: Option<String>,
}

/// One event to deliver: sequence number, event, when it was published, its `traceparent`.
type Collected = (u64, Arc<StreamResponse>, Option<u64>, Option<String>);

#[derive(Default)]
struct Slot {
    ids: Vec<String>,
    event: Option<Arc<StreamResponse>>,
    published_ms: Option<u64>,
    trace: Option<String>,
}

#[derive(Default)]
struct State {
    /// Queued entries per task; a task is present while its runner runs.
    tasks: HashMap<String, BTreeMap<u64, Slot>>,
    in_flight: HashSet<String>,
}

pub struct Pipeline {
    state: Mutex<State>,
    deliverer: Deliverer,
    /// Where the entries came from (the consumer group, or nothing to tell in process).
    source: Arc<dyn Acknowledge>,
    /// This worker's name: the owner of the leases it takes.
    name: String,
    lease: Duration,
    permits: Arc<Semaphore>,
    max_in_flight: usize,
    /// Signalled when entries are acknowledged (room to read more).
    space: Notify,
}

impl Pipeline {
    pub fn new(
        deliverer: Deliverer,
        source: Arc<dyn Acknowledge>,
        name: String,
        lease: Duration,
        concurrency: usize,
    ) -> Arc<Self> {
        Arc::new(Self {
            state: Mutex::default(),
            name,
            deliverer,
            source,
            lease,
            permits: Arc::new(Semaphore::new(concurrency)),
            // Enough queued work to keep every runner busy with batches, bounded in memory.
            max_in_flight: (concurrency * 64).max(4096),
            space: Notify::new(),
        })
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn in_flight(&self) -> usize {
        self.state().in_flight.len()
    }

    /// The entries this worker holds unacknowledged (for the heartbeat).
    pub fn in_flight_ids(&self) -> Vec<String> {
        self.state().in_flight.iter().cloned().collect()
    }

    /// Waits until there is room for another read.
    pub async fn wait_for_room(&self) {
        loop {
            let notified = self.space.notified();
            if self.in_flight() < self.max_in_flight {
                return;
            }
            notified.await;
        }
    }

    /// Queues an entry (ignored when this worker already holds it) and starts the task's
    /// runner if it is not running.
    pub fn dispatch(self: &Arc<Self>, entry: Entry) {
        let start = {
            let mut state = self.state();
            if !state.in_flight.insert(entry.id.clone()) {
                return;
            }
            let start = !state.tasks.contains_key(&entry.task_id);
            let slot = state
                .tasks
                .entry(entry.task_id.clone())
                .or_default()
                .entry(entry.seq)
                .or_default();
            slot.ids.push(entry.id);
            if slot.event.is_none() {
                slot.event = entry.event;
            }
            slot.published_ms = slot.published_ms.or(entry.published_ms);
            if slot.trace.is_none() {
                slot.trace = entry.trace;
            }
            start
        };
        crate::metrics::in_flight(self.in_flight());
        if start {
            let this = self.clone();
            tokio::spawn(async move { this.run(entry.task_id).await });
        }
    }

    /// The task's runner: batches until its queue is empty.
    async fn run(self: Arc<Self>, task_id: String) {
        let Ok(_permit) = self.permits.clone().acquire_owned().await else {
            return;
        };
        let mut holding = false;
        loop {
            let batch = self.take(&task_id);
            if batch.is_empty() {
                if holding {
                    self.advance(&task_id, 0, true).await;
                    holding = false;
                }
                if self.finish(&task_id) {
                    return;
                }
                continue;
            }
            holding = self.handle(&task_id, batch).await;
        }
    }

    /// Delivers one batch under the lease; returns whether the lease is still held.
    async fn handle(&self, task_id: &str, batch: BTreeMap<u64, Slot>) -> bool {
        let (Some(&first), Some(&target)) = (batch.keys().next(), batch.keys().next_back()) else {
            return false;
        };
        let claim = self.claim(task_id, first).await;
        let (delivered, configs) = match claim {
            ClaimOutcome::NoConfigs => {
                self.ack(batch).await;
                return false;
            }
            ClaimOutcome::Held => {
                self.put_back(task_id, batch);
                tokio::time::sleep(HELD_POLL).await;
                return false;
            }
            ClaimOutcome::Claimed {
                delivered_seq,
                configs,
            } => (delivered_seq, configs),
        };
        if target > delivered {
            let events = self.collect(task_id, delivered, &batch).await;
            self.with_lease(task_id, self.deliver_all(task_id, &events, &configs))
                .await;
        }
        let release = !self.has_queued(task_id);
        self.advance(task_id, target, release).await;
        self.ack(batch).await;
        !release
    }

    /// The events after `delivered` up to the batch's last, from the batch where it has them
    /// and from the event log for the rest.
    async fn collect(
        &self,
        task_id: &str,
        delivered: u64,
        batch: &BTreeMap<u64, Slot>,
    ) -> Vec<Collected> {
        let target = batch.keys().next_back().copied().unwrap_or(delivered);
        let mut events = Vec::new();
        let mut missing = Vec::new();
        for seq in delivered + 1..=target {
            match batch.get(&seq) {
                Some(Slot {
                    event: Some(ev),
                    published_ms,
                    trace,
                    ..
                }) => events.push((seq, ev.clone(), *published_ms, trace.clone())),
                _ => missing.push(seq),
            }
        }
        if let (Some(&lo), Some(&hi)) = (missing.first(), missing.last()) {
            let logged = retry_db("read the event log", || {
                self.deliverer.store.events(task_id, lo - 1, hi)
            })
            .await;
            for (seq, ev) in logged {
                if missing.binary_search(&seq).is_ok() {
                    // The trace of an event read from the log is that of its slot, if any.
                    let trace = batch.get(&seq).and_then(|s| s.trace.clone());
                    events.push((seq, Arc::new(ev), None, trace));
                }
            }
            events.sort_by_key(|(seq, ..)| *seq);
        }
        events
    }

    /// Each event in order; the webhooks of one event at once. A 1.0 webhook gets the event
    /// (its StreamResponse), a 0.3 one the Task as it is after the event, in the 0.3 shape.
    async fn deliver_all(&self, task_id: &str, events: &[Collected], configs: &[Webhook]) {
        let mut tasks = if configs.iter().any(|w| w.dialect == Dialect::V03) {
            self.snapshots(task_id, events).await
        } else {
            HashMap::new()
        };
        for (seq, event, published_ms, trace) in events {
            let body = payload::event_body(event);
            let body03 = tasks.remove(seq).map(|task| payload::task_body_v03(&task));
            let deliveries = configs.iter().map(|w| Delivery {
                task_id,
                seq: *seq,
                event,
                body: match w.dialect {
                    Dialect::V03 => body03.as_ref().unwrap_or(&body),
                    Dialect::V1 => &body,
                },
                config: &w.config,
                dialect: w.dialect,
                published_ms: *published_ms,
                trace: trace.as_deref(),
            });
            let deliveries: Vec<Delivery<'_>> = deliveries.collect();
            join_all(deliveries.iter().map(|d| self.deliverer.deliver(d))).await;
        }
    }

    /// The task as it is after each of `events`, folded from its event log (the log starts with
    /// the Task itself, sequence number 1).
    async fn snapshots(&self, task_id: &str, events: &[Collected]) -> HashMap<u64, Task> {
        let Some(last) = events.iter().map(|(seq, ..)| *seq).max() else {
            return HashMap::new();
        };
        let log = retry_db("read the event log", || {
            self.deliverer.store.events(task_id, 0, last)
        })
        .await;
        let wanted: HashSet<u64> = events.iter().map(|(seq, ..)| *seq).collect();
        payload::snapshots(&log, &wanted)
    }

    /// Runs `work` while renewing the task's lease every third of its length.
    async fn with_lease(&self, task_id: &str, work: impl Future<Output = ()>) {
        let mut tick = tokio::time::interval(self.lease / 3);
        tick.tick().await;
        tokio::pin!(work);
        loop {
            tokio::select! {
                () = &mut work => return,
                _ = tick.tick() => {
                    match self.deliverer.store.renew(task_id, &self.name, self.lease).await {
                        Ok(true) => {}
                        Ok(false) => tracing::warn!(task_id, "lost the delivery lease of a task"),
                        Err(e) => tracing::warn!(task_id, error = %e, "cannot renew a delivery lease"),
                    }
                }
            }
        }
    }

    async fn claim(&self, task_id: &str, first: u64) -> ClaimOutcome {
        retry_db("claim a task", || {
            self.deliverer
                .store
                .claim(task_id, &self.name, first, self.lease)
        })
        .await
    }

    async fn advance(&self, task_id: &str, seq: u64, release: bool) {
        let held = retry_db("record delivery progress", || {
            self.deliverer
                .store
                .advance(task_id, &self.name, seq, release)
        })
        .await;
        if !held {
            // The lease ran out while this worker delivered (it stalled for longer than the
            // lease): the next holder starts from the progress it finds, so some events may
            // be delivered twice, never skipped.
            tracing::warn!(
                task_id,
                seq,
                "delivery lease ran out before progress was recorded"
            );
        }
    }

    async fn ack(&self, batch: BTreeMap<u64, Slot>) {
        let ids: Vec<String> = batch.into_values().flat_map(|s| s.ids).collect();
        if let Err(e) = self.source.ack(&ids).await {
            // Left pending: taken over later, found delivered, acknowledged then.
            tracing::warn!(error = %e, "cannot acknowledge entries; they will be reclaimed");
        }
        {
            let mut state = self.state();
            for id in &ids {
                state.in_flight.remove(id);
            }
        }
        crate::metrics::in_flight(self.in_flight());
        self.space.notify_waiters();
    }

    fn take(&self, task_id: &str) -> BTreeMap<u64, Slot> {
        self.state()
            .tasks
            .get_mut(task_id)
            .map(std::mem::take)
            .unwrap_or_default()
    }

    fn put_back(&self, task_id: &str, batch: BTreeMap<u64, Slot>) {
        let mut state = self.state();
        let queue = state.tasks.entry(task_id.to_owned()).or_default();
        for (seq, slot) in batch {
            let into = queue.entry(seq).or_default();
            into.ids.extend(slot.ids);
            into.event = into.event.take().or(slot.event);
            into.published_ms = into.published_ms.or(slot.published_ms);
            into.trace = into.trace.take().or(slot.trace);
        }
    }

    fn has_queued(&self, task_id: &str) -> bool {
        self.state()
            .tasks
            .get(task_id)
            .is_some_and(|q| !q.is_empty())
    }

    /// Ends the runner if nothing was queued meanwhile.
    fn finish(&self, task_id: &str) -> bool {
        let mut state = self.state();
        match state.tasks.get(task_id) {
            Some(queue) if !queue.is_empty() => false,
            _ => {
                state.tasks.remove(task_id);
                true
            }
        }
    }
}

/// Retries a database call until it succeeds (PostgreSQL down: the worker waits, holding its
/// entries unacknowledged).
async fn retry_db<T, F, Fut>(what: &str, mut call: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = a2a_store::StoreResult<T>>,
{
    let mut wait = Duration::from_millis(100);
    loop {
        match call().await {
            Ok(v) => return v,
            Err(e) => {
                tracing::warn!(error = %e, "cannot {what} yet; retrying");
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(Duration::from_secs(5));
            }
        }
    }
}
