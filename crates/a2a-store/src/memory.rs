//! The in-memory store of embedded mode: one lock over a map of tasks plus, per owner, an ordered
//! index on (status timestamp desc, id desc) so ListTasks is a range scan like the SQL keyset.
//!
//! Retention keeps it bounded: terminal tasks are queued in the order they became terminal, and
//! both the time to live ([`TaskStore::purge_tasks`]) and the bound on stored tasks
//! ([`MemoryTaskStore::with_max_tasks`]) delete from the front of that queue, so each deletion
//! is O(1) amortised and a task that is not terminal is never deleted. Everything kept for a
//! task lives in its entry or is indexed by its id (idempotency keys), and goes with it.

use std::cmp::Reverse;
use std::collections::{BTreeSet, HashMap, VecDeque};
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::SystemTime;

use a2a_types::state::{is_interrupted, is_terminal, state_of, trim_history};
use a2a_types::v1::{StreamResponse, Task, TaskPushNotificationConfig};
use async_trait::async_trait;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

use crate::{
    Cursor, DispatchMark, HeldKey, Interrupted, KeyClaim, KeyRequest, ListQuery, NewTask,
    OwnerUsage, PushConfigPage, PushQuota, StoreError, StoreResult, StoredEvent, TaskChange,
    TaskPage, TaskRecord, TaskStore, UpstreamRef, Webhook, apply_changes, created_event,
    stored_bytes, with_push,
};

type OrderKey = (Reverse<i64>, Reverse<String>);
/// (owner, idempotency key).
type KeySlot = (String, String);

#[derive(Default)]
pub struct MemoryTaskStore {
    inner: RwLock<Inner>,
    /// Tasks kept at most (0 = no bound): past it, the oldest terminal tasks are deleted.
    max_tasks: usize,
    /// Whether a push config was ever stored: until then [`Self::has_push_configs`], asked for
    /// every event published, answers without taking the lock the writers need.
    any_push_config: AtomicBool,
    /// Set by in-process push delivery ([`Self::keep_pending_pushes`]): retention then steps
    /// over terminal tasks whose deliveries are pending.
    keep_pending: AtomicBool,
    /// Test support: the outage the store is in (see [`Self::set_unavailable`]).
    #[cfg(feature = "testing")]
    outage: Outage,
}

/// What a test made the store answer as (feature `testing`): the ways a PostgreSQL store fails
/// its callers, so that the users of a store (the gateway's task runner) are tested against the
/// real store failing, not against a stand-in.
#[cfg(feature = "testing")]
#[derive(Default)]
struct Outage {
    /// The database is unreachable: every call answers [`StoreError::Unavailable`] and does
    /// nothing.
    down: AtomicBool,
    /// The task writes (`create_with`, `append_fenced`) that are to commit and then answer
    /// [`StoreError::Unavailable`], as one whose connection dropped after its COMMIT does.
    answers_lost: std::sync::atomic::AtomicUsize,
}

#[derive(Default)]
struct Inner {
    /// Boxed so that growing the map moves pointers, not whole entries: the rehash happens
    /// under the write lock, and with inline entries it stalled every request for many ms.
    /// Hashed with foldhash here and in `by_owner` and `usage`: their keys are task ids the
    /// gateway mints and authenticated owners, not a caller's free choice, and SipHash was a
    /// visible share of a send's cost.
    tasks: HashMap<String, Box<Entry>, Fast>,
    by_owner: HashMap<String, BTreeSet<OrderKey>, Fast>,
    /// (owner, idempotency key) → the request that holds it.
    keys: HashMap<KeySlot, KeyEntry>,
    /// The keys of `keys` by the task they name, so a deleted task takes its keys along.
    /// *Invariant*: a slot is listed under a task id exactly when its key names that task.
    keys_by_task: HashMap<String, Vec<KeySlot>>,
    /// Terminal tasks in the order they became terminal, with when: retention deletes from the
    /// front. Every id in it is in `tasks` (this queue is the only way tasks are deleted).
    terminal: VecDeque<(SystemTime, String)>,
    /// Per owner, the tasks that have (or had) push configs: counting an owner's configs reads
    /// only those. A task removed from `tasks`, or left without configs, is pruned while
    /// counting, so whatever deletes tasks need not keep this in step.
    push_tasks: HashMap<String, std::collections::HashSet<String>>,
    /// Interrupted tasks by (status timestamp, id): the expiry sweep reads from the front.
    /// *Invariant*: a task is here exactly when it is stored and interrupted.
    interrupted: BTreeSet<(i64, String)>,
    /// Per owner, what [`TaskStore::usage`] answers; an owner holding nothing is removed.
    /// *Invariant*: the sums over the owner's stored tasks (open ones, their `bytes`).
    usage: HashMap<String, OwnerUsage, Fast>,
}

type Fast = foldhash::fast::RandomState;

struct KeyEntry {
    held: HeldKey,
    expires: std::time::Instant,
}

impl KeyEntry {
    fn new(req: &KeyRequest) -> Self {
        Self {
            held: HeldKey {
                task_id: req.task_id.clone(),
                fingerprint: req.fingerprint.clone(),
                after_seq: req.after_seq,
                // One process uses this store: a holder that is gone took the store with it.
                abandoned: false,
            },
            expires: std::time::Instant::now() + req.ttl,
        }
    }

    fn expired(&self, now: std::time::Instant) -> bool {
        self.expires <= now
    }
}

struct Entry {
    record: TaskRecord,
    /// The event log: event `seq` at index `seq - 1` (sequence numbers start at 1 and have no
    /// holes). Without the task id and sequence number of each [`StoredEvent`], which reads
    /// rebuild: a stored task is that many fewer allocations to make and, once retention
    /// deletes it, to free.
    events: Vec<Arc<StreamResponse>>,
    push_configs: Vec<Webhook>,
    /// Where push delivery starts: the sequence number before the task's current event when
    /// its first push config was stored (as `push_progress` starts on PostgreSQL).
    push_from: Option<u64>,
    /// How far push delivery has gone: every event up to this sequence number is done (kept
    /// here, not by the delivery, so that it goes with the task).
    push_delivered: Option<u64>,
    /// [`stored_bytes`] of the task, as counted in its owner's usage.
    bytes: u64,
}

