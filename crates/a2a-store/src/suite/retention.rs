//! Retention cases of the conformance suite: what [`TaskStore::purge_tasks`] deletes, and what
//! it leaves.

use std::time::{Duration, SystemTime};

use a2a_types::v1::{TaskPushNotificationConfig, TaskState};

use super::{key_request, new_task, status};
use crate::{KeyClaim, ListQuery, StoreError, TaskStore};

/// Creates `id` for `alice` and moves it to each of `states` in turn.
async fn task_in(store: &dyn TaskStore, id: &str, states: &[TaskState]) {
    store
        .create(new_task("alice", id, "c1", 1_000))
        .await
        .unwrap();
    for (seq, state) in (1..).zip(states) {
        store
            .append(id, seq, status(id, *state, 2_000))
            .await
            .unwrap();
    }
}

fn config(task_id: &str) -> TaskPushNotificationConfig {
    TaskPushNotificationConfig {
        task_id: task_id.into(),
        id: "hook".into(),
        url: "https://hooks.example.com/a2a".into(),
        ..Default::default()
    }
}

/// Terminal tasks that ended before the cutoff are deleted, oldest first and at most `limit`
/// per call, with their events, push configs and idempotency keys; running and interrupted
/// tasks, and terminal tasks that ended after the cutoff, are kept whole.
pub async fn retention_deletes_exactly_the_expired_terminal_tasks(store: &dyn TaskStore) {
    use TaskState::{AuthRequired, Canceled, Completed, Failed, InputRequired, Working};
    let day = Duration::from_secs(86_400);
    task_in(store, "old-completed", &[Working, Completed]).await;
    task_in(store, "old-failed", &[Failed]).await;
    task_in(store, "old-working", &[Working]).await;
    task_in(store, "old-submitted", &[]).await;
    task_in(store, "old-input", &[Working, InputRequired]).await;
    task_in(store, "old-auth", &[AuthRequired]).await;
    for id in ["old-completed", "old-working"] {
        store
            .put_push_config(
                "alice",
                config(id),
                a2a_types::Dialect::V1,
                crate::PushQuota::NONE,
            )
            .await
            .unwrap();
        let claim = store
            .claim_key(&key_request("alice", &format!("key-{id}"), id, day))
            .await
            .unwrap();
        assert_eq!(claim, KeyClaim::Claimed);
    }
    tokio::time::sleep(Duration::from_millis(30)).await;
    let cutoff = SystemTime::now();
    tokio::time::sleep(Duration::from_millis(30)).await;
    task_in(store, "new-canceled", &[Canceled]).await;
    task_in(store, "new-working", &[Working]).await;

    assert_eq!(store.purge_tasks(cutoff, 1).await.unwrap(), 1, "the limit");
    assert!(
        store
            .get("alice", "old-completed", None)
            .await
            .unwrap()
            .is_none(),
        "the task that ended first goes first"
    );
    assert!(
        store
            .get("alice", "old-failed", None)
            .await
            .unwrap()
            .is_some()
    );
    assert_eq!(store.purge_tasks(cutoff, 100).await.unwrap(), 1);
    assert_eq!(store.purge_tasks(cutoff, 100).await.unwrap(), 0);

    for gone in ["old-completed", "old-failed"] {
        assert!(store.get("alice", gone, None).await.unwrap().is_none());
        assert!(matches!(
            store.events_after("alice", gone, 0).await,
            Err(StoreError::NotFound(_))
        ));
        assert!(matches!(
            store.get_push_config("alice", gone, "hook").await,
            Err(StoreError::NotFound(_))
        ));
    }
    let kept = [
        "new-canceled",
        "new-working",
        "old-auth",
        "old-input",
        "old-submitted",
        "old-working",
    ];
    let page = store
        .list(
            "alice",
            &ListQuery {
                page_size: 100,
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let mut listed: Vec<&str> = page.tasks.iter().map(|t| t.id.as_str()).collect();
    listed.sort_unstable();
    assert_eq!(listed, kept, "everything else is kept");
    assert_eq!(page.total_size, kept.len() as u64);
    for id in kept {
        let rec = store.get("alice", id, None).await.unwrap().unwrap();
        let events = store.events_after("alice", id, 0).await.unwrap();
        assert_eq!(events.len() as u64, rec.seq, "{id} keeps its events");
    }
    assert!(
        store
            .get_push_config("alice", "old-working", "hook")
            .await
            .unwrap()
            .is_some(),
        "a running task keeps its push config"
    );
    // The deleted task's key is free again; the running task's key still names it.
    let retry = |id: &str| key_request("alice", &format!("key-{id}"), "other-task", day);
    assert_eq!(
        store.claim_key(&retry("old-completed")).await.unwrap(),
        KeyClaim::Claimed,
        "a deleted task's idempotency key goes with it"
    );
    assert!(matches!(
        store.claim_key(&retry("old-working")).await.unwrap(),
        KeyClaim::Held(h) if h.task_id == "old-working"
    ));
    // A new task may take a deleted one's id: nothing of the old one is left to collide.
    task_in(store, "old-failed", &[Working]).await;
    assert_eq!(
        store
            .events_after("alice", "old-failed", 0)
            .await
            .unwrap()
            .len(),
        2
    );
}
