//! From stream entries to ordered deliveries.
//!
//! Entries are queued per task, ordered by sequence number; one runner per task works through
//! its queue in batches. A batch is delivered only under the task's lease in the
//! [`DeliveryStore`](crate::DeliveryStore) (`push_progress` on PostgreSQL), from the task's
//! delivered sequence number on: events of one task therefore reach each webhook in order even
//! when the consumer group handed them to different workers, an event another worker already
//! delivered is skipped, and an event whose entry never arrived here (trimmed, lost in a Redis
//! restart, left to the sweep) is read from the event log.
//!
//! The ledger is the record, the entry a wake-up: entries are acknowledged once the task's
//! lease is held (its progress row then says what is left, whoever delivers it), or at once
//! when they cannot be queued (the queue is full, or the task's own queue is: its last
//! sequence number is kept and the rest read from the log). The reconciliation sweep
//! ([`Pipeline::wake`]) brings back any task whose progress is behind its log.
//!
//! A lease held by another worker is never waited for: the entries are acknowledged and left
//! to the holder, which does not free the lease while its task's log goes on past what it
//! delivered ([`Release::IfDone`]) and delivers the rest from the log. (Runners used to ask
//! again, every 100 ms backing off to 5 s: beside issue 27's tarpit, 18,000 claims in 30 s,
//! and a healthy task's next event waited for the poll after its holder was done.)
//!
//! Bounded and fair (review H4): the queue holds at most [`Limits::queue`] events and as many
//! tasks, at most [`PER_TASK`] events of one task and [`Limits::owner_tasks`] tasks of one owner
//! (more are left in the ledger for the sweep); entries of tasks without push configs are
//! acknowledged after one claim and take no delivery slot; an attempt holds a slot of its
//! destination, its owner and the process only while its request runs ([`crate::gates`]).
//!
//! Poison-proof (review H3): an event whose payload cannot be built is a dead letter with its
//! reason; a runner whose batch fails or panics dead-letters that batch's events, advances past
//! them, acknowledges its entries and goes on with the task's next events (counted in
//! `a2a_worker_runner_failures_total`); a runner that ends any other way releases its task.
//!
//! *Invariant*: an entry is in `State::in_flight` from dispatch until it is acknowledged; the
//! heartbeat keeps exactly those entries from being taken over by another worker.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use a2a_store::pg::{Advanced, ClaimOutcome, Release};
use a2a_store::{StoreError, Webhook};
use a2a_types::Dialect;
use a2a_types::v1::{StreamResponse, Task};
use bytes::Bytes;
use futures::FutureExt;
use futures::future::join_all;
use tokio::sync::Notify;

use crate::deliver::{Deliverer, Delivery};
use crate::gates::Limits;
use crate::{Acknowledge, payload};

/// Events delivered per batch at most: a task far behind its log goes in several batches.
pub const MAX_BATCH: u64 = 256;
/// Events queued per task at most; beyond it only the task's last sequence number is kept (the
/// event log has the events), so one busy task cannot fill the queue.
pub const PER_TASK: usize = 256;

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

/// What [`Pipeline::dispatch`] did with an entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dispatched {
    /// Queued; acknowledged by the pipeline when its task's lease is held.
    Queued,
    /// Already queued here.
    Duplicate,
    /// Not queued: the caller acknowledges it now, the ledger holds the event (the task's
    /// runner, or the sweep, reads it from the log). The reason is a metric label.
    Deferred(&'static str),
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
struct Queue {
    slots: BTreeMap<u64, Slot>,
    /// The last sequence number known beyond the slots (entries not queued, a sweep): the
    /// events up to it are read from the log.
    tail: u64,
    /// The owner whose share this task takes, once a claim named it.
    owner: Option<String>,
    /// Which runner serves this queue (a runner that ends abnormally cleans up only its own).
    runner: u64,
}

#[derive(Default)]
struct Batch {
    slots: BTreeMap<u64, Slot>,
    tail: u64,
}

impl Batch {
    /// Nothing queued, the events up to `last` to be read from the log.
    fn from_log(last: u64) -> Self {
        Self {
            slots: BTreeMap::new(),
            tail: last,
        }
    }

    fn is_empty(&self) -> bool {
        self.slots.is_empty() && self.tail == 0
    }

    fn first(&self) -> u64 {
        self.slots.keys().next().copied().unwrap_or(self.tail)
    }

    fn target(&self) -> u64 {
        self.slots
            .keys()
            .next_back()
            .copied()
            .unwrap_or(0)
            .max(self.tail)
    }

    fn ids(&self) -> Vec<String> {
        self.slots.values().flat_map(|s| s.ids.clone()).collect()
    }
}

#[derive(Default)]
struct State {
    /// Queued entries per task; a task is present while its runner runs.
    tasks: HashMap<String, Queue>,
    /// Slots queued over all tasks.
    queued: usize,
    in_flight: HashSet<String>,
    /// Tasks in delivery per owner (those whose claim named it).
    owners: HashMap<String, usize>,
    next_runner: u64,
}

impl State {
    fn forget_owner(&mut self, owner: Option<String>) {
        if let Some(owner) = owner
            && let Some(n) = self.owners.get_mut(&owner)
        {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.owners.remove(&owner);
            }
        }
    }
}