impl Entry {
    /// Whether push delivery has events of this task left to deliver: retention keeps such a
    /// task (review L6) until its delivery (or dead letters) catches up.
    fn push_pending(&self) -> bool {
        !self.push_configs.is_empty()
            && self.push_delivered.or(self.push_from).unwrap_or(0) < self.events.len() as u64
    }
}

/// Terminal tasks with pending push deliveries that one retention pass steps over at most
/// (they stay queued, in order, for a later pass): a pass costs O(this) beyond what it deletes.
const PENDING_SKIPPED: usize = 64;

fn order_key(task: &Task) -> OrderKey {
    (Reverse(status_millis(task)), Reverse(task.id.clone()))
}

fn status_millis(task: &Task) -> i64 {
    task.status
        .as_ref()
        .and_then(|s| s.timestamp)
        .map_or(0, |t| t.as_millis())
}

fn poisoned<T>(_: T) -> StoreError {
    StoreError::Internal("in-memory store lock poisoned".into())
}

impl MemoryTaskStore {
    /// A store without a bound on its tasks (tests; the gateway uses [`Self::with_max_tasks`]).
    pub fn new() -> Self {
        Self::default()
    }

    /// A store that keeps at most `max_tasks` tasks (0 = no bound) by deleting the oldest
    /// terminal tasks (those that became terminal first) as new tasks come. Tasks that are not
    /// terminal are never deleted: while every stored task is running, the store grows past
    /// the bound, and shrinks back as they end.
    pub fn with_max_tasks(max_tasks: usize) -> Self {
        Self {
            max_tasks,
            ..Self::default()
        }
    }

    /// From now on retention (`max_tasks`, `purge_tasks`) keeps a terminal task whose push
    /// deliveries are pending until they are done (review L6): what the embedded gateway's
    /// push delivery sets when it starts. A store nobody delivers from deletes by age only.
    pub fn keep_pending_pushes(&self) {
        self.keep_pending.store(true, Ordering::Release);
    }

    fn pending(&self, inner: &Inner, id: &str) -> bool {
        self.keep_pending.load(Ordering::Acquire)
            && inner.tasks.get(id).is_some_and(|e| e.push_pending())
    }

    /// Test support (feature `testing`): while `down`, every [`TaskStore`] call answers
    /// [`StoreError::Unavailable`] and changes nothing, as a PostgreSQL store's do while the
    /// database restarts or is unreachable. (The in-process push delivery methods below are
    /// not store calls on PostgreSQL either, and go on.)
    #[cfg(feature = "testing")]
    pub fn set_unavailable(&self, down: bool) {
        self.outage.down.store(down, Ordering::SeqCst);
    }

    /// Test support (feature `testing`): the next `writes` task writes (`create_with`,
    /// `append_fenced`) that succeed are committed, then answered
    /// [`StoreError::Unavailable`]: the connection was lost after the COMMIT, so the caller
    /// cannot tell that its write is stored.
    #[cfg(feature = "testing")]
    pub fn lose_write_answers(&self, writes: usize) {
        self.outage.answers_lost.store(writes, Ordering::SeqCst);
    }

    /// Whether the store answers at all (always, outside tests).
    fn reachable(&self) -> StoreResult<()> {
        #[cfg(feature = "testing")]
        if self.outage.down.load(Ordering::SeqCst) {
            return Err(StoreError::Unavailable(
                "the in-memory store is down (test outage)".into(),
            ));
        }
        Ok(())
    }

    /// The answer of a task write that committed: lost, while a test asks for it.
    fn answer<T>(&self, committed: StoreResult<T>) -> StoreResult<T> {
        #[cfg(feature = "testing")]
        if committed.is_ok()
            && self
                .outage
                .answers_lost
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok()
        {
            return Err(StoreError::Unavailable(
                "the connection was lost after the commit (test outage)".into(),
            ));
        }
        committed
    }

