//! The in-memory store of embedded mode: one lock over a map of tasks plus, per owner, an ordered
//! index on (status timestamp desc, id desc) so ListTasks is a range scan like the SQL keyset.

use std::cmp::Reverse;
use std::collections::{BTreeSet, HashMap};
use std::ops::Bound;
use std::sync::RwLock;

use a2a_types::state::{state_of, trim_history};
use a2a_types::v1::{Task, TaskPushNotificationConfig};
use async_trait::async_trait;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

use crate::{
    Cursor, DispatchMark, ListQuery, MessageClaim, NewTask, PushConfigPage, StoreError,
    StoreResult, StoredEvent, TaskChange, TaskPage, TaskRecord, TaskStore, UpstreamRef,
    apply_changes, created_event,
};

type OrderKey = (Reverse<i64>, Reverse<String>);

#[derive(Default)]
pub struct MemoryTaskStore {
    inner: RwLock<Inner>,
}

#[derive(Default)]
struct Inner {
    /// Boxed so that growing the map moves pointers, not whole entries: the rehash happens
    /// under the write lock, and with inline entries it stalled every request for many ms.
    tasks: HashMap<String, Box<Entry>>,
    by_owner: HashMap<String, BTreeSet<OrderKey>>,
    /// (owner, message id) → task id: idempotent SendMessage.
    claims: HashMap<(String, String), String>,
}

struct Entry {
    record: TaskRecord,
    events: Vec<StoredEvent>,
    push_configs: Vec<TaskPushNotificationConfig>,
}

fn order_key(task: &Task) -> OrderKey {
    let ms = task
        .status
        .as_ref()
        .and_then(|s| s.timestamp)
        .map_or(0, |t| t.as_millis());
    (Reverse(ms), Reverse(task.id.clone()))
}

fn poisoned<T>(_: T) -> StoreError {
    StoreError::Internal("in-memory store lock poisoned".into())
}

impl MemoryTaskStore {
    pub fn new() -> Self {
        Self::default()
    }
}

impl Inner {
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

#[async_trait]
impl TaskStore for MemoryTaskStore {
    async fn create_with(
        &self,
        new: NewTask,
        changes: Vec<TaskChange>,
    ) -> StoreResult<(Vec<StoredEvent>, Task)> {
        let mut inner = self.inner.write().map_err(poisoned)?;
        let id = new.task.id.clone();
        if inner.tasks.contains_key(&id) {
            return Err(StoreError::Duplicate(id));
        }
        let mut task = new.task;
        let mut events = vec![created_event(&task)];
        events.extend(apply_changes(&mut task, 2, changes)?);
        inner
            .by_owner
            .entry(new.owner.clone())
            .or_default()
            .insert(order_key(&task));
        inner.tasks.insert(
            id,
            Box::new(Entry {
                record: TaskRecord {
                    task: task.clone(),
                    owner: new.owner,
                    agent: new.agent,
                    seq: events.len() as u64,
                    upstream: None,
                    dispatch: Default::default(),
                },
                events: events.clone(),
                push_configs: Vec::new(),
            }),
        );
        Ok((events, task))
    }

    async fn append_all(
        &self,
        task_id: &str,
        expected_seq: u64,
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
        if entry.record.seq != expected_seq {
            return Err(StoreError::Conflict {
                task_id: task_id.to_owned(),
                expected: expected_seq,
                actual: entry.record.seq,
            });
        }
        // Applied to a copy: a refused change leaves the stored task as it was.
        let mut task = entry.record.task.clone();
        let events = apply_changes(&mut task, expected_seq + 1, changes)?;
        let (old_key, new_key) = (order_key(&entry.record.task), order_key(&task));
        entry.record.task = task.clone();
        entry.record.seq += events.len() as u64;
        entry.events.extend(events.iter().cloned());
        if old_key != new_key
            && let Some(index) = inner.by_owner.get_mut(&entry.record.owner)
        {
            index.remove(&old_key);
            index.insert(new_key);
        }
        Ok((events, task))
    }

    async fn get(
        &self,
        owner: &str,
        task_id: &str,
        history_length: Option<usize>,
    ) -> StoreResult<Option<TaskRecord>> {
        let inner = self.inner.read().map_err(poisoned)?;
        Ok(inner.owned(owner, task_id).map(|e| TaskRecord {
            task: shaped(&e.record.task, history_length, true),
            ..e.record.clone()
        }))
    }