pub struct Pipeline {
    state: Mutex<State>,
    deliverer: Deliverer,
    /// Where the entries came from (the consumer group, or nothing to tell in process).
    source: Arc<dyn Acknowledge>,
    /// This worker's name: the owner of the leases it takes.
    name: String,
    lease: Duration,
    limits: Limits,
    /// Signalled when room is made (entries taken or acknowledged, tasks done).
    space: Notify,
    /// The tasks whose lease a batch is being delivered under: the lease keeper renews them
    /// all in one statement every third of the lease. At most one per task in delivery, so
    /// bounded by [`Limits::queue`].
    leased: Mutex<HashSet<String>>,
    /// Whether the lease keeper ([`keep_leases`]) runs.
    keeper: std::sync::Once,
}

/// Ends a runner's tenure on its task whatever way the runner ends: a runner that did not
/// finish normally (its future dropped, or a panic that escaped) leaves its task released, its
/// queued entries out of `in_flight` (pending in the group, or behind in the ledger: the sweep
/// or another worker gets them) and its owner's share returned.
struct RunnerGuard {
    pipeline: Arc<Pipeline>,
    task_id: String,
    runner: u64,
}

impl Drop for RunnerGuard {
    fn drop(&mut self) {
        let mut state = self.pipeline.state();
        if state
            .tasks
            .get(&self.task_id)
            .is_none_or(|q| q.runner != self.runner)
        {
            return; // finished normally (or another runner serves the task now)
        }
        if let Some(queue) = state.tasks.remove(&self.task_id) {
            tracing::error!(task_id = %self.task_id, "a push runner ended abnormally; its task is released");
            crate::metrics::runner_failed("aborted");
            state.queued = state.queued.saturating_sub(queue.slots.len());
            for id in queue.slots.values().flat_map(|s| &s.ids) {
                state.in_flight.remove(id);
            }
            state.forget_owner(queue.owner);
        }
        drop(state);
        self.pipeline.space.notify_waiters();
    }
}

impl Pipeline {
    pub fn new(
        deliverer: Deliverer,
        source: Arc<dyn Acknowledge>,
        name: String,
        lease: Duration,
    ) -> Arc<Self> {
        let limits = deliverer.gates.limits();
        Arc::new(Self {
            state: Mutex::default(),
            name,
            deliverer,
            source,
            lease,
            limits,
            space: Notify::new(),
            leased: Mutex::default(),
            keeper: std::sync::Once::new(),
        })
    }

    fn leased(&self) -> std::sync::MutexGuard<'_, HashSet<String>> {
        self.leased.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn in_flight(&self) -> usize {
        self.state().in_flight.len()
    }

    /// Tasks in delivery (with a runner).
    pub fn tasks(&self) -> usize {
        self.state().tasks.len()
    }

    /// The entries this worker holds unacknowledged (for the heartbeat).
    pub fn in_flight_ids(&self) -> Vec<String> {
        self.state().in_flight.iter().cloned().collect()
    }

    fn has_room(&self) -> bool {
        let state = self.state();
        state.queued < self.limits.queue && state.tasks.len() < self.limits.queue
    }

    /// Waits until there is room for another read. Callers bound the wait: entries read while
    /// the queue is full are deferred to the ledger, never waited on for good.
    pub async fn wait_for_room(&self) {
        loop {
            let notified = self.space.notified();
            if self.has_room() {
                return;
            }
            notified.await;
        }
    }

    fn gauges(&self, state: &State) {
        crate::metrics::queued(state.queued, state.tasks.len());
        crate::metrics::in_flight(state.in_flight.len());
    }

    /// Queues an entry and starts the task's runner if it is not running; says whether it was
    /// queued or deferred (then the caller acknowledges it).
    pub fn dispatch(self: &Arc<Self>, entry: Entry) -> Dispatched {
        let mut state = self.state();
        if state.in_flight.contains(&entry.id) {
            return Dispatched::Duplicate;
        }
        let full = state.queued >= self.limits.queue;
        let no_more_tasks = state.tasks.len() >= self.limits.queue;
        let spawn = match state.tasks.get_mut(&entry.task_id) {
            Some(queue) => {
                if full || (queue.slots.len() >= PER_TASK && !queue.slots.contains_key(&entry.seq))
                {
                    // The runner is on it: it reads this event from the log.
                    queue.tail = queue.tail.max(entry.seq);
                    let reason = if full { "queue_full" } else { "task_full" };
                    crate::metrics::deferred(reason, 1);
                    return Dispatched::Deferred(reason);
                }
                None
            }
            None if full || no_more_tasks => {
                // Left to the sweep: the task's progress is behind its log.
                crate::metrics::deferred("queue_full", 1);
                return Dispatched::Deferred("queue_full");
            }
            None => {
                state.next_runner += 1;
                let runner = state.next_runner;
                state.tasks.insert(
                    entry.task_id.clone(),
                    Queue {
                        runner,
                        ..Queue::default()
                    },
                );
                Some(runner)
            }
        };
        state.in_flight.insert(entry.id.clone());
        let Some(queue) = state.tasks.get_mut(&entry.task_id) else {
            return Dispatched::Duplicate; // not reached: present or inserted above
        };
        let fresh = !queue.slots.contains_key(&entry.seq);
        let slot = queue.slots.entry(entry.seq).or_default();
        slot.ids.push(entry.id);
        if slot.event.is_none() {
            slot.event = entry.event;
        }
        slot.published_ms = slot.published_ms.or(entry.published_ms);
        if slot.trace.is_none() {
            slot.trace = entry.trace;
        }
        if fresh {
            state.queued += 1;
        }
        self.gauges(&state);
        drop(state);
        if let Some(runner) = spawn {
            self.spawn(entry.task_id, runner);
        }
        Dispatched::Queued
    }