    /// How many tasks are stored.
    pub fn len(&self) -> usize {
        let inner = self.inner.read().unwrap_or_else(|e| e.into_inner());
        inner.tasks.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Deletes the oldest terminal tasks while more than `max_tasks` are stored; counted as
    /// `a2a_retention_deleted_tasks_total{reason="max_tasks"}`. The entries are dropped here,
    /// after the lock is released.
    fn enforce_bound(&self, inner: &mut Inner) -> Vec<Entry> {
        let mut gone = Vec::new();
        if self.max_tasks == 0 {
            return gone;
        }
        let mut skipped = Vec::new();
        while inner.tasks.len() > self.max_tasks && skipped.len() < PENDING_SKIPPED {
            let Some((at, id)) = inner.terminal.pop_front() else {
                break; // every task left is running: they are kept
            };
            if self.pending(inner, &id) {
                skipped.push((at, id)); // its webhooks still wait for events: kept
                continue;
            }
            gone.extend(inner.remove_task(&id).map(|entry| *entry));
        }
        for kept in skipped.into_iter().rev() {
            inner.terminal.push_front(kept);
        }
        if !gone.is_empty() {
            metrics::counter!("a2a_retention_deleted_tasks_total", "reason" => "max_tasks")
                .increment(gone.len() as u64);
        }
        gone
    }

    /// The push configs of a task (any owner) in creation order (empty when it has none), the
    /// sequence number its delivery goes on after (what [`advance_push`](Self::advance_push)
    /// recorded, else the event before the one current when its first config came) and its
    /// owner; `None` when the task is gone. For in-process push delivery, the in-memory
    /// counterpart of `PgDeliveryStore::claim`: not owner-scoped, never used by a binding.
    pub fn push_targets(&self, task_id: &str) -> Option<(Vec<Webhook>, u64, String)> {
        let inner = self.inner.read().unwrap_or_else(|e| e.into_inner());
        let entry = inner.tasks.get(task_id)?;
        let from = entry.push_delivered.or(entry.push_from).unwrap_or(0);
        Some((entry.push_configs.clone(), from, entry.record.owner.clone()))
    }

    /// Tasks (at most `limit`) whose push delivery is behind their event log, with their last
    /// sequence number: the in-memory counterpart of `PgDeliveryStore::sweep` (what the bounded
    /// tap of the embedded gateway could not queue). Reads only the tasks that have push configs.
    pub fn push_behind(&self, limit: usize) -> Vec<(String, u64)> {
        if !self.any_push_config.load(Ordering::Acquire) {
            return Vec::new();
        }
        let inner = self.inner.read().unwrap_or_else(|e| e.into_inner());
        inner
            .push_tasks
            .values()
            .flatten()
            .filter_map(|id| {
                let entry = inner.tasks.get(id)?;
                entry
                    .push_pending()
                    .then(|| (id.clone(), entry.events.len() as u64))
            })
            .take(limit)
            .collect()
    }

    /// Records that push delivery of a task is done up to `seq` (it only moves forward; a task
    /// deleted meanwhile is ignored). [`push_targets`](Self::push_targets) starts after it.
    pub fn advance_push(&self, task_id: &str, seq: u64) {
        let mut inner = self.inner.write().unwrap_or_else(|e| e.into_inner());
        if let Some(entry) = inner.tasks.get_mut(task_id) {
            let done = entry.push_delivered.get_or_insert(seq);
            *done = (*done).max(seq);
        }
    }

    /// Whether a task (any owner) has push configs: the cheap test before queueing an event
    /// for delivery.
    pub fn has_push_configs(&self, task_id: &str) -> bool {
        if !self.any_push_config.load(Ordering::Acquire) {
            return false;
        }
        let inner = self.inner.read().unwrap_or_else(|e| e.into_inner());
        inner
            .tasks
            .get(task_id)
            .is_some_and(|e| !e.push_configs.is_empty())
    }

    /// A task's events (any owner) with `after < seq <= upto`, in order (see
    /// [`push_targets`](Self::push_targets)).
    pub fn events_between(&self, task_id: &str, after: u64, upto: u64) -> Vec<StoredEvent> {
        let inner = self.inner.read().unwrap_or_else(|e| e.into_inner());
        let Some(entry) = inner.tasks.get(task_id) else {
            return Vec::new();
        };
        let from = usize::try_from(after).unwrap_or(usize::MAX);
        let to = usize::try_from(upto)
            .unwrap_or(usize::MAX)
            .min(entry.events.len());
        logged(task_id, &entry.events, from, to)
    }
}

impl Inner {
    /// How many push configs `owner`'s tasks hold, pruning tasks gone or without configs.
    fn push_configs_of(&mut self, owner: &str) -> u64 {
        let Some(ids) = self.push_tasks.get_mut(owner) else {
            return 0;
        };
        let tasks = &self.tasks;
        let mut count = 0;
        ids.retain(|id| match tasks.get(id) {
            Some(e) if !e.push_configs.is_empty() => {
                count += e.push_configs.len() as u64;
                true
            }
            _ => false,
        });
        count
    }

    /// Moves the indexes and the owner's usage from a task's `old` snapshot (`None`: a new
    /// task) to `new` (`None`: a deleted task), `bytes` apart.
    fn account(&mut self, owner: &str, old: Option<(&Task, u64)>, new: Option<(&Task, u64)>) {
        let open = |t: &Task| !is_terminal(state_of(t));
        if let Some((t, _)) = old
            && is_interrupted(state_of(t))
        {
            self.interrupted.remove(&(status_millis(t), t.id.clone()));
        }
        if let Some((t, _)) = new
            && is_interrupted(state_of(t))
        {
            self.interrupted.insert((status_millis(t), t.id.clone()));
        }
        let (was_open, was_bytes) = old.map_or((false, 0), |(t, b)| (open(t), b));
        let (is_open, is_bytes) = new.map_or((false, 0), |(t, b)| (open(t), b));
        if (was_open, was_bytes) == (is_open, is_bytes) {
            return;
        }
        let usage = match self.usage.get_mut(owner) {
            Some(u) => u,
            None => self.usage.entry(owner.to_owned()).or_default(),
        };
        usage.open_tasks =
            (usage.open_tasks + u64::from(is_open)).saturating_sub(u64::from(was_open));
        usage.bytes = (usage.bytes + is_bytes).saturating_sub(was_bytes);
        if *usage == OwnerUsage::default() {
            self.usage.remove(owner);
        }
    }

    /// Queues a task that just became terminal for retention.
    fn terminated(&mut self, task_id: &str) {
        self.terminal
            .push_back((SystemTime::now(), task_id.to_owned()));
    }

    /// Removes a task and everything indexed by it; returns its entry (to be dropped outside
    /// the lock).
    fn remove_task(&mut self, task_id: &str) -> Option<Box<Entry>> {
        let mut entry = self.tasks.remove(task_id)?;
        self.account(
            &entry.record.owner,
            Some((&entry.record.task, entry.bytes)),
            None,
        );
        // The entry is only dropped from here on: its id moves into the index key, uncopied.
        let task = &mut entry.record.task;
        let key = (
            Reverse(status_millis(task)),
            Reverse(std::mem::take(&mut task.id)),
        );
        let owner = &entry.record.owner;
        if let Some(index) = self.by_owner.get_mut(owner) {
            index.remove(&key);
            if index.is_empty() {
                self.by_owner.remove(owner);
            }
        }
        // Most tasks were sent without a key: no hashing when no task holds one.
        if !self.keys_by_task.is_empty() {
            for slot in self.keys_by_task.remove(task_id).unwrap_or_default() {
                self.keys.remove(&slot);
            }
        }
        Some(entry)
    }

    fn set_key(&mut self, slot: KeySlot, entry: KeyEntry) {
        let task_id = entry.held.task_id.clone();
        if let Some(old) = self.keys.insert(slot.clone(), entry) {
            self.unindex_key(&old.held.task_id, &slot);
        }
        self.keys_by_task.entry(task_id).or_default().push(slot);
    }

    fn remove_key(&mut self, slot: &KeySlot) {
        if let Some(old) = self.keys.remove(slot) {
            self.unindex_key(&old.held.task_id, slot);
        }
    }