    async fn list(&self, owner: &str, q: &ListQuery) -> StoreResult<TaskPage> {
        let inner = self.inner.read().map_err(poisoned)?;
        let Some(index) = inner.by_owner.get(owner) else {
            return Ok(TaskPage {
                tasks: Vec::new(),
                next: None,
                total_size: 0,
            });
        };
        let task_of = |key: &OrderKey| &inner.tasks[&key.1.0].record.task;
        let total_size = index.iter().filter(|k| matches(task_of(k), q)).count() as u64;
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

    async fn events_after(
        &self,
        owner: &str,
        task_id: &str,
        after_seq: u64,
    ) -> StoreResult<Vec<StoredEvent>> {
        let inner = self.inner.read().map_err(poisoned)?;
        let entry = inner
            .owned(owner, task_id)
            .ok_or_else(|| StoreError::NotFound(task_id.to_owned()))?;
        // Sequence numbers start at 1 and have no holes, so the index is seq - 1.
        let from = usize::try_from(after_seq).unwrap_or(usize::MAX);
        Ok(entry.events.get(from..).unwrap_or_default().to_vec())
    }

    async fn put_push_config(
        &self,
        owner: &str,
        config: TaskPushNotificationConfig,
    ) -> StoreResult<TaskPushNotificationConfig> {
        let mut inner = self.inner.write().map_err(poisoned)?;
        let entry = inner
            .owned_mut(owner, &config.task_id)
            .ok_or_else(|| StoreError::NotFound(config.task_id.clone()))?;
        match entry.push_configs.iter_mut().find(|c| c.id == config.id) {
            Some(existing) => *existing = config.clone(),
            None => entry.push_configs.push(config.clone()),
        }
        Ok(config)
    }

    async fn get_push_config(
        &self,
        owner: &str,
        task_id: &str,
        id: &str,
    ) -> StoreResult<Option<TaskPushNotificationConfig>> {
        let inner = self.inner.read().map_err(poisoned)?;
        let entry = inner
            .owned(owner, task_id)
            .ok_or_else(|| StoreError::NotFound(task_id.to_owned()))?;
        Ok(entry.push_configs.iter().find(|c| c.id == id).cloned())
    }

    async fn list_push_configs(
        &self,
        owner: &str,
        task_id: &str,
        page_size: usize,
        page_token: &str,
    ) -> StoreResult<PushConfigPage> {
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
            .cloned()
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
        let mut inner = self.inner.write().map_err(poisoned)?;
        let entry = inner
            .owned_mut(owner, task_id)
            .ok_or_else(|| StoreError::NotFound(task_id.to_owned()))?;
        entry.push_configs.retain(|c| c.id != id);
        Ok(())
    }

    async fn set_upstream(&self, task_id: &str, upstream: UpstreamRef) -> StoreResult<()> {
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
        let mut inner = self.inner.write().map_err(poisoned)?;
        let entry = inner
            .tasks
            .get_mut(task_id)
            .ok_or_else(|| StoreError::NotFound(task_id.to_owned()))?;
        let marks = &mut entry.record.dispatch;
        match mark {
            DispatchMark::Queued { priority } => marks.priority = Some(priority),
            DispatchMark::Sending { turn } => {
                marks.sent_turn = Some(turn);
                marks.sent_at_ms = Some(a2a_types::wkt::Timestamp::now().as_millis());
            }
        }
        Ok(())
    }

    async fn claim_message(
        &self,
        owner: &str,
        message_id: &str,
        task_id: &str,
    ) -> StoreResult<MessageClaim> {
        let mut inner = self.inner.write().map_err(poisoned)?;
        let key = (owner.to_owned(), message_id.to_owned());
        Ok(match inner.claims.get(&key) {
            Some(existing) => MessageClaim::Existing(existing.clone()),
            None => {
                inner.claims.insert(key, task_id.to_owned());
                MessageClaim::Claimed
            }
        })
    }

    async fn release_message(&self, owner: &str, message_id: &str) -> StoreResult<()> {
        let mut inner = self.inner.write().map_err(poisoned)?;
        inner
            .claims
            .remove(&(owner.to_owned(), message_id.to_owned()));
        Ok(())
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
}