    /// The sweep found `task_id` behind its log up to `seq`: delivers the rest (from the log)
    /// unless the task is being delivered here already (then its runner learns of `seq`).
    /// False when there is no room (the next sweep finds the task again).
    pub fn wake(self: &Arc<Self>, task_id: &str, seq: u64) -> bool {
        let mut state = self.state();
        if let Some(queue) = state.tasks.get_mut(task_id) {
            queue.tail = queue.tail.max(seq);
            return true;
        }
        if state.queued >= self.limits.queue || state.tasks.len() >= self.limits.queue {
            return false;
        }
        state.next_runner += 1;
        let runner = state.next_runner;
        state.tasks.insert(
            task_id.to_owned(),
            Queue {
                tail: seq,
                runner,
                ..Queue::default()
            },
        );
        self.gauges(&state);
        drop(state);
        self.spawn(task_id.to_owned(), runner);
        true
    }

    fn spawn(self: &Arc<Self>, task_id: String, runner: u64) {
        self.keeper
            .call_once(|| drop(tokio::spawn(keep_leases(Arc::downgrade(self)))));
        let guard = RunnerGuard {
            pipeline: self.clone(),
            task_id,
            runner,
        };
        tokio::spawn(async move {
            let pipeline = guard.pipeline.clone();
            pipeline.run(&guard.task_id).await;
            drop(guard);
        });
    }

    /// The task's runner: batches until its queue is empty. A batch that fails or panics is
    /// dead-lettered ([`Self::poisoned`]) and the runner goes on with the next one.
    async fn run(self: &Arc<Self>, task_id: &str) {
        let mut holding = false;
        loop {
            let batch = self.take(task_id);
            if batch.is_empty() {
                if holding {
                    holding = false;
                    if let Ok(Some(last)) = self.advance(task_id, 0, Release::IfDone).await {
                        self.put_back(task_id, Batch::from_log(last));
                        holding = true;
                    }
                }
                if self.finish(task_id) {
                    return;
                }
                continue;
            }
            let (first, target, ids) = (batch.first(), batch.target(), batch.ids());
            let outcome = AssertUnwindSafe(self.handle(task_id, batch))
                .catch_unwind()
                .await;
            let reason = match outcome {
                Ok(Ok(held)) => {
                    holding = held;
                    continue;
                }
                Ok(Err(reason)) => {
                    crate::metrics::runner_failed("error");
                    reason
                }
                Err(panic) => {
                    crate::metrics::runner_failed("panic");
                    let msg = panic
                        .downcast_ref::<&str>()
                        .map(|s| (*s).to_owned())
                        .or_else(|| panic.downcast_ref::<String>().cloned())
                        .unwrap_or_else(|| "unknown panic".into());
                    format!("delivery panicked: {msg}")
                }
            };
            tracing::error!(task_id, first, target, reason = %reason,
                "push delivery of a batch failed; its events become dead letters");
            holding = self.poisoned(task_id, first, target, &ids, &reason).await;
        }
    }

