//! The followers' safety net, shared by the whole process: a publish can be lost (Redis down at
//! the moment, a replica killed between its commit and its publish), so a follower must not rely
//! on the bus alone. Instead of each follower re-reading its event log on a timer (10,000 idle
//! subscribers were 5,000 store reads a second while nothing happened), one task per process
//! asks the store every [`CHECK_INTERVAL`] for the last sequence number of every followed task,
//! in batches of [`BATCH`] ids, and wakes only the followers whose log has moved past them.
//! A quiet, healthy bus then costs one small query per interval per [`BATCH`] followed tasks.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use a2a_store::TaskStore;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// How often the followed tasks' logs are checked: the longest a lost publish delays a follower.
const CHECK_INTERVAL: Duration = Duration::from_secs(2);

/// Task ids per store read.
const BATCH: usize = 1000;

/// One follower's registration: the next sequence number it waits for, and how to wake it.
pub(crate) struct Watched {
    next: AtomicU64,
    behind: Notify,
}

impl Watched {
    /// Records that the follower now waits for `next`.
    pub fn waiting_for(&self, next: u64) {
        self.next.store(next, Ordering::Relaxed);
    }

    /// Resolves once the log has an event the follower has not seen.
    pub async fn behind(&self) {
        self.behind.notified().await
    }
}

/// Deregisters a follower when it ends.
pub(crate) struct WatchGuard {
    watch: Watch,
    task_id: String,
    watched: Arc<Watched>,
}

impl std::ops::Deref for WatchGuard {
    type Target = Watched;
    fn deref(&self) -> &Watched {
        &self.watched
    }
}

impl Drop for WatchGuard {
    fn drop(&mut self) {
        let mut tasks = self.watch.tasks.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(list) = tasks.get_mut(&self.task_id) {
            list.retain(|w| !Arc::ptr_eq(w, &self.watched));
            if list.is_empty() {
                tasks.remove(&self.task_id);
            }
        }
    }
}

/// The followers of each task, by task id.
type Followed = Mutex<HashMap<String, Vec<Arc<Watched>>>>;

/// The process's followed tasks.
#[derive(Clone, Default)]
pub(crate) struct Watch {
    tasks: Arc<Followed>,
}

impl Watch {
    /// Registers a follower of `task_id` that waits for `next`.
    pub fn register(&self, task_id: &str, next: u64) -> WatchGuard {
        let watched = Arc::new(Watched {
            next: AtomicU64::new(next),
            behind: Notify::new(),
        });
        self.tasks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(task_id.to_owned())
            .or_default()
            .push(watched.clone());
        WatchGuard {
            watch: self.clone(),
            task_id: task_id.to_owned(),
            watched,
        }
    }

    /// Checks the followed tasks every [`CHECK_INTERVAL`] until `shutdown` (or until the last
    /// handle on the registry is gone).
    pub fn run(
        &self,
        store: Arc<dyn TaskStore>,
        shutdown: CancellationToken,
    ) -> tokio::task::JoinHandle<()> {
        let tasks = Arc::downgrade(&self.tasks);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(CHECK_INTERVAL);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    _ = tick.tick() => {}
                }
                if !check(&tasks, store.as_ref()).await {
                    return;
                }
            }
        })
    }
}

/// One round: wakes every follower whose task's log is past it. `false` once the registry is
/// gone.
async fn check(tasks: &Weak<Followed>, store: &dyn TaskStore) -> bool {
    let ids: Vec<String> = match tasks.upgrade() {
        Some(t) => t
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .keys()
            .cloned()
            .collect(),
        None => return false,
    };
    for chunk in ids.chunks(BATCH) {
        let last = match store.last_seqs(chunk).await {
            Ok(last) => last,
            Err(e) => {
                // The followers see the outage on their next read; nothing to wake them for.
                tracing::debug!(error = %e, "followers' safety net: the store is unreachable");
                return true;
            }
        };
        let Some(tasks) = tasks.upgrade() else {
            return false;
        };
        let tasks = tasks.lock().unwrap_or_else(|e| e.into_inner());
        for (id, seq) in last {
            for w in tasks.get(&id).into_iter().flatten() {
                if seq >= w.next.load(Ordering::Relaxed) {
                    w.behind.notify_one();
                }
            }
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use a2a_store::{MemoryTaskStore, NewTask};
    use a2a_types::v1::{Task, TaskState, TaskStatus};

    #[tokio::test]
    async fn wakes_only_the_followers_the_log_has_moved_past() {
        let store = MemoryTaskStore::new();
        store
            .create(NewTask {
                push: None,
                upstream_key: None,
                owner: "alice".into(),
                agent: "echo".into(),
                task: Task {
                    id: "t1".into(),
                    context_id: "c1".into(),
                    status: Some(TaskStatus {
                        state: TaskState::Submitted as i32,
                        ..Default::default()
                    }),
                    ..Default::default()
                },
            })
            .await
            .unwrap();
        store
            .append(
                "t1",
                1,
                a2a_store::suite::status("t1", TaskState::Working, 1),
            )
            .await
            .unwrap();
        let watch = Watch::default();
        // One follower missed seq 2 (its publish was lost); one is up to date.
        let behind = watch.register("t1", 2);
        let current = watch.register("t1", 3);
        let gone = watch.register("t2", 1);
        assert!(check(&Arc::downgrade(&watch.tasks), &store).await);
        let woken = |w: &WatchGuard| futures::FutureExt::now_or_never(w.behind()).is_some();
        assert!(woken(&behind));
        assert!(!woken(&current));
        assert!(!woken(&gone), "a task the store does not have wakes nobody");
        // Deregistered when dropped: an idle process checks nothing.
        drop((behind, current, gone));
        assert!(watch.tasks.lock().unwrap().is_empty());
    }
}
