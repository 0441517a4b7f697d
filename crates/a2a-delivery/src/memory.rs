//! The delivery state of the embedded gateway, beside its in-memory task store: configs,
//! events and progress are kept by the [`MemoryTaskStore`] with each task (so that retention
//! deletes them with it, and nothing here grows per task). One process delivers, so a lease is
//! always its own; the delivery log is left to tracing (there is no table to query), and dead
//! letters are kept, the most recent [`DEAD_LETTERS_KEPT`], for inspection.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use a2a_store::pg::{
    Advanced, AttemptRecord, Behind, ClaimOutcome, NewDeadLetter, Release, redact,
};
use a2a_store::{MemoryTaskStore, StoreResult};
use a2a_types::v1::StreamResponse;
use async_trait::async_trait;

use crate::DeliveryStore;

/// Dead letters kept in memory; older ones are dropped (each was logged as it happened).
pub const DEAD_LETTERS_KEPT: usize = 1000;

pub struct MemoryDeliveryStore {
    tasks: Arc<MemoryTaskStore>,
    dead_letters: Mutex<VecDeque<NewDeadLetter>>,
}

impl MemoryDeliveryStore {
    pub fn new(tasks: Arc<MemoryTaskStore>) -> Self {
        Self {
            tasks,
            dead_letters: Mutex::default(),
        }
    }

    /// The dead letters kept, oldest first.
    pub fn dead_letters(&self) -> Vec<NewDeadLetter> {
        let kept = self.dead_letters.lock().unwrap_or_else(|e| e.into_inner());
        kept.iter().cloned().collect()
    }
}

#[async_trait]
impl DeliveryStore for MemoryDeliveryStore {
    async fn claim(
        &self,
        task_id: &str,
        _worker: &str,
        _first_seq: u64,
        _lease: Duration,
    ) -> StoreResult<ClaimOutcome> {
        let Some((configs, delivered, owner)) = self.tasks.push_targets(task_id) else {
            return Ok(ClaimOutcome::Vanished);
        };
        if configs.is_empty() {
            return Ok(ClaimOutcome::NoConfigs);
        }
        Ok(ClaimOutcome::Claimed {
            delivered_seq: delivered,
            configs,
            owner,
        })
    }

    async fn renew(
        &self,
        _task_ids: &[String],
        _worker: &str,
        _lease: Duration,
    ) -> StoreResult<Vec<String>> {
        Ok(Vec::new())
    }

    async fn advance(
        &self,
        task_id: &str,
        _worker: &str,
        seq: u64,
        _release: Release,
    ) -> StoreResult<Advanced> {
        // One process and one runner per task: no other worker leaves events to this one.
        self.tasks.advance_push(task_id, seq);
        Ok(Advanced::Recorded)
    }

    async fn events(
        &self,
        task_id: &str,
        after: u64,
        upto: u64,
    ) -> StoreResult<Vec<(u64, StreamResponse)>> {
        Ok(self
            .tasks
            .events_between(task_id, after, upto)
            .into_iter()
            .map(|e| (e.seq, Arc::unwrap_or_clone(e.event)))
            .collect())
    }

    async fn log(&self, _worker: &str, _attempts: &[AttemptRecord]) -> StoreResult<()> {
        Ok(())
    }

    /// Kept redacted, the most recent [`DEAD_LETTERS_KEPT`] of all owners (`_per_owner` is
    /// the worker's bound: here the whole list is that small).
    async fn add_dead_letter(&self, letter: &NewDeadLetter, _per_owner: u64) -> StoreResult<()> {
        let mut kept = self.dead_letters.lock().unwrap_or_else(|e| e.into_inner());
        if kept.len() == DEAD_LETTERS_KEPT {
            kept.pop_front();
        }
        let mut letter = letter.clone();
        letter.config = redact(&letter.config);
        kept.push_back(letter);
        Ok(())
    }