    /// Delivers one batch under the lease; returns whether the lease is still held. An error
    /// is what will not get better by retrying (a row that cannot be read).
    async fn handle(&self, task_id: &str, mut batch: Batch) -> Result<bool, String> {
        let (first, target) = (batch.first(), batch.target());
        let claim = self.claim(task_id, first).await?;
        let (delivered, configs, owner) = match claim {
            ClaimOutcome::NoConfigs => {
                self.ack(batch.ids()).await;
                return Ok(false);
            }
            ClaimOutcome::Vanished => {
                let events = target.saturating_sub(first) + 1;
                tracing::warn!(
                    task_id,
                    events,
                    "push events of a task that is gone cannot be delivered"
                );
                crate::metrics::vanished(events);
                self.ack(batch.ids()).await;
                return Ok(false);
            }
            ClaimOutcome::Held => {
                // The holder delivers these events: they are committed, so its release reads
                // them in the log and it keeps the lease (`Release::IfDone`).
                let ids = batch.ids();
                crate::metrics::left_to_holder(ids.len());
                self.ack(ids).await;
                return Ok(false);
            }
            ClaimOutcome::Claimed {
                delivered_seq,
                configs,
                owner,
            } => (delivered_seq, configs, owner),
        };
        if !self.admit(task_id, &owner) {
            // The owner has its share of tasks in delivery: this one waits in the ledger (its
            // progress is behind its log) for the sweep.
            self.advance(task_id, 0, Release::Anyway).await?;
            let mut ids = batch.ids();
            let mut dropped = batch.slots.len();
            let rest = self.take(task_id);
            ids.extend(rest.ids());
            dropped += rest.slots.len();
            crate::metrics::deferred("owner_share", dropped.max(1) as u64);
            self.ack(ids).await;
            return Ok(false);
        }
        // The lease and the progress row now hold what is left to deliver.
        self.ack(batch.ids()).await;
        let upto = target.min(delivered.saturating_add(MAX_BATCH));
        if upto < target {
            // The rest in a later batch (what is queued stays queued).
            let later = batch.slots.split_off(&(upto + 1));
            self.put_back(
                task_id,
                Batch {
                    slots: later,
                    tail: target,
                },
            );
        }
        if upto > delivered {
            let events = self.collect(task_id, delivered, upto, &batch.slots).await?;
            self.with_lease(
                task_id,
                self.deliver_all(task_id, &owner, &events, &configs),
            )
            .await;
        }
        if self.has_queued(task_id) {
            self.advance(task_id, upto, Release::Keep).await?;
            return Ok(true);
        }
        match self.advance(task_id, upto, Release::IfDone).await? {
            Some(last) => {
                self.put_back(task_id, Batch::from_log(last));
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// Counts the task against its owner's share; false when the share is used up.
    fn admit(&self, task_id: &str, owner: &str) -> bool {
        let mut state = self.state();
        if state.tasks.get(task_id).is_some_and(|q| q.owner.is_some()) {
            return true;
        }
        let n = state.owners.get(owner).copied().unwrap_or(0);
        if n >= self.limits.owner_tasks {
            return false;
        }
        state.owners.insert(owner.to_owned(), n + 1);
        if let Some(q) = state.tasks.get_mut(task_id) {
            q.owner = Some(owner.to_owned());
        }
        true
    }

    /// The events after `delivered` up to `upto`, from the batch where it has them and from
    /// the event log for the rest. Events missing from the log too (the task was deleted
    /// meanwhile) are counted as vanished.
    async fn collect(
        &self,
        task_id: &str,
        delivered: u64,
        upto: u64,
        slots: &BTreeMap<u64, Slot>,
    ) -> Result<Vec<Collected>, String> {
        let mut events = Vec::new();
        let mut missing = Vec::new();
        for seq in delivered + 1..=upto {
            match slots.get(&seq) {
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
            .await?;
            let mut found = 0;
            for (seq, ev) in logged {
                if missing.binary_search(&seq).is_ok() {
                    found += 1;
                    // The trace of an event read from the log is that of its slot, if any.
                    let trace = slots.get(&seq).and_then(|s| s.trace.clone());
                    events.push((seq, Arc::new(ev), None, trace));
                }
            }
            if found < missing.len() {
                let lost = (missing.len() - found) as u64;
                tracing::warn!(
                    task_id,
                    events = lost,
                    "push events missing from the event log"
                );
                crate::metrics::vanished(lost);
            }
            events.sort_by_key(|(seq, ..)| *seq);
        }
        Ok(events)
    }

    /// Each event in order; the webhooks of one event at once. A 1.0 webhook gets the event
    /// (its StreamResponse), a 0.3 one the Task as it is after the event, in the 0.3 shape. An
    /// event whose payload cannot be built is a dead letter with the reason.
    async fn deliver_all(
        &self,
        task_id: &str,
        owner: &str,
        events: &[Collected],
        configs: &[Webhook],
    ) {
        let mut tasks = if configs.iter().any(|w| w.dialect == Dialect::V03) {
            self.snapshots(task_id, events).await
        } else {
            HashMap::new()
        };
        for (seq, event, published_ms, trace) in events {
            let body = payload::event_body(event);
            let body03 = tasks.remove(seq).map(|task| payload::task_body_v03(&task));
            let empty = Bytes::new();
            let deliveries = configs.iter().map(|w| {
                let body = match w.dialect {
                    Dialect::V03 => body03.as_ref().unwrap_or(&body),
                    Dialect::V1 => &body,
                };
                let d = Delivery {
                    task_id,
                    owner,
                    seq: *seq,
                    event,
                    body: body.as_ref().unwrap_or(&empty),
                    config: &w.config,
                    dialect: w.dialect,
                    published_ms: *published_ms,
                    trace: trace.as_deref(),
                };
                async move {
                    match body {
                        Ok(_) => self.deliverer.deliver(&d).await,
                        Err(reason) => self.deliverer.poison(&d, reason).await,
                    }
                }
            });
            join_all(deliveries).await;
        }
    }

    /// The task as it is after each of `events`, folded from its event log (the log starts with
    /// the Task itself, sequence number 1). Empty when the log cannot be read: the 0.3 webhooks
    /// then get the 1.0 payload.
    async fn snapshots(&self, task_id: &str, events: &[Collected]) -> HashMap<u64, Task> {
        let Some(last) = events.iter().map(|(seq, ..)| *seq).max() else {
            return HashMap::new();
        };
        let log = retry_db("read the event log", || {
            self.deliverer.store.events(task_id, 0, last)
        })
        .await
        .unwrap_or_default();
        let wanted: HashSet<u64> = events.iter().map(|(seq, ..)| *seq).collect();
        payload::snapshots(&log, &wanted)
    }

    /// What a failed batch leaves: every event of it (up to [`MAX_BATCH`] past the progress)
    /// becomes a dead letter for every webhook of its task with `reason`, the progress moves
    /// past them and the entries are acknowledged. Best effort and bounded: each step is tried
    /// once (a failure leaves the task behind its log, for the sweep), and a panic here is
    /// caught too. Returns whether this worker holds the task's lease afterwards (its runner
    /// then releases it when done, rather than leaving it to run out).
    async fn poisoned(
        &self,
        task_id: &str,
        first: u64,
        target: u64,
        ids: &[String],
        reason: &str,
    ) -> bool {
        let work = async {
            let store = &self.deliverer.store;
            let Ok(ClaimOutcome::Claimed {
                delivered_seq,
                configs,
                owner,
            }) = store.claim(task_id, &self.name, first, self.lease).await
            else {
                return false;
            };
            let upto = target.min(delivered_seq.saturating_add(MAX_BATCH));
            let keep = || store.advance(task_id, &self.name, upto, Release::Keep);
            if upto <= delivered_seq {
                return keep().await == Ok(Advanced::Recorded);
            }
            // The events as the log has them; an event that cannot be read is recorded empty.
            let logged: HashMap<u64, StreamResponse> = store
                .events(task_id, delivered_seq, upto)
                .await
                .map(|events| events.into_iter().collect())
                .unwrap_or_default();
            let empty = Bytes::new();
            let none = StreamResponse::default();
            for seq in delivered_seq + 1..=upto {
                let event = logged.get(&seq).unwrap_or(&none);
                for w in &configs {
                    let d = Delivery {
                        task_id,
                        owner: &owner,
                        seq,
                        event,
                        body: &empty,
                        config: &w.config,
                        dialect: w.dialect,
                        published_ms: None,
                        trace: None,
                    };
                    self.deliverer.poison(&d, reason).await;
                }
            }
            let held = keep().await == Ok(Advanced::Recorded);
            if upto < target {
                self.put_back(task_id, Batch::from_log(target));
            }
            held
        };
        let held = AssertUnwindSafe(work)
            .catch_unwind()
            .await
            .unwrap_or_else(|_| {
                tracing::error!(task_id, "dead-lettering a failed batch panicked too");
                false
            });
        self.ack(ids.to_vec()).await;
        held
    }

    /// Runs `work` with the task's lease kept renewed (by [`keep_leases`], with every other
    /// task's in delivery here).
    async fn with_lease(&self, task_id: &str, work: impl Future<Output = ()>) {
        struct Leased<'a>(&'a Pipeline, &'a str);
        impl Drop for Leased<'_> {
            fn drop(&mut self) {
                self.0.leased().remove(self.1);
            }
        }
        self.leased().insert(task_id.to_owned());
        let _leased = Leased(self, task_id);
        work.await;
    }

    async fn claim(&self, task_id: &str, first: u64) -> Result<ClaimOutcome, String> {
        retry_db("claim a task", || {
            self.deliverer
                .store
                .claim(task_id, &self.name, first, self.lease)
        })
        .await
    }

    /// Records progress; the task's last sequence number when the lease was kept because its
    /// log goes on (events another worker left to this holder): the caller delivers them.
    async fn advance(
        &self,
        task_id: &str,
        seq: u64,
        release: Release,
    ) -> Result<Option<u64>, String> {
        let advanced = retry_db("record delivery progress", || {
            self.deliverer
                .store
                .advance(task_id, &self.name, seq, release)
        })
        .await?;
        match advanced {
            Advanced::Recorded => Ok(None),
            Advanced::Behind(last) => {
                crate::metrics::lease_kept();
                Ok(Some(last))
            }
            Advanced::Lost => {
                // The lease ran out while this worker delivered (it stalled for longer than
                // the lease): the next holder starts from the progress it finds, so some
                // events may be delivered twice, never skipped.
                tracing::warn!(
                    task_id,
                    seq,
                    "delivery lease ran out before progress was recorded"
                );
                Ok(None)
            }
        }
    }

    async fn ack(&self, ids: Vec<String>) {
        if ids.is_empty() {
            return;
        }
        if let Err(e) = self.source.ack(&ids).await {
            // Left pending: taken over later, found delivered, acknowledged then.
            tracing::warn!(error = %e, "cannot acknowledge entries; they will be reclaimed");
        }
        {
            let mut state = self.state();
            for id in &ids {
                state.in_flight.remove(id);
            }
            self.gauges(&state);
        }
        self.space.notify_waiters();
    }

    fn take(&self, task_id: &str) -> Batch {
        let mut state = self.state();
        let Some(queue) = state.tasks.get_mut(task_id) else {
            return Batch::default();
        };
        let batch = Batch {
            slots: std::mem::take(&mut queue.slots),
            tail: std::mem::take(&mut queue.tail),
        };
        state.queued = state.queued.saturating_sub(batch.slots.len());
        self.gauges(&state);
        drop(state);
        self.space.notify_waiters();
        batch
    }

    fn put_back(&self, task_id: &str, batch: Batch) {
        let mut state = self.state();
        let Some(queue) = state.tasks.get_mut(task_id) else {
            return;
        };
        queue.tail = queue.tail.max(batch.tail);
        let mut added = 0;
        for (seq, slot) in batch.slots {
            let into = match queue.slots.entry(seq) {
                std::collections::btree_map::Entry::Occupied(e) => e.into_mut(),
                std::collections::btree_map::Entry::Vacant(e) => {
                    added += 1;
                    e.insert(Slot::default())
                }
            };
            into.ids.extend(slot.ids);
            into.event = into.event.take().or(slot.event);
            into.published_ms = into.published_ms.or(slot.published_ms);
            into.trace = into.trace.take().or(slot.trace);
        }
        state.queued += added;
        self.gauges(&state);
    }

    fn has_queued(&self, task_id: &str) -> bool {
        self.state()
            .tasks
            .get(task_id)
            .is_some_and(|q| !q.slots.is_empty() || q.tail > 0)
    }

    /// Ends the runner if nothing was queued meanwhile.
    fn finish(&self, task_id: &str) -> bool {
        let mut state = self.state();
        match state.tasks.get(task_id) {
            Some(queue) if !queue.slots.is_empty() || queue.tail > 0 => false,
            _ => {
                if let Some(queue) = state.tasks.remove(task_id) {
                    state.forget_owner(queue.owner);
                }
                self.gauges(&state);
                drop(state);
                self.space.notify_waiters();
                true
            }
        }
    }
}

/// Renews the leases of every task in delivery here every third of the lease, in one
/// statement per [`RENEW_CHUNK`] tasks: a worker holding hundreds of tasks that wait on a slow
/// webhook (issue 27's tarpit) used to renew each with a statement of its own, hundreds a
/// second, and the healthy tenants' claims and progress waited behind them for the pool and
/// the database. Ends with the pipeline.
async fn keep_leases(pipeline: std::sync::Weak<Pipeline>) {
    let Some(lease) = pipeline.upgrade().map(|p| p.lease) else {
        return;
    };
    let mut tick = tokio::time::interval(lease / 3);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    loop {
        tick.tick().await;
        let Some(p) = pipeline.upgrade() else { return };
        let ids: Vec<String> = p.leased().iter().cloned().collect();
        for chunk in ids.chunks(RENEW_CHUNK) {
            match p.deliverer.store.renew(chunk, &p.name, p.lease).await {
                Ok(lost) => {
                    for task_id in lost.iter().filter(|t| p.leased().contains(*t)) {
                        tracing::warn!(task_id, "lost the delivery lease of a task");
                    }
                }
                Err(e) => {
                    tracing::warn!(tasks = chunk.len(), error = %e, "cannot renew delivery leases")
                }
            }
        }
    }
}

/// Tasks renewed per statement at most.
const RENEW_CHUNK: usize = 1000;

/// Retries a database call: while PostgreSQL is unreachable for good (the worker waits,
/// holding its entries), any other error a few times, then gives up with it (a row that cannot
/// be read does not get better: the caller dead-letters what it concerns).
async fn retry_db<T, F, Fut>(what: &str, mut call: F) -> Result<T, String>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = a2a_store::StoreResult<T>>,
{
    let mut wait = Duration::from_millis(100);
    let mut failures = 0;
    loop {
        match call().await {
            Ok(v) => return Ok(v),
            Err(StoreError::Unavailable(e)) => {
                tracing::warn!(error = %e, "cannot {what} yet; retrying");
            }
            Err(e) if failures >= 2 => return Err(format!("cannot {what}: {e}")),
            Err(e) => {
                failures += 1;
                tracing::warn!(error = %e, "cannot {what}; retrying");
            }
        }
        tokio::time::sleep(wait).await;
        wait = (wait * 2).min(Duration::from_secs(5));
    }
}

#[cfg(test)]
mod tests {
    use a2a_push::{AddressPolicy, SigningKeys};
    use a2a_store::pg::{AttemptRecord, Behind, NewDeadLetter};
    use a2a_store::{MemoryTaskStore, NewTask, PushQuota, StoreResult, TaskStore};
    use a2a_types::v1::TaskPushNotificationConfig;
    use async_trait::async_trait;

    use super::*;
    use crate::DeliveryStore;
    use crate::deliver::LogSink;
    use crate::gates::Gates;
    use crate::memory::MemoryDeliveryStore;
    use crate::webhook::Webhooks;

    /// The in-memory delivery state, except that claiming task `boom` panics (a bug, or a
    /// value that panics somewhere on its way); task `held` is leased by another worker (its
    /// claims are counted in `HELD_CLAIMS`); and the first release of task `handed` finds its
    /// log gone on to its last event (another worker left its entries to this holder); the
    /// event log of task `brittle` cannot be read. Every advance is recorded in `ADVANCES`.
    struct Panicky(MemoryDeliveryStore, Arc<MemoryTaskStore>);

    static ADVANCES: Mutex<Vec<(String, Release)>> = Mutex::new(Vec::new());

    static HELD_CLAIMS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    static HANDED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(true);

    #[async_trait]
    impl DeliveryStore for Panicky {
        async fn claim(
            &self,
            task_id: &str,
            worker: &str,
            first_seq: u64,
            lease: Duration,
        ) -> StoreResult<ClaimOutcome> {
            use std::sync::atomic::Ordering::SeqCst;
            assert_ne!(task_id, "boom", "a poison task");
            if task_id == "held" {
                HELD_CLAIMS.fetch_add(1, SeqCst);
                return Ok(ClaimOutcome::Held);
            }
            self.0.claim(task_id, worker, first_seq, lease).await
        }
        async fn renew(&self, t: &[String], w: &str, l: Duration) -> StoreResult<Vec<String>> {
            self.0.renew(t, w, l).await
        }
        async fn advance(&self, t: &str, w: &str, s: u64, r: Release) -> StoreResult<Advanced> {
            use std::sync::atomic::Ordering::SeqCst;
            ADVANCES.lock().unwrap().push((t.to_owned(), r));
            let last = self.1.events_between(t, 0, u64::MAX).len() as u64;
            if t == "handed" && r == Release::IfDone && s < last && HANDED.swap(false, SeqCst) {
                self.0.advance(t, w, s, Release::Keep).await?;
                return Ok(Advanced::Behind(last));
            }
            self.0.advance(t, w, s, r).await
        }
        async fn events(&self, t: &str, a: u64, u: u64) -> StoreResult<Vec<(u64, StreamResponse)>> {
            if t == "brittle" {
                return Err(StoreError::Internal("an unreadable row".into()));
            }
            self.0.events(t, a, u).await
        }
        async fn log(&self, w: &str, a: &[AttemptRecord]) -> StoreResult<()> {
            self.0.log(w, a).await
        }
        async fn add_dead_letter(&self, l: &NewDeadLetter, p: u64) -> StoreResult<()> {
            self.0.add_dead_letter(l, p).await
        }
        async fn behind(&self, l: u32, i: Duration) -> StoreResult<(Vec<Behind>, u64)> {
            self.0.behind(l, i).await
        }
    }

    struct NoAck;

    #[async_trait]
    impl Acknowledge for NoAck {
        async fn ack(&self, _ids: &[String]) -> Result<(), String> {
            Ok(())
        }
    }

    fn pipeline(store: Arc<dyn DeliveryStore>) -> Arc<Pipeline> {
        // No signing key: every attempt is refused at once (a dead letter), no network.
        let webhooks = Webhooks::new(
            AddressPolicy::parse("").unwrap(),
            SigningKeys::default(),
            "http://gw",
            Duration::from_secs(60),
            Duration::from_secs(1),
        )
        .unwrap();
        let (log, _) = LogSink::spawn(store.clone(), "w".into());
        let deliverer = Deliverer {
            store,
            webhooks,
            retry: crate::RetryPolicy::default(),
            log,
            gates: Arc::new(Gates::new(Limits::from_concurrency(4))),
            dead_letters_per_owner: 0,
        };
        Pipeline::new(
            deliverer,
            Arc::new(NoAck),
            "w".into(),
            Duration::from_secs(30),
        )
    }

    async fn task(tasks: &MemoryTaskStore, id: &str, metadata: Option<f64>, dialect: Dialect) {
        let metadata = metadata.map(|n| {
            let mut fields = std::collections::BTreeMap::new();
            fields.insert(
                "x".to_owned(),
                a2a_types::wkt::Value {
                    kind: Some(a2a_types::wkt::value::Kind::NumberValue(n)),
                },
            );
            a2a_types::wkt::Struct { fields }
        });
        let new = NewTask {
            push: None,
            upstream_key: None,
            owner: "alice".into(),
            agent: "echo".into(),
            task: Task {
                id: id.into(),
                context_id: "c".into(),
                metadata,
                ..Default::default()
            },
        };
        tasks.create(new).await.unwrap();
        let config = TaskPushNotificationConfig {
            task_id: id.into(),
            id: "cfg".into(),
            url: "https://hooks.example.com/x".into(),
            ..Default::default()
        };
        tasks
            .put_push_config("alice", config, dialect, PushQuota::NONE)
            .await
            .unwrap();
    }

    fn entry(task_id: &str, seq: u64) -> Entry {
        Entry {
            id: format!("{task_id}/{seq}"),
            task_id: task_id.into(),
            seq,
            event: None,
            published_ms: None,
            trace: None,
        }
    }

    async fn settle(p: &Pipeline) {
        for _ in 0..200 {
            if p.tasks() == 0 && p.in_flight() == 0 {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!(
            "the pipeline still holds {} tasks, {} entries",
            p.tasks(),
            p.in_flight()
        );
    }

    /// A runner that panics is caught: its task is released, its entries acknowledged, and the
    /// next task goes on (the old runner died, pinning its task and entries for good).
    #[tokio::test]
    async fn a_panicking_runner_releases_its_task_and_others_go_on() {
        let tasks = Arc::new(MemoryTaskStore::new());
        task(&tasks, "boom", None, Dialect::V1).await;
        task(&tasks, "fine", None, Dialect::V1).await;
        let store = Arc::new(Panicky(
            MemoryDeliveryStore::new(tasks.clone()),
            tasks.clone(),
        ));
        let p = pipeline(store.clone());
        assert_eq!(p.dispatch(entry("boom", 1)), Dispatched::Queued);
        assert_eq!(p.dispatch(entry("fine", 1)), Dispatched::Queued);
        settle(&p).await;
        assert_eq!(tasks.push_targets("fine").unwrap().1, 1, "delivered");
        // The poison task can be handed out again: a new entry starts a new runner.
        assert_eq!(p.dispatch(entry("boom", 1)), Dispatched::Queued);
        settle(&p).await;
    }

    /// An event whose 1.0 or 0.3 payload cannot be built (NaN) is a dead letter with its
    /// reason; the progress moves past it and the task is released.
    #[tokio::test]
    async fn an_event_that_cannot_be_serialised_becomes_a_dead_letter() {
        let tasks = Arc::new(MemoryTaskStore::new());
        task(&tasks, "v1", Some(f64::NAN), Dialect::V1).await;
        let store = Arc::new(MemoryDeliveryStore::new(tasks.clone()));
        let p = pipeline(store.clone());
        p.dispatch(entry("v1", 1));
        settle(&p).await;
        let dead = store.dead_letters();
        assert_eq!(dead.len(), 1, "{dead:?}");
        for d in &dead {
            assert!(d.last_error.contains("cannot be"), "{}", d.last_error);
            assert_eq!(d.attempts, 0, "never sent");
        }
        assert_eq!(tasks.push_targets("v1").unwrap().1, 1);
    }

    /// Entries of a task whose lease another worker holds cost one claim: they are
    /// acknowledged and left to the holder, and the runner ends at once (it used to ask again,
    /// every 100 ms at first, for as long as the holder kept the lease).
    #[tokio::test(start_paused = true)]
    async fn entries_of_a_lease_held_elsewhere_are_left_to_its_holder() {
        use std::sync::atomic::Ordering::SeqCst;
        let tasks = Arc::new(MemoryTaskStore::new());
        task(&tasks, "held", None, Dialect::V1).await;
        let store = Panicky(MemoryDeliveryStore::new(tasks.clone()), tasks.clone());
        let p = pipeline(Arc::new(store));
        assert_eq!(p.dispatch(entry("held", 1)), Dispatched::Queued);
        settle(&p).await;
        assert_eq!(p.dispatch(entry("held", 2)), Dispatched::Queued);
        settle(&p).await;
        tokio::time::sleep(Duration::from_secs(60)).await;
        assert_eq!(
            HELD_CLAIMS.load(SeqCst),
            2,
            "one claim per entry, no polling"
        );
        assert_eq!(
            tasks.push_targets("held").unwrap().1,
            0,
            "nothing delivered here"
        );
    }

    /// A holder whose release finds the task's log gone on (entries another worker left to it)
    /// keeps the lease and delivers the rest from the log before it ends.
    #[tokio::test]
    async fn a_holder_whose_log_went_on_delivers_the_rest() {
        let tasks = Arc::new(MemoryTaskStore::new());
        task(&tasks, "handed", None, Dialect::V1).await;
        for seq in 2..=3 {
            let working = a2a_store::suite::status("handed", a2a_types::v1::TaskState::Working, 0);
            tasks.append("handed", seq - 1, working).await.unwrap();
        }
        let store = Panicky(MemoryDeliveryStore::new(tasks.clone()), tasks.clone());
        let p = pipeline(Arc::new(store));
        assert_eq!(p.dispatch(entry("handed", 1)), Dispatched::Queued);
        settle(&p).await;
        assert!(
            !HANDED.load(std::sync::atomic::Ordering::SeqCst),
            "the release was refused"
        );
        assert_eq!(
            tasks.push_targets("handed").unwrap().1,
            3,
            "delivered to the end"
        );
    }

    /// A batch that fails (its events cannot be read) is dead-lettered under the lease, and
    /// the runner then frees the lease: it used to leave it to run out, and the task's later
    /// events waited for that and the sweep.
    #[tokio::test]
    async fn a_failed_batch_leaves_its_lease_free() {
        let tasks = Arc::new(MemoryTaskStore::new());
        task(&tasks, "brittle", None, Dialect::V1).await;
        let store = Panicky(MemoryDeliveryStore::new(tasks.clone()), tasks.clone());
        let p = pipeline(Arc::new(store));
        assert_eq!(p.dispatch(entry("brittle", 1)), Dispatched::Queued);
        settle(&p).await;
        assert_eq!(
            tasks.push_targets("brittle").unwrap().1,
            1,
            "past the dead letter"
        );
        let advances: Vec<Release> = ADVANCES
            .lock()
            .unwrap()
            .iter()
            .filter(|(t, _)| t == "brittle")
            .map(|(_, r)| *r)
            .collect();
        assert_eq!(advances, [Release::Keep, Release::IfDone], "then freed");
    }

    /// A full queue defers entries (the caller acknowledges them; the ledger has them), and a
    /// task's own queue past [`PER_TASK`] keeps only its last sequence number.
    #[tokio::test]
    async fn a_full_queue_defers_and_never_blocks() {
        let tasks = Arc::new(MemoryTaskStore::new());
        let store = Arc::new(MemoryDeliveryStore::new(tasks.clone()));
        let p = pipeline(store);
        // No such tasks: runners find them vanished; the point is what dispatch says meanwhile.
        let limits = p.limits;
        let mut deferred = 0;
        for i in 0..(limits.queue + 10) {
            if let Dispatched::Deferred(_) = p.dispatch(entry(&format!("t{i}"), 1)) {
                deferred += 1;
            }
        }
        assert!(deferred >= 10, "beyond the queue, entries are deferred");
        settle(&p).await;
    }
}