    fn unindex_key(&mut self, task_id: &str, slot: &KeySlot) {
        if let Some(slots) = self.keys_by_task.get_mut(task_id) {
            slots.retain(|s| s != slot);
            if slots.is_empty() {
                self.keys_by_task.remove(task_id);
            }
        }
    }

    /// The bound a new push config of `owner`'s task, which holds `on_task` configs, would
    /// break (checked under the same lock as the config's insert).
    fn push_refusal(&mut self, owner: &str, on_task: u64, quota: PushQuota) -> Option<StoreError> {
        if quota == PushQuota::NONE {
            return None;
        }
        let of_owner = self.push_configs_of(owner);
        quota.exceeded(on_task, of_owner)
    }

    /// Stores or replaces (same id) a push config of `owner`'s task. The task's first config
    /// starts its delivery at the event before the current one, unless the task set where
    /// (one created with its config starts before its first event).
    fn attach_push(
        &mut self,
        owner: &str,
        config: TaskPushNotificationConfig,
        dialect: a2a_types::Dialect,
    ) -> StoreResult<()> {
        let task_id = config.task_id.clone();
        let entry = self
            .owned_mut(owner, &task_id)
            .ok_or_else(|| StoreError::NotFound(task_id.clone()))?;
        let current = entry.record.seq;
        entry.push_from.get_or_insert(current.saturating_sub(1));
        let webhook = Webhook { config, dialect };
        match entry
            .push_configs
            .iter_mut()
            .find(|w| w.config.id == webhook.config.id)
        {
            Some(existing) => *existing = webhook,
            None => entry.push_configs.push(webhook),
        }
        self.push_tasks
            .entry(owner.to_owned())
            .or_default()
            .insert(task_id);
        Ok(())
    }

    fn owned(&self, owner: &str, task_id: &str) -> Option<&Entry> {
        self.tasks
            .get(task_id)
            .map(Box::as_ref)
            .filter(|e| e.record.owner == owner)
    }

    fn owned_mut(&mut self, owner: &str, task_id: &str) -> Option<&mut Entry> {
        self.tasks
            .get_mut(task_id)
            .map(Box::as_mut)
            .filter(|e| e.record.owner == owner)
    }
}

/// The events of a log (see `Entry::events`) at indexes `from..to` (sequence numbers
/// `from + 1..=to`), as stored events; none when the range is empty or past the end.
fn logged(
    task_id: &str,
    events: &[Arc<StreamResponse>],
    from: usize,
    to: usize,
) -> Vec<StoredEvent> {
    let Some(slice) = events.get(from..to) else {
        return Vec::new();
    };
    (from as u64 + 1..)
        .zip(slice)
        .map(|(seq, event)| StoredEvent {
            task_id: task_id.to_owned(),
            seq,
            event: event.clone(),
            push: true,
        })
        .collect()
}

fn shaped(task: &Task, history_length: Option<usize>, include_artifacts: bool) -> Task {
    let mut t = task.clone();
    trim_history(&mut t, history_length);
    if !include_artifacts {
        t.artifacts.clear();
    }
    t
}

fn matches(task: &Task, q: &ListQuery) -> bool {
    if q.context_id.as_ref().is_some_and(|c| *c != task.context_id) {
        return false;
    }
    if q.status.is_some_and(|s| s != state_of(task)) {
        return false;
    }
    if let Some(after) = q.status_after {
        let ts = task.status.as_ref().and_then(|s| s.timestamp);
        if ts.is_none_or(|ts| ts.as_millis() < after.as_millis()) {
            return false;
        }
    }
    true
}

impl MemoryTaskStore {
    /// [`TaskStore::create_with`], once the store is reached.
    fn create_now(
        &self,
        new: NewTask,
        changes: Vec<TaskChange>,
    ) -> StoreResult<(Vec<StoredEvent>, Task)> {
        // Everything but the insert is built before the lock is taken: the copies and the
        // changes need no other task, and every request waits for this lock. (A duplicate id
        // is still refused first: the work done meanwhile is dropped.)
        let mut task = new.task;
        let mut events = vec![created_event(&task)];
        let applied = apply_changes(&mut task, 2, changes).map(|later| events.extend(later));
        let key = order_key(&task);
        let terminal = is_terminal(state_of(&task));
        let entry = Box::new(Entry {
            record: TaskRecord {
                task: task.clone(),
                owner: new.owner,
                agent: new.agent,
                seq: events.len() as u64,
                upstream: None,
                dispatch: Default::default(),
                upstream_key: new.upstream_key,
            },
            // The events themselves are shared with the answer (see `StoredEvent::event`).
            events: events.iter().map(|e| e.event.clone()).collect(),
            push_configs: Vec::new(),
            // A config stored with its task is delivered from the task as created.
            push_from: new.push.as_ref().map(|_| 0),
            push_delivered: None,
            bytes: stored_bytes(&task),
        });
        let mut inner = self.inner.write().map_err(poisoned)?;
        if inner.tasks.contains_key(&task.id) {
            return Err(StoreError::Duplicate(task.id));
        }
        applied?;
        // The inline config's quota is checked before anything is stored: refused, the task is
        // not created either.
        if let Some(push) = &new.push
            && let Some(e) = inner.push_refusal(&entry.record.owner, 0, push.quota)
        {
            return Err(e);
        }
        inner.account(&entry.record.owner, None, Some((&task, entry.bytes)));
        if terminal {
            inner.terminated(&task.id);
        }
        // The owner's name is copied only for its first task.
        let owner = &entry.record.owner;
        if let Some(index) = inner.by_owner.get_mut(owner) {
            index.insert(key);
        } else {
            inner.by_owner.insert(owner.clone(), BTreeSet::from([key]));
        }
        let push_inline = new.push.is_some();
        let push = new.push.map(|push| (owner.clone(), push));
        inner.tasks.insert(task.id.clone(), entry);
        if let Some((owner, push)) = push {
            let config = TaskPushNotificationConfig {
                task_id: task.id.clone(),
                ..push.config
            };
            inner.attach_push(&owner, config, push.dialect)?;
            // Set under the lock, before the config can be seen (see `put_push_config`).
            self.any_push_config.store(true, Ordering::Release);
        }
        let gone = self.enforce_bound(&mut inner);
        drop(inner);
        drop(gone);
        Ok((with_push(events, push_inline), task))
    }

