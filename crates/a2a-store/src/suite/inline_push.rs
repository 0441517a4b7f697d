//! A task created with an inline push config ([`NewTask::push`]): both are stored in one atomic
//! step, or neither is.

use a2a_types::v1::{TaskPushNotificationConfig, TaskState};

use super::{new_task, push_cfg, status};
use crate::{InlinePush, NewTask, PushQuota, StoreError, TaskStore};

/// A new task of `owner`'s (one event, the task as created) with the inline push config `cfg`
/// under `quota` (also used by the stores' own tests of where its delivery starts).
pub fn new_task_with_push(owner: &str, id: &str, cfg: &str, quota: PushQuota) -> NewTask {
    NewTask {
        push: Some(InlinePush {
            config: push_cfg(id, cfg),
            dialect: a2a_types::Dialect::V1,
            quota,
        }),
        ..new_task(owner, id, "c", 1)
    }
}

/// A create with an inline config stores the task, its events and the config together; one
/// whose config is past its quota stores neither (refused with the quota); a duplicate create
/// changes nothing.
pub async fn inline_push_configs_are_stored_with_their_task(store: &dyn TaskStore) {
    let quota = PushQuota {
        per_task: 5,
        per_owner: 2,
    };
    let new = new_task_with_push("alice", "ip-1", "hook", quota);
    let changes = vec![status("ip-1", TaskState::Working, 2)];
    let (events, task) = store.create_with(new, changes).await.unwrap();
    assert_eq!(events.iter().map(|e| e.seq).collect::<Vec<_>>(), [1, 2]);
    assert_eq!(task.status.unwrap().state(), TaskState::Working);
    let stored = store
        .get_push_config("alice", "ip-1", "hook")
        .await
        .unwrap();
    assert_eq!(stored, Some(push_cfg("ip-1", "hook")));
    assert_eq!(
        store.events_after("alice", "ip-1", 0).await.unwrap().len(),
        2
    );

    // The config's task id is the task's, whatever the config said.
    let mut new = new_task_with_push("alice", "ip-2", "hook", quota);
    if let Some(push) = &mut new.push {
        push.config.task_id = "elsewhere".into();
    }
    store.create(new).await.unwrap();
    let page = store
        .list_push_configs("alice", "ip-2", 10, "")
        .await
        .unwrap();
    let ids: Vec<&str> = page.configs.iter().map(|c| c.task_id.as_str()).collect();
    assert_eq!(ids, ["ip-2"]);

    // Alice holds 2 configs, her bound: a third task with one is refused whole.
    let refused = store
        .create_with(
            new_task_with_push("alice", "ip-3", "hook", quota),
            vec![status("ip-3", TaskState::Completed, 2)],
        )
        .await;
    assert!(
        matches!(
            refused,
            Err(StoreError::QuotaExceeded {
                quota: "push_configs_per_owner",
                limit: 2
            })
        ),
        "{refused:?}"
    );
    assert_eq!(store.get("alice", "ip-3", None).await.unwrap(), None);
    assert!(matches!(
        store.get_push_config("alice", "ip-3", "hook").await,
        Err(StoreError::NotFound(_))
    ));
    let usage = store.usage("alice", 0).await.unwrap();
    assert_eq!(usage.open_tasks, 2, "the refused task is not counted");
    // Nothing of it was kept: the id is free.
    store
        .create(new_task("alice", "ip-3", "c", 1))
        .await
        .unwrap();
    // Bob's bound is his own.
    store
        .create(new_task_with_push("bob", "ip-4", "hook", quota))
        .await
        .unwrap();

    // Created again (a retry whose first attempt was stored): refused, the config unchanged.
    let mut again = new_task_with_push("alice", "ip-1", "hook", PushQuota::NONE);
    if let Some(push) = &mut again.push {
        push.config.url = "https://example.com/other".into();
    }
    assert!(matches!(
        store.create(again).await,
        Err(StoreError::Duplicate(_))
    ));
    let stored = store
        .get_push_config("alice", "ip-1", "hook")
        .await
        .unwrap();
    assert_eq!(stored, Some(push_cfg("ip-1", "hook")));
    let cfg: TaskPushNotificationConfig = push_cfg("ip-1", "hook");
    assert_eq!(
        store
            .list_push_configs("alice", "ip-1", 10, "")
            .await
            .unwrap()
            .configs,
        [cfg]
    );
}

/// Every write says whether its task has push configs (`StoredEvent::push`), which decides
/// whether its events go to the push worker: not for a task created without one, nor for its
/// appends; yes for a task created with one, and for the appends after a config was stored.
pub async fn writes_say_whether_their_task_has_push_configs(store: &dyn TaskStore) {
    let pushes = |events: &[crate::StoredEvent]| events.iter().map(|e| e.push).collect::<Vec<_>>();
    let changes = vec![status("wp-1", TaskState::Working, 2)];
    let (events, _) = store
        .create_with(new_task("alice", "wp-1", "c", 1), changes)
        .await
        .unwrap();
    assert_eq!(pushes(&events), [false, false]);
    let (event, _) = store
        .append("wp-1", 2, status("wp-1", TaskState::Working, 3))
        .await
        .unwrap();
    assert!(!event.push);
    store
        .put_push_config(
            "alice",
            push_cfg("wp-1", "later"),
            a2a_types::Dialect::V1,
            PushQuota::NONE,
        )
        .await
        .unwrap();
    let (event, _) = store
        .append("wp-1", 3, status("wp-1", TaskState::Completed, 4))
        .await
        .unwrap();
    assert!(
        event.push,
        "an append after a config was stored goes to the worker"
    );

    let new = new_task_with_push("alice", "wp-2", "hook", PushQuota::NONE);
    let changes = vec![status("wp-2", TaskState::Working, 2)];
    let (events, _) = store.create_with(new, changes).await.unwrap();
    assert_eq!(pushes(&events), [true, true]);
    let (event, _) = store
        .append("wp-2", 2, status("wp-2", TaskState::Completed, 3))
        .await
        .unwrap();
    assert!(event.push);
}