    /// The tasks behind their event log (one process delivers: no lease to respect, and a task
    /// being delivered just learns its last event again).
    async fn behind(&self, limit: u32, _interval: Duration) -> StoreResult<(Vec<Behind>, u64)> {
        let behind = self
            .tasks
            .push_behind(usize::try_from(limit).unwrap_or(usize::MAX))
            .into_iter()
            .map(|(task_id, seq)| Behind { task_id, seq })
            .collect();
        Ok((behind, 0))
    }
}

#[cfg(test)]
mod tests {
    use a2a_store::suite::status;
    use a2a_store::{NewTask, TaskStore};
    use a2a_types::v1::{Task, TaskPushNotificationConfig, TaskState};

    use super::*;

    async fn task_with_events(tasks: &MemoryTaskStore, id: &str, events: u64) {
        let new = NewTask {
            push: None,
            upstream_key: None,
            owner: "alice".into(),
            agent: "echo".into(),
            task: Task {
                id: id.into(),
                context_id: "c".into(),
                ..Default::default()
            },
        };
        tasks.create(new).await.unwrap();
        for seq in 1..events {
            let change = status(id, TaskState::Working, seq as i64);
            tasks.append(id, seq, change).await.unwrap();
        }
    }

    fn config(task_id: &str, id: &str) -> TaskPushNotificationConfig {
        TaskPushNotificationConfig {
            task_id: task_id.into(),
            id: id.into(),
            url: format!("https://hooks.example.com/{id}"),
            ..Default::default()
        }
    }

    /// Like `push_progress` on PostgreSQL: no configs, nothing to deliver; the first config
    /// starts delivery at the task's current event whatever entry comes first, and progress
    /// only moves forward.
    #[tokio::test]
    async fn claims_start_at_the_event_current_when_the_first_config_came() {
        let tasks = Arc::new(MemoryTaskStore::new());
        let store = MemoryDeliveryStore::new(tasks.clone());
        let lease = Duration::from_secs(30);
        task_with_events(&tasks, "t", 3).await;
        let claim = store.claim("t", "w", 4, lease).await.unwrap();
        assert_eq!(claim, ClaimOutcome::NoConfigs);
        let gone = store.claim("gone", "w", 1, lease).await.unwrap();
        assert_eq!(
            gone,
            ClaimOutcome::Vanished,
            "a missing task is not 'no configs'"
        );

        tasks
            .put_push_config(
                "alice",
                config("t", "a"),
                a2a_types::Dialect::V1,
                a2a_store::PushQuota::NONE,
            )
            .await
            .unwrap();
        let done = status("t", TaskState::Completed, 9);
        tasks.append("t", 3, done).await.unwrap();
        tasks
            .put_push_config(
                "alice",
                config("t", "b"),
                a2a_types::Dialect::V1,
                a2a_store::PushQuota::NONE,
            )
            .await
            .unwrap();
        match store.claim("t", "w", 4, lease).await.unwrap() {
            ClaimOutcome::Claimed {
                delivered_seq,
                configs,
                ..
            } => {
                assert_eq!(delivered_seq, 2, "the third event was current");
                let ids: Vec<&str> = configs.iter().map(|w| w.config.id.as_str()).collect();
                assert_eq!(ids, ["a", "b"], "in creation order");
            }
            other => panic!("{other:?}"),
        }
        let events = store.events("t", 2, 4).await.unwrap();
        assert_eq!(events.iter().map(|e| e.0).collect::<Vec<_>>(), [3, 4]);
        assert!(store.events("t", 4, 9).await.unwrap().is_empty());

        let recorded = Ok(Advanced::Recorded);
        assert_eq!(store.advance("t", "w", 4, Release::IfDone).await, recorded);
        assert_eq!(store.advance("t", "w", 3, Release::IfDone).await, recorded);
        let again = store.claim("t", "w", 5, lease).await.unwrap();
        assert!(matches!(
            again,
            ClaimOutcome::Claimed {
                delivered_seq: 4,
                ..
            }
        ));
    }
}