    /// [`TaskStore::append_fenced`], once the store is reached.
    fn append_now(
        &self,
        task_id: &str,
        expected_seq: u64,
        epoch: Option<u64>,
        changes: Vec<TaskChange>,
    ) -> StoreResult<(Vec<StoredEvent>, Task)> {
        if changes.is_empty() {
            return Err(StoreError::Internal("an append without changes".into()));
        }
        let mut guard = self.inner.write().map_err(poisoned)?;
        let inner = &mut *guard;
        let entry = inner
            .tasks
            .get_mut(task_id)
            .ok_or_else(|| StoreError::NotFound(task_id.to_owned()))?;
        // One process uses this store, so nothing takes its tasks over and the epoch stays 0;
        // the guard is still the same as PostgreSQL's.
        if epoch.is_some_and(|e| e != entry.record.dispatch.epoch) {
            return Err(StoreError::Fenced(task_id.to_owned()));
        }
        if entry.record.seq != expected_seq {
            return Err(StoreError::Conflict {
                task_id: task_id.to_owned(),
                expected: expected_seq,
                actual: entry.record.seq,
            });
        }
        // Applied to a copy: a refused change leaves the stored task as it was.
        let mut task = entry.record.task.clone();
        let events = with_push(
            apply_changes(&mut task, expected_seq + 1, changes)?,
            !entry.push_configs.is_empty(),
        );
        let (old_key, new_key) = (order_key(&entry.record.task), order_key(&task));
        let bytes = stored_bytes(&task);
        let old = std::mem::replace(&mut entry.record.task, task.clone());
        let old_bytes = std::mem::replace(&mut entry.bytes, bytes);
        entry.record.seq += events.len() as u64;
        // Shares the events with the answer (see `StoredEvent::event`).
        entry.events.extend(events.iter().map(|e| e.event.clone()));
        if old_key != new_key
            && let Some(index) = inner.by_owner.get_mut(&entry.record.owner)
        {
            index.remove(&old_key);
            index.insert(new_key);
        }
        if old_bytes != bytes || state_of(&old) != state_of(&task) {
            let owner = entry.record.owner.clone();
            inner.account(&owner, Some((&old, old_bytes)), Some((&task, bytes)));
        }
        // Terminal tasks take no appends, so a task is queued once, when it ends.
        if is_terminal(state_of(&task)) {
            inner.terminated(task_id);
            let gone = self.enforce_bound(inner);
            drop(guard);
            drop(gone);
        }
        Ok((events, task))
    }
}

#[async_trait]
impl TaskStore for MemoryTaskStore {
    async fn create_with(
        &self,
        new: NewTask,
        changes: Vec<TaskChange>,
    ) -> StoreResult<(Vec<StoredEvent>, Task)> {
        self.reachable()?;
        let committed = self.create_now(new, changes);
        self.answer(committed)
    }

    async fn append_fenced(
        &self,
        task_id: &str,
        expected_seq: u64,
        epoch: Option<u64>,
        changes: Vec<TaskChange>,
    ) -> StoreResult<(Vec<StoredEvent>, Task)> {
        self.reachable()?;
        let committed = self.append_now(task_id, expected_seq, epoch, changes);
        self.answer(committed)
    }

    async fn get(
        &self,
        owner: &str,
        task_id: &str,
        history_length: Option<usize>,
    ) -> StoreResult<Option<TaskRecord>> {
        self.reachable()?;
        let inner = self.inner.read().map_err(poisoned)?;
        Ok(inner.owned(owner, task_id).map(|e| TaskRecord {
            task: shaped(&e.record.task, history_length, true),
            ..e.record.clone()
        }))
    }

    async fn list(&self, owner: &str, q: &ListQuery) -> StoreResult<TaskPage> {
        self.reachable()?;
        let inner = self.inner.read().map_err(poisoned)?;
        let Some(index) = inner.by_owner.get(owner) else {
            return Ok(TaskPage {
                tasks: Vec::new(),
                next: None,
                total_size: 0,
            });
        };
        let task_of = |key: &OrderKey| &inner.tasks[&key.1.0].record.task;
        // ListTasks' totalSize is exact (the spec requires the count before paging): without
        // a filter it is the index's size, O(1); with one, a scan of the owner's index.
        let unfiltered = q.context_id.is_none() && q.status.is_none() && q.status_after.is_none();
        let total_size = if unfiltered {
            index.len() as u64
        } else {
            index.iter().filter(|k| matches(task_of(k), q)).count() as u64
        };
        let start = match &q.cursor {
            Some(c) => Bound::Excluded((Reverse(c.status_millis), Reverse(c.task_id.clone()))),
            None => Bound::Unbounded,
        };
        let mut page: Vec<&Task> = index
            .range((start, Bound::Unbounded))
            .map(task_of)
            .filter(|t| matches(t, q))
            .take(q.page_size + 1)
            .collect();
        let next = if page.len() > q.page_size {
            page.truncate(q.page_size);
            page.last().map(|t| {
                let (Reverse(ms), Reverse(id)) = order_key(t);
                Cursor {
                    status_millis: ms,
                    task_id: id,
                }
            })
        } else {
            None
        };
        Ok(TaskPage {
            tasks: page
                .into_iter()
                .map(|t| shaped(t, q.history_length, q.include_artifacts))
                .collect(),
            next,
            total_size,
        })
    }

    async fn interrupted_before(
        &self,
        before: SystemTime,
        limit: usize,
    ) -> StoreResult<Vec<Interrupted>> {
        self.reachable()?;
        let before_ms = before
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
        let inner = self.inner.read().map_err(poisoned)?;
        Ok(inner
            .interrupted
            .iter()
            .take_while(|(ms, _)| *ms < before_ms)
            .take(limit)
            .filter_map(|(_, id)| {
                let entry = inner.tasks.get(id)?;
                Some(Interrupted {
                    task_id: id.clone(),
                    context_id: entry.record.task.context_id.clone(),
                    seq: entry.record.seq,
                })
            })
            .collect())
    }

    async fn usage(&self, owner: &str, count_up_to: u64) -> StoreResult<OwnerUsage> {
        self.reachable()?;
        let inner = self.inner.read().map_err(poisoned)?;
        let mut usage = inner.usage.get(owner).copied().unwrap_or_default();
        if count_up_to > 0 {
            usage.open_tasks = usage.open_tasks.min(count_up_to);
        }
        Ok(usage)
    }

    async fn last_seqs(&self, task_ids: &[String]) -> StoreResult<Vec<(String, u64)>> {
        self.reachable()?;
        let inner = self.inner.read().map_err(poisoned)?;
        Ok(task_ids
            .iter()
            .filter_map(|id| {
                let entry = inner.tasks.get(id.as_str())?;
                Some((id.clone(), entry.events.len() as u64))
            })
            .collect())
    }

    async fn events_after(
        &self,
        owner: &str,
        task_id: &str,
        after_seq: u64,
    ) -> StoreResult<Vec<StoredEvent>> {
        self.reachable()?;
        let inner = self.inner.read().map_err(poisoned)?;
        let entry = inner
            .owned(owner, task_id)
            .ok_or_else(|| StoreError::NotFound(task_id.to_owned()))?;
        let from = usize::try_from(after_seq).unwrap_or(usize::MAX);
        Ok(logged(task_id, &entry.events, from, entry.events.len()))
    }

    async fn put_push_config(
        &self,
        owner: &str,
        config: TaskPushNotificationConfig,
        dialect: a2a_types::Dialect,
        quota: PushQuota,
    ) -> StoreResult<TaskPushNotificationConfig> {
        self.reachable()?;
        let mut inner = self.inner.write().map_err(poisoned)?;
        let entry = inner
            .owned(owner, &config.task_id)
            .ok_or_else(|| StoreError::NotFound(config.task_id.clone()))?;
        let replacing = entry.push_configs.iter().any(|w| w.config.id == config.id);
        let on_task = entry.push_configs.len() as u64;
        if !replacing && let Some(e) = inner.push_refusal(owner, on_task, quota) {
            return Err(e);
        }
        inner.attach_push(owner, config.clone(), dialect)?;
        // Set under the lock, before the config can be seen: a reader that finds it false
        // could not have found the config either.
        self.any_push_config.store(true, Ordering::Release);
        Ok(config)
    }

    async fn get_push_config(
        &self,
        owner: &str,
        task_id: &str,
        id: &str,
    ) -> StoreResult<Option<TaskPushNotificationConfig>> {
        self.reachable()?;
        let inner = self.inner.read().map_err(poisoned)?;
        let entry = inner
            .owned(owner, task_id)
            .ok_or_else(|| StoreError::NotFound(task_id.to_owned()))?;
        Ok(entry
            .push_configs
            .iter()
            .find(|w| w.config.id == id)
            .map(|w| w.config.clone()))
    }

    async fn list_push_configs(
        &self,
        owner: &str,
        task_id: &str,
        page_size: usize,
        page_token: &str,
    ) -> StoreResult<PushConfigPage> {
        self.reachable()?;
        let offset = decode_offset(page_token)?;
        let inner = self.inner.read().map_err(poisoned)?;
        let entry = inner
            .owned(owner, task_id)
            .ok_or_else(|| StoreError::NotFound(task_id.to_owned()))?;
        let configs: Vec<_> = entry
            .push_configs
            .iter()
            .skip(offset)
            .take(page_size)
            .map(|w| w.config.clone())
            .collect();
        let end = offset + configs.len();
        let next_page_token = if end < entry.push_configs.len() {
            URL_SAFE_NO_PAD.encode(format!("o:{end}"))
        } else {
            String::new()
        };
        Ok(PushConfigPage {
            configs,
            next_page_token,
        })
    }

    async fn delete_push_config(&self, owner: &str, task_id: &str, id: &str) -> StoreResult<()> {
        self.reachable()?;
        let mut inner = self.inner.write().map_err(poisoned)?;
        let entry = inner
            .owned_mut(owner, task_id)
            .ok_or_else(|| StoreError::NotFound(task_id.to_owned()))?;
        entry.push_configs.retain(|w| w.config.id != id);
        Ok(())
    }

    async fn set_upstream(&self, task_id: &str, upstream: UpstreamRef) -> StoreResult<()> {
        self.reachable()?;
        let mut inner = self.inner.write().map_err(poisoned)?;
        let entry = inner
            .tasks
            .get_mut(task_id)
            .ok_or_else(|| StoreError::NotFound(task_id.to_owned()))?;
        entry.record.upstream = Some(upstream);
        let marks = &mut entry.record.dispatch;
        if marks.sent_turn.is_none() {
            marks.sent_turn = Some(1);
            marks.sent_at_ms = Some(a2a_types::wkt::Timestamp::now().as_millis());
        }
        Ok(())
    }

    async fn mark_dispatch(&self, task_id: &str, mark: DispatchMark) -> StoreResult<()> {
        self.reachable()?;
        let mut inner = self.inner.write().map_err(poisoned)?;
        let entry = inner
            .tasks
            .get_mut(task_id)
            .ok_or_else(|| StoreError::NotFound(task_id.to_owned()))?;
        let marks = &mut entry.record.dispatch;
        match mark {
            DispatchMark::Queued { priority } => marks.priority = Some(priority),
            DispatchMark::Sending { turn, epoch } => {
                if epoch != marks.epoch {
                    return Err(StoreError::Fenced(task_id.to_owned()));
                }
                marks.sent_turn = Some(turn);
                marks.sent_at_ms = Some(a2a_types::wkt::Timestamp::now().as_millis());
            }
        }
        Ok(())
    }

    async fn claim_key(&self, req: &KeyRequest) -> StoreResult<KeyClaim> {
        self.reachable()?;
        let mut inner = self.inner.write().map_err(poisoned)?;
        let now = std::time::Instant::now();
        let slot = (req.owner.clone(), req.key.clone());
        match inner.keys.get(&slot) {
            Some(e) if !e.expired(now) => Ok(KeyClaim::Held(e.held.clone())),
            _ => {
                inner.set_key(slot, KeyEntry::new(req));
                Ok(KeyClaim::Claimed)
            }
        }
    }

    async fn reclaim_key(&self, req: &KeyRequest, stale_task_id: &str) -> StoreResult<bool> {
        self.reachable()?;
        let mut inner = self.inner.write().map_err(poisoned)?;
        let slot = (req.owner.clone(), req.key.clone());
        match inner.keys.get(&slot) {
            Some(e) if e.held.task_id == stale_task_id => {
                inner.set_key(slot, KeyEntry::new(req));
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    async fn release_key(&self, owner: &str, key: &str, task_id: &str) -> StoreResult<()> {
        self.reachable()?;
        let mut inner = self.inner.write().map_err(poisoned)?;
        let slot = (owner.to_owned(), key.to_owned());
        if inner
            .keys
            .get(&slot)
            .is_some_and(|e| e.held.task_id == task_id)
        {
            inner.remove_key(&slot);
        }
        Ok(())
    }

    async fn purge_expired_keys(&self, limit: usize) -> StoreResult<u64> {
        self.reachable()?;
        let mut inner = self.inner.write().map_err(poisoned)?;
        let now = std::time::Instant::now();
        let expired: Vec<_> = inner
            .keys
            .iter()
            .filter(|(_, e)| e.expired(now))
            .map(|(slot, _)| slot.clone())
            .take(limit)
            .collect();
        for slot in &expired {
            inner.remove_key(slot);
        }
        Ok(expired.len() as u64)
    }

    async fn purge_tasks(&self, before: SystemTime, limit: usize) -> StoreResult<u64> {
        self.reachable()?;
        let mut inner = self.inner.write().map_err(poisoned)?;
        let mut gone = Vec::new();
        let mut skipped = Vec::new();
        while gone.len() < limit
            && skipped.len() < PENDING_SKIPPED
            && let Some((at, _)) = inner.terminal.front()
            && *at < before
        {
            let Some((at, id)) = inner.terminal.pop_front() else {
                break;
            };
            if self.pending(&inner, &id) {
                skipped.push((at, id)); // its webhooks still wait for events: kept
                continue;
            }
            gone.extend(inner.remove_task(&id));
        }
        for kept in skipped.into_iter().rev() {
            inner.terminal.push_front(kept);
        }
        drop(inner);
        Ok(gone.len() as u64)
    }

    async fn ping(&self) -> StoreResult<()> {
        self.reachable()
    }
}

fn decode_offset(token: &str) -> StoreResult<usize> {
    if token.is_empty() {
        return Ok(0);
    }
    let raw = URL_SAFE_NO_PAD
        .decode(token)
        .map_err(|_| StoreError::InvalidPageToken)?;
    std::str::from_utf8(&raw)
        .ok()
        .and_then(|s| s.strip_prefix("o:"))
        .and_then(|n| n.parse().ok())
        .ok_or(StoreError::InvalidPageToken)
}

#[cfg(test)]
mod tests {
    crate::store_conformance_suite!(crate::MemoryTaskStore::new());

    use a2a_types::v1::TaskState;

    use super::*;
    use crate::suite::status;

    fn new_task(id: &str) -> NewTask {
        NewTask {
            push: None,
            upstream_key: None,
            owner: "alice".into(),
            agent: "echo".into(),
            task: Task {
                id: id.into(),
                context_id: "c".into(),
                ..Default::default()
            },
        }
    }

    async fn ids(store: &MemoryTaskStore) -> Vec<String> {
        let q = ListQuery {
            page_size: 100,
            ..Default::default()
        };
        let mut ids: Vec<String> = store
            .list("alice", &q)
            .await
            .unwrap()
            .tasks
            .into_iter()
            .map(|t| t.id)
            .collect();
        ids.sort_unstable();
        ids
    }

    /// The test outage: while down, reads and writes answer `Unavailable` and change nothing
    /// (readiness too); back up, the store is as it was. A write whose answer is lost is
    /// stored all the same, so its retry finds the sequence moved by exactly its events.
    #[tokio::test]
    async fn a_test_outage_answers_unavailable_and_loses_nothing() {
        let store = MemoryTaskStore::new();
        store.create(new_task("o1")).await.unwrap();
        store.set_unavailable(true);
        let unavailable = |r: StoreResult<()>| matches!(r, Err(StoreError::Unavailable(_)));
        assert!(unavailable(store.ping().await));
        assert!(unavailable(store.get("alice", "o1", None).await.map(drop)));
        assert!(unavailable(
            store.events_after("alice", "o1", 0).await.map(drop)
        ));
        let written = store
            .append("o1", 1, status("o1", TaskState::Working, 1))
            .await;
        assert!(unavailable(written.map(drop)));
        assert!(unavailable(store.create(new_task("o2")).await.map(drop)));
        store.set_unavailable(false);
        store.ping().await.unwrap();
        assert_eq!(
            ids(&store).await,
            ["o1"],
            "the create during the outage did nothing"
        );
        let rec = store.get("alice", "o1", None).await.unwrap().unwrap();
        assert_eq!(rec.seq, 1, "the append during the outage did nothing");

        store.lose_write_answers(1);
        let lost = store
            .append("o1", 1, status("o1", TaskState::Working, 1))
            .await;
        assert!(unavailable(lost.map(drop)));
        let retried = store
            .append("o1", 1, status("o1", TaskState::Working, 1))
            .await;
        assert!(
            matches!(retried, Err(StoreError::Conflict { actual: 2, .. })),
            "the lost answer's write is stored: {retried:?}"
        );
        let (event, _) = store
            .append("o1", 2, status("o1", TaskState::Completed, 2))
            .await
            .unwrap();
        assert_eq!(event.seq, 3, "one lost answer only");
    }

    /// Past `max_tasks`, the task that became terminal first is deleted; a task that is not
    /// terminal never is, so a store of running tasks grows past the bound until they end.
    #[tokio::test]
    async fn max_tasks_evicts_the_oldest_terminal_tasks_only() {
        let store = MemoryTaskStore::with_max_tasks(3);
        for id in ["r1", "r2", "r3", "r4"] {
            store.create(new_task(id)).await.unwrap();
        }
        assert_eq!(store.len(), 4, "running tasks are never evicted");
        // r3 ends before r2: it is the oldest terminal task, and the store is over its bound.
        store
            .append("r3", 1, status("r3", TaskState::Completed, 1))
            .await
            .unwrap();
        assert_eq!(ids(&store).await, ["r1", "r2", "r4"]);
        store
            .append("r2", 1, status("r2", TaskState::Failed, 2))
            .await
            .unwrap();
        assert_eq!(store.len(), 3, "at the bound: nothing to evict");
        store
            .append("r1", 1, status("r1", TaskState::Canceled, 3))
            .await
            .unwrap();
        // A new task pushes out the terminal task that ended first (r2), not r1 nor r4.
        store.create(new_task("n1")).await.unwrap();
        assert_eq!(ids(&store).await, ["n1", "r1", "r4"]);
        store.create(new_task("n2")).await.unwrap();
        assert_eq!(ids(&store).await, ["n1", "n2", "r4"]);
        // Only running tasks left: the bound gives way again.
        store.create(new_task("n3")).await.unwrap();
        assert_eq!(ids(&store).await, ["n1", "n2", "n3", "r4"]);
        assert!(matches!(
            store.events_after("alice", "r1", 0).await,
            Err(StoreError::NotFound(_))
        ));
    }

    /// What an evicted task leaves behind: nothing in any index (owners, keys, the queue).
    #[tokio::test]
    async fn an_evicted_task_takes_everything_with_it() {
        let store = MemoryTaskStore::with_max_tasks(1);
        let day = std::time::Duration::from_secs(86_400);
        for n in 0..100 {
            let id = format!("t{n}");
            let req = KeyRequest {
                owner: format!("owner{n}"),
                key: format!("k{n}"),
                fingerprint: "fp".into(),
                task_id: id.clone(),
                after_seq: 0,
                ttl: day,
            };
            store.claim_key(&req).await.unwrap();
            let mut new = new_task(&id);
            new.owner = req.owner.clone();
            let done = vec![status(&id, TaskState::Completed, n)];
            store.create_with(new, done).await.unwrap();
        }
        assert_eq!(store.len(), 1);
        let inner = store.inner.read().unwrap();
        assert_eq!(
            inner.by_owner.len(),
            1,
            "owner indexes of evicted tasks are gone"
        );
        assert_eq!(inner.keys.len(), 1, "their idempotency keys too");
        assert_eq!(inner.keys_by_task.len(), 1);
        assert_eq!(inner.terminal.len(), 1);
        assert!(inner.keys.contains_key(&("owner99".into(), "k99".into())));
    }

    /// Push delivery progress is kept with the task, and only moves forward.
    #[tokio::test]
    async fn push_progress_is_kept_with_the_task() {
        let store = MemoryTaskStore::new();
        store.create(new_task("t")).await.unwrap();
        let config = TaskPushNotificationConfig {
            task_id: "t".into(),
            id: "hook".into(),
            url: "https://hooks.example.com/a".into(),
            ..Default::default()
        };
        store
            .put_push_config(
                "alice",
                config,
                a2a_types::Dialect::V1,
                crate::PushQuota::NONE,
            )
            .await
            .unwrap();
        assert_eq!(store.push_targets("t").unwrap().1, 0);
        store.advance_push("t", 3);
        store.advance_push("t", 2);
        assert_eq!(store.push_targets("t").unwrap().1, 3);
        store.advance_push("gone", 1);
        assert!(store.push_targets("gone").is_none());
    }

    /// A config stored with its task is delivered from the task as created (sequence 1), even
    /// when the create stored later events with it; a config added later starts at the event
    /// current then.
    #[tokio::test]
    async fn an_inline_push_config_is_delivered_from_the_start() {
        let store = MemoryTaskStore::new();
        let new = crate::suite::new_task_with_push("alice", "t", "hook", crate::PushQuota::NONE);
        let changes = vec![
            status("t", TaskState::Working, 2),
            status("t", TaskState::Completed, 3),
        ];
        store.create_with(new, changes).await.unwrap();
        let (webhooks, from, owner) = store.push_targets("t").unwrap();
        assert_eq!((webhooks.len(), from, owner.as_str()), (1, 0, "alice"));
        assert_eq!(store.push_behind(10), [("t".to_owned(), 3)]);
    }

    /// Retention never deletes a terminal task whose push deliveries are pending (review L6):
    /// `max_tasks` and `task_ttl` step over it until its delivery caught up, then delete it.
    #[tokio::test]
    async fn retention_keeps_a_task_whose_pushes_are_pending() {
        let store = MemoryTaskStore::with_max_tasks(1);
        store.keep_pending_pushes();
        store.create(new_task("p")).await.unwrap();
        let config = TaskPushNotificationConfig {
            task_id: "p".into(),
            id: "hook".into(),
            url: "https://hooks.example.com/a".into(),
            ..Default::default()
        };
        store
            .put_push_config(
                "alice",
                config,
                a2a_types::Dialect::V1,
                crate::PushQuota::NONE,
            )
            .await
            .unwrap();
        store
            .append("p", 1, status("p", TaskState::Completed, 1))
            .await
            .unwrap();
        assert_eq!(store.push_behind(10), [("p".to_owned(), 2)]);
        store.create(new_task("n1")).await.unwrap();
        assert_eq!(
            ids(&store).await,
            ["n1", "p"],
            "pending: kept past the bound"
        );
        let later = SystemTime::now() + std::time::Duration::from_secs(3600);
        assert_eq!(
            store.purge_tasks(later, 10).await.unwrap(),
            0,
            "and past its TTL"
        );
        store.advance_push("p", 2);
        assert!(store.push_behind(10).is_empty());
        assert_eq!(
            store.purge_tasks(later, 10).await.unwrap(),
            1,
            "delivered: deleted"
        );
        assert!(store.push_targets("p").is_none());
    }
}
