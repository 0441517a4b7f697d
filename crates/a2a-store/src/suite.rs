//! The conformance suite of [`TaskStore`]: every implementation instantiates it with
//! [`store_conformance_suite!`](crate::store_conformance_suite), so the in-memory store and the
//! PostgreSQL store are held to exactly the same behaviour.

mod bounds;
mod inline_push;
mod outbox;
mod registry;
mod retention;

pub use bounds::*;
pub use inline_push::*;
pub use outbox::*;
pub use registry::*;
pub use retention::*;

use a2a_types::state::state_of;
use a2a_types::v1::{
    Artifact, Message, Part, Role, StreamResponse, Task, TaskArtifactUpdateEvent,
    TaskPushNotificationConfig, TaskState, TaskStatus, TaskStatusUpdateEvent, part::Content,
    stream_response::Payload,
};
use a2a_types::wkt::Timestamp;

use crate::{
    DispatchMark, DispatchMarks, KeyClaim, KeyRequest, ListQuery, NewTask, PushQuota, StoreError,
    TaskChange, TaskStore, UpstreamRef,
};

/// Instantiates every suite case as a `#[tokio::test]` for the store built by `$make`
/// (an expression, evaluated once per test, that may `.await`).
#[macro_export]
macro_rules! store_conformance_suite {
    ($make:expr) => {
        $crate::store_conformance_suite!(@cases $make;
            create_then_get, owners_are_isolated, append_is_guarded_by_sequence,
            terminal_tasks_are_immutable, events_replay_in_order, history_is_trimmed,
            list_pages_newest_first_exactly_once, list_filters_and_totals,
            list_omits_artifacts_unless_asked, push_config_crud, push_configs_are_bounded,
            inline_push_configs_are_stored_with_their_task,
            writes_say_whether_their_task_has_push_configs,
            upstream_ids_are_kept,
            dispatch_marks_tell_queued_from_sent, stale_epochs_are_fenced,
            idempotency_keys_are_per_owner_and_first_wins,
            expired_idempotency_keys_are_free_and_purged, changes_commit_together,
            last_seqs_report_each_existing_task,
            retention_deletes_exactly_the_expired_terminal_tasks,
            interrupted_tasks_are_found_oldest_first,
            usage_counts_open_tasks_and_stored_bytes,
            outbox_keeps_what_was_not_published);
    };
    (@cases $make:expr; $($case:ident),*) => {
        $(
            #[tokio::test]
            async fn $case() {
                let store = $make;
                $crate::suite::$case(&store).await;
            }
        )*
    };
}

fn text(s: &str) -> Part {
    Part {
        content: Some(Content::Text(s.into())),
        ..Default::default()
    }
}

fn message(id: &str) -> Message {
    Message {
        message_id: id.into(),
        role: Role::User as i32,
        parts: vec![text(id)],
        ..Default::default()
    }
}

fn new_task(owner: &str, id: &str, context: &str, ts_ms: i64) -> NewTask {
    NewTask {
        push: None,
        upstream_key: None,
        owner: owner.into(),
        agent: "echo".into(),
        task: Task {
            id: id.into(),
            context_id: context.into(),
            status: Some(TaskStatus {
                state: TaskState::Submitted as i32,
                message: None,
                timestamp: Some(Timestamp::from_millis(ts_ms)),
            }),
            history: vec![message(&format!("{id}-m0"))],
            ..Default::default()
        },
    }
}

/// A status change of task `id` to `state` at `ts_ms` (also used by the store's own tests).
pub fn status(id: &str, state: TaskState, ts_ms: i64) -> TaskChange {
    TaskChange {
        user_message: None,
        event: StreamResponse {
            payload: Some(Payload::StatusUpdate(TaskStatusUpdateEvent {
                task_id: id.into(),
                context_id: "c".into(),
                status: Some(TaskStatus {
                    state: state as i32,
                    message: None,
                    timestamp: Some(Timestamp::from_millis(ts_ms)),
                }),
                metadata: None,
            })),
        },
    }
}

fn artifact(id: &str, chunk: &str, append: bool) -> TaskChange {
    TaskChange {
        user_message: None,
        event: StreamResponse {
            payload: Some(Payload::ArtifactUpdate(TaskArtifactUpdateEvent {
                task_id: id.into(),
                context_id: "c".into(),
                artifact: Some(Artifact {
                    artifact_id: "a1".into(),
                    parts: vec![text(chunk)],
                    ..Default::default()
                }),
                append,
                last_chunk: false,
                metadata: None,
            })),
        },
    }
}

/// Task ids that sort like the gateway's UUID v7 ids.
fn tid(n: usize) -> String {
    format!("task-{n:05}")
}

pub async fn create_then_get(store: &dyn TaskStore) {
    let first = store
        .create(new_task("alice", "t1", "c1", 1_000))
        .await
        .unwrap();
    assert_eq!(first.seq, 1);
    assert!(matches!(first.event.payload, Some(Payload::Task(ref t)) if t.id == "t1"));
    let rec = store
        .get("alice", "t1", None)
        .await
        .unwrap()
        .expect("stored");
    assert_eq!(rec.seq, 1);
    assert_eq!(rec.owner, "alice");
    assert_eq!(rec.agent, "echo");
    assert_eq!(rec.task.context_id, "c1");
    assert_eq!(rec.task.history.len(), 1);
    assert!(matches!(
        store.create(new_task("alice", "t1", "c1", 1_000)).await,
        Err(StoreError::Duplicate(_))
    ));
    assert!(store.get("alice", "missing", None).await.unwrap().is_none());
}

pub async fn owners_are_isolated(store: &dyn TaskStore) {
    store
        .create(new_task("alice", "t1", "c1", 1_000))
        .await
        .unwrap();
    assert!(store.get("bob", "t1", None).await.unwrap().is_none());
    assert!(matches!(
        store.events_after("bob", "t1", 0).await,
        Err(StoreError::NotFound(_))
    ));
    let page = store
        .list(
            "bob",
            &ListQuery {
                page_size: 50,
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!((page.tasks.len(), page.total_size), (0, 0));
    let cfg = TaskPushNotificationConfig {
        id: "p1".into(),
        task_id: "t1".into(),
        url: "https://example.com/hook".into(),
        ..Default::default()
    };
    assert!(matches!(
        store
            .put_push_config("bob", cfg.clone(), a2a_types::Dialect::V1, PushQuota::NONE)
            .await,
        Err(StoreError::NotFound(_))
    ));
    store
        .put_push_config("alice", cfg, a2a_types::Dialect::V1, PushQuota::NONE)
        .await
        .unwrap();
    assert!(store.get_push_config("bob", "t1", "p1").await.is_err());
    assert!(store.list_push_configs("bob", "t1", 10, "").await.is_err());
    assert!(store.delete_push_config("bob", "t1", "p1").await.is_err());
    assert!(
        store
            .get_push_config("alice", "t1", "p1")
            .await
            .unwrap()
            .is_some()
    );
}

pub async fn append_is_guarded_by_sequence(store: &dyn TaskStore) {
    store
        .create(new_task("alice", "t1", "c1", 1_000))
        .await
        .unwrap();
    let (ev, snap) = store
        .append("t1", 1, status("t1", TaskState::Working, 2_000))
        .await
        .unwrap();
    assert_eq!(ev.seq, 2);
    assert_eq!(state_of(&snap), TaskState::Working);
    match store
        .append("t1", 1, status("t1", TaskState::Failed, 3_000))
        .await
    {
        Err(StoreError::Conflict {
            expected, actual, ..
        }) => assert_eq!((expected, actual), (1, 2)),
        other => panic!("a stale writer must conflict, got {other:?}"),
    }
    let with_message = TaskChange {
        user_message: Some(message("follow-up")),
        ..status("t1", TaskState::Working, 3_000)
    };
    let (ev, snap) = store.append("t1", 2, with_message).await.unwrap();
    assert_eq!(ev.seq, 3);
    assert_eq!(snap.history.last().unwrap().message_id, "follow-up");
    let rec = store.get("alice", "t1", None).await.unwrap().unwrap();
    assert_eq!(rec.seq, 3);
    assert_eq!(rec.task, snap);
    assert!(matches!(
        store
            .append("nope", 1, status("nope", TaskState::Working, 1))
            .await,
        Err(StoreError::NotFound(_))
    ));
}

pub async fn terminal_tasks_are_immutable(store: &dyn TaskStore) {
    store
        .create(new_task("alice", "t1", "c1", 1_000))
        .await
        .unwrap();
    store
        .append("t1", 1, status("t1", TaskState::Completed, 2_000))
        .await
        .unwrap();
    assert!(matches!(
        store
            .append("t1", 2, status("t1", TaskState::Working, 3_000))
            .await,
        Err(StoreError::Terminal(_))
    ));
    let rec = store.get("alice", "t1", None).await.unwrap().unwrap();
    assert_eq!(state_of(&rec.task), TaskState::Completed);
}

pub async fn events_replay_in_order(store: &dyn TaskStore) {
    store
        .create(new_task("alice", "t1", "c1", 1_000))
        .await
        .unwrap();
    let mut seq = 1;
    for i in 0..5 {
        let (ev, _) = store
            .append("t1", seq, artifact("t1", &i.to_string(), i > 0))
            .await
            .unwrap();
        seq = ev.seq;
    }
    store
        .append("t1", seq, status("t1", TaskState::Completed, 2_000))
        .await
        .unwrap();
    let all = store.events_after("alice", "t1", 0).await.unwrap();
    assert_eq!(
        all.iter().map(|e| e.seq).collect::<Vec<_>>(),
        (1..=7).collect::<Vec<_>>()
    );
    let tail = store.events_after("alice", "t1", 5).await.unwrap();
    assert_eq!(tail.iter().map(|e| e.seq).collect::<Vec<_>>(), vec![6, 7]);
    assert!(
        store
            .events_after("alice", "t1", 7)
            .await
            .unwrap()
            .is_empty()
    );
    let rec = store.get("alice", "t1", None).await.unwrap().unwrap();
    assert_eq!(rec.task.artifacts.len(), 1);
    assert_eq!(
        rec.task.artifacts[0].parts.len(),
        5,
        "append extends the artifact"
    );
}

pub async fn last_seqs_report_each_existing_task(store: &dyn TaskStore) {
    store
        .create(new_task("alice", "t1", "c1", 1_000))
        .await
        .unwrap();
    store
        .create(new_task("bob", "t2", "c2", 1_000))
        .await
        .unwrap();
    let (ev, _) = store
        .append("t2", 1, status("t2", TaskState::Working, 2_000))
        .await
        .unwrap();
    assert_eq!(ev.seq, 2);
    let ids = ["t1", "t2", "missing"].map(String::from);
    let mut last = store.last_seqs(&ids).await.unwrap();
    last.sort();
    // Whoever owns them (the followers' safety net is the process's, not a caller's).
    assert_eq!(last, vec![("t1".to_owned(), 1), ("t2".to_owned(), 2)]);
    assert!(store.last_seqs(&[]).await.unwrap().is_empty());
}

pub async fn history_is_trimmed(store: &dyn TaskStore) {
    store
        .create(new_task("alice", "t1", "c1", 1_000))
        .await
        .unwrap();
    let mut seq = 1;
    for i in 1..=4 {
        let change = TaskChange {
            user_message: Some(message(&format!("m{i}"))),
            ..status("t1", TaskState::Working, 1_000 + i)
        };
        seq = store.append("t1", seq, change).await.unwrap().0.seq;
    }
    let ids = |t: &Task| {
        t.history
            .iter()
            .map(|m| m.message_id.clone())
            .collect::<Vec<_>>()
    };
    let all = store.get("alice", "t1", None).await.unwrap().unwrap().task;
    assert_eq!(ids(&all), ["t1-m0", "m1", "m2", "m3", "m4"]);
    let two = store
        .get("alice", "t1", Some(2))
        .await
        .unwrap()
        .unwrap()
        .task;
    assert_eq!(ids(&two), ["m3", "m4"]);
    let none = store
        .get("alice", "t1", Some(0))
        .await
        .unwrap()
        .unwrap()
        .task;
    assert!(none.history.is_empty());
}

pub async fn list_pages_newest_first_exactly_once(store: &dyn TaskStore) {
    // 120 tasks; timestamps collide in groups of 3 to exercise the id tie-break.
    for n in 0..120 {
        store
            .create(new_task("alice", &tid(n), "c", 10_000 + (n as i64 / 3)))
            .await
            .unwrap();
    }
    let mut seen = Vec::new();
    let mut query = ListQuery {
        page_size: 50,
        ..Default::default()
    };
    loop {
        let page = store.list("alice", &query).await.unwrap();
        let expected_total = if seen.len() < 50 { 120 } else { 121 };
        assert_eq!(page.total_size, expected_total);
        seen.extend(page.tasks.iter().map(|t| t.id.clone()));
        // A task created between pages must not shift the remaining pages.
        if seen.len() == 50 {
            store
                .create(new_task("alice", &tid(999), "c", 99_000))
                .await
                .unwrap();
        }
        match page.next {
            Some(c) => query.cursor = Some(c),
            None => break,
        }
    }
    let expected: Vec<String> = (0..120).rev().map(tid).collect();
    assert_eq!(seen, expected, "every task exactly once, newest first");
}

pub async fn list_filters_and_totals(store: &dyn TaskStore) {
    for n in 0..10 {
        let ctx = if n % 2 == 0 { "even" } else { "odd" };
        store
            .create(new_task("alice", &tid(n), ctx, 1_000 + n as i64 * 10))
            .await
            .unwrap();
    }
    store
        .append(&tid(3), 1, status(&tid(3), TaskState::Completed, 5_000))
        .await
        .unwrap();
    let q = |f: fn(&mut ListQuery)| {
        let mut q = ListQuery {
            page_size: 100,
            ..Default::default()
        };
        f(&mut q);
        q
    };
    let page = store
        .list("alice", &q(|q| q.context_id = Some("even".into())))
        .await
        .unwrap();
    assert_eq!(page.total_size, 5);
    assert!(page.tasks.iter().all(|t| t.context_id == "even"));

    let page = store
        .list("alice", &q(|q| q.status = Some(TaskState::Completed)))
        .await
        .unwrap();
    assert_eq!(
        page.tasks.iter().map(|t| t.id.clone()).collect::<Vec<_>>(),
        [tid(3)]
    );

    let page = store
        .list(
            "alice",
            &q(|q| q.status_after = Some(Timestamp::from_millis(1_070))),
        )
        .await
        .unwrap();
    // 1_070, 1_080, 1_090 and the completed task at 5_000 (which is listed first).
    assert_eq!(
        page.tasks.iter().map(|t| t.id.clone()).collect::<Vec<_>>(),
        [tid(3), tid(9), tid(8), tid(7)]
    );
    assert_eq!(page.total_size, 4);

    let mut small = q(|q| q.context_id = Some("odd".into()));
    small.page_size = 2;
    let first = store.list("alice", &small).await.unwrap();
    assert_eq!((first.tasks.len(), first.total_size), (2, 5));
    assert!(first.next.is_some());
}

pub async fn list_omits_artifacts_unless_asked(store: &dyn TaskStore) {
    store
        .create(new_task("alice", "t1", "c1", 1_000))
        .await
        .unwrap();
    store
        .append("t1", 1, artifact("t1", "x", false))
        .await
        .unwrap();
    let mut q = ListQuery {
        page_size: 10,
        ..Default::default()
    };
    let page = store.list("alice", &q).await.unwrap();
    assert!(page.tasks[0].artifacts.is_empty());
    q.include_artifacts = true;
    q.history_length = Some(0);
    let page = store.list("alice", &q).await.unwrap();
    assert_eq!(page.tasks[0].artifacts.len(), 1);
    assert!(page.tasks[0].history.is_empty());
}

pub async fn push_config_crud(store: &dyn TaskStore) {
    store
        .create(new_task("alice", "t1", "c1", 1_000))
        .await
        .unwrap();
    for i in 0..3 {
        let cfg = TaskPushNotificationConfig {
            id: format!("p{i}"),
            task_id: "t1".into(),
            url: format!("https://example.com/{i}"),
            token: "tok".into(),
            ..Default::default()
        };
        assert_eq!(
            store
                .put_push_config(
                    "alice",
                    cfg.clone(),
                    a2a_types::Dialect::V1,
                    PushQuota::NONE
                )
                .await
                .unwrap(),
            cfg
        );
    }
    let replaced = TaskPushNotificationConfig {
        id: "p1".into(),
        task_id: "t1".into(),
        url: "https://example.com/new".into(),
        ..Default::default()
    };
    store
        .put_push_config(
            "alice",
            replaced.clone(),
            a2a_types::Dialect::V1,
            PushQuota::NONE,
        )
        .await
        .unwrap();
    assert_eq!(
        store.get_push_config("alice", "t1", "p1").await.unwrap(),
        Some(replaced)
    );
    let first = store.list_push_configs("alice", "t1", 2, "").await.unwrap();
    assert_eq!(first.configs.len(), 2);
    assert!(!first.next_page_token.is_empty());
    let second = store
        .list_push_configs("alice", "t1", 2, &first.next_page_token)
        .await
        .unwrap();
    assert_eq!(second.configs.len(), 1);
    assert!(second.next_page_token.is_empty());
    assert!(matches!(
        store.list_push_configs("alice", "t1", 2, "garbage!").await,
        Err(StoreError::InvalidPageToken)
    ));
    store.delete_push_config("alice", "t1", "p0").await.unwrap();
    store.delete_push_config("alice", "t1", "p0").await.unwrap();
    assert!(
        store
            .get_push_config("alice", "t1", "p0")
            .await
            .unwrap()
            .is_none()
    );
    assert!(matches!(
        store.get_push_config("alice", "nope", "p0").await,
        Err(StoreError::NotFound(_))
    ));
}

fn push_cfg(task_id: &str, id: &str) -> TaskPushNotificationConfig {
    TaskPushNotificationConfig {
        id: id.into(),
        task_id: task_id.into(),
        url: format!("https://example.com/{id}"),
        ..Default::default()
    }
}

/// A new push config past a [`PushQuota`] bound is refused (per task, per owner); replacing
/// one is not; deleting frees; concurrent creations never pass the bound together.
pub async fn push_configs_are_bounded(store: &dyn TaskStore) {
    for (owner, id) in [
        ("alice", "q1"),
        ("alice", "q2"),
        ("alice", "q3"),
        ("bob", "q4"),
    ] {
        store.create(new_task(owner, id, "c", 1)).await.unwrap();
    }
    let quota = PushQuota {
        per_task: 2,
        per_owner: 3,
    };
    let put = |owner: &'static str, task: &str, id: &str| {
        store.put_push_config(owner, push_cfg(task, id), a2a_types::Dialect::V1, quota)
    };
    put("alice", "q1", "a").await.unwrap();
    put("alice", "q1", "b").await.unwrap();
    let refused = put("alice", "q1", "c").await;
    assert!(
        matches!(
            refused,
            Err(StoreError::QuotaExceeded {
                quota: "push_configs_per_task",
                limit: 2
            })
        ),
        "{refused:?}"
    );
    put("alice", "q1", "b")
        .await
        .expect("a replacement is no new config");
    put("alice", "q2", "a").await.unwrap();
    let refused = put("alice", "q2", "b").await;
    assert!(
        matches!(
            refused,
            Err(StoreError::QuotaExceeded {
                quota: "push_configs_per_owner",
                limit: 3
            })
        ),
        "{refused:?}"
    );
    put("bob", "q4", "a")
        .await
        .expect("bob's configs are his own");
    store.delete_push_config("alice", "q1", "a").await.unwrap();
    put("alice", "q2", "b").await.expect("a deletion frees");
    // Ten at once on another task of a fresh owner's: exactly the bound gets in.
    store.create(new_task("carol", "q5", "c", 1)).await.unwrap();
    let quota = PushQuota {
        per_task: 3,
        per_owner: 0,
    };
    let ids: Vec<String> = (0..10).map(|i| format!("n{i}")).collect();
    let results = futures::future::join_all(ids.iter().map(|id| {
        store.put_push_config("carol", push_cfg("q5", id), a2a_types::Dialect::V1, quota)
    }))
    .await;
    assert_eq!(
        results.iter().filter(|r| r.is_ok()).count(),
        3,
        "{results:?}"
    );
    let page = store
        .list_push_configs("carol", "q5", 100, "")
        .await
        .unwrap();
    assert_eq!(page.configs.len(), 3);
}

pub async fn upstream_ids_are_kept(store: &dyn TaskStore) {
    store.create(new_task("o", "up-1", "c", 1)).await.unwrap();
    let rec = store.get("o", "up-1", None).await.unwrap().unwrap();
    assert_eq!(
        rec.upstream, None,
        "no upstream ids before the upstream names them"
    );
    let ids = UpstreamRef {
        task_id: "their-task".into(),
        context_id: "their-context".into(),
    };
    store.set_upstream("up-1", ids.clone()).await.unwrap();
    store
        .append("up-1", 1, status("up-1", TaskState::Working, 2))
        .await
        .unwrap();
    let rec = store.get("o", "up-1", None).await.unwrap().unwrap();
    assert_eq!(rec.upstream, Some(ids));
    assert_eq!(
        rec.task.id, "up-1",
        "the gateway's own id is what the task shows"
    );
    assert!(matches!(
        store
            .set_upstream(
                "missing",
                UpstreamRef {
                    task_id: "x".into(),
                    context_id: "y".into()
                }
            )
            .await,
        Err(StoreError::NotFound(_))
    ));
}

pub async fn dispatch_marks_tell_queued_from_sent(store: &dyn TaskStore) {
    let marks =
        |id: &'static str| async move { store.get("o", id, None).await.unwrap().unwrap().dispatch };
    store.create(new_task("o", "dm-1", "c", 1)).await.unwrap();
    assert_eq!(marks("dm-1").await, DispatchMarks::default(), "nothing yet");
    store
        .mark_dispatch("dm-1", DispatchMark::Queued { priority: 2 })
        .await
        .unwrap();
    let queued = marks("dm-1").await;
    assert_eq!((queued.priority, queued.sent_turn), (Some(2), None));
    let before = Timestamp::now().as_millis();
    store
        .mark_dispatch("dm-1", DispatchMark::Sending { turn: 1, epoch: 0 })
        .await
        .unwrap();
    let sent = marks("dm-1").await;
    assert_eq!((sent.priority, sent.sent_turn), (Some(2), Some(1)));
    let at = sent.sent_at_ms.expect("the moment of sending");
    // Database and process clocks may differ a little.
    assert!((at - before).abs() < 5_000, "{at} vs {before}");
    // A later turn replaces the mark; the upstream naming its task keeps it.
    store
        .mark_dispatch("dm-1", DispatchMark::Sending { turn: 2, epoch: 0 })
        .await
        .unwrap();
    let ids = UpstreamRef {
        task_id: "u".into(),
        context_id: "v".into(),
    };
    store.set_upstream("dm-1", ids.clone()).await.unwrap();
    assert_eq!(marks("dm-1").await.sent_turn, Some(2));
    // A task sent before it existed in the store: its upstream ids mark turn 1 as sent.
    store.create(new_task("o", "dm-2", "c", 1)).await.unwrap();
    store.set_upstream("dm-2", ids).await.unwrap();
    let named = marks("dm-2").await;
    assert_eq!(named.sent_turn, Some(1));
    assert!(named.sent_at_ms.is_some());
    assert!(matches!(
        store
            .mark_dispatch("missing", DispatchMark::Sending { turn: 1, epoch: 0 })
            .await,
        Err(StoreError::NotFound(_))
    ));
}

/// A turn's writes carry the epoch it started under (review M4): an append or a "sending"
/// mark under any other epoch is refused with `Fenced` and writes nothing, before the sequence
/// guard is even looked at; writes that are not a turn's (`None`) are guarded by sequence only.
pub async fn stale_epochs_are_fenced(store: &dyn TaskStore) {
    store.create(new_task("o", "f-1", "c", 1)).await.unwrap();
    let rec = store.get("o", "f-1", None).await.unwrap().unwrap();
    assert_eq!(rec.dispatch.epoch, 0, "a new task starts at epoch 0");
    let stale = rec.dispatch.epoch + 1;
    assert_eq!(
        store
            .append_fenced(
                "f-1",
                1,
                Some(stale),
                vec![status("f-1", TaskState::Working, 2)]
            )
            .await
            .unwrap_err(),
        StoreError::Fenced("f-1".into())
    );
    assert_eq!(
        store
            .mark_dispatch(
                "f-1",
                DispatchMark::Sending {
                    turn: 1,
                    epoch: stale
                }
            )
            .await
            .unwrap_err(),
        StoreError::Fenced("f-1".into())
    );
    let after = store.get("o", "f-1", None).await.unwrap().unwrap();
    assert_eq!(
        (after.seq, after.dispatch.sent_turn),
        (1, None),
        "nothing written"
    );
    let (events, _) = store
        .append_fenced(
            "f-1",
            1,
            Some(0),
            vec![status("f-1", TaskState::Working, 2)],
        )
        .await
        .unwrap();
    assert_eq!(events[0].seq, 2);
    store
        .mark_dispatch("f-1", DispatchMark::Sending { turn: 1, epoch: 0 })
        .await
        .unwrap();
    // The sequence guard still applies under the right epoch.
    assert!(matches!(
        store
            .append_fenced("f-1", 1, Some(0), vec![status("f-1", TaskState::Failed, 3)])
            .await,
        Err(StoreError::Conflict { .. })
    ));
    store
        .append("f-1", 2, status("f-1", TaskState::Working, 3))
        .await
        .unwrap();
}

fn key_request(owner: &str, key: &str, task_id: &str, ttl: std::time::Duration) -> KeyRequest {
    KeyRequest {
        owner: owner.into(),
        key: key.into(),
        fingerprint: format!("fp-{task_id}"),
        task_id: task_id.into(),
        after_seq: 3,
        ttl,
    }
}

/// Idempotency keys: the first claim wins and later ones learn what it recorded; keys are
/// per owner; a release frees a key only for the request that holds it.
pub async fn idempotency_keys_are_per_owner_and_first_wins(store: &dyn TaskStore) {
    let day = std::time::Duration::from_secs(86_400);
    assert_eq!(
        store
            .claim_key(&key_request("o", "k1", "t1", day))
            .await
            .unwrap(),
        KeyClaim::Claimed
    );
    match store
        .claim_key(&key_request("o", "k1", "t2", day))
        .await
        .unwrap()
    {
        KeyClaim::Held(held) => {
            assert_eq!(held.task_id, "t1", "a retried key names the first task");
            assert_eq!(held.fingerprint, "fp-t1");
            assert_eq!(held.after_seq, 3);
        }
        other => panic!("the key is held: {other:?}"),
    }
    assert_eq!(
        store
            .claim_key(&key_request("other", "k1", "t3", day))
            .await
            .unwrap(),
        KeyClaim::Claimed,
        "keys are scoped to their owner"
    );
    store.release_key("o", "k1", "t9").await.unwrap();
    assert!(
        matches!(store.claim_key(&key_request("o", "k1", "t4", day)).await.unwrap(), KeyClaim::Held(h) if h.task_id == "t1"),
        "a release for another request leaves the key alone"
    );
    store.release_key("o", "k1", "t1").await.unwrap();
    assert_eq!(
        store
            .claim_key(&key_request("o", "k1", "t4", day))
            .await
            .unwrap(),
        KeyClaim::Claimed,
        "a released key can be claimed again"
    );
    assert!(
        store
            .reclaim_key(&key_request("o", "k1", "t5", day), "t4")
            .await
            .unwrap(),
        "a reclaim naming the holder takes the key"
    );
    assert!(
        !store
            .reclaim_key(&key_request("o", "k1", "t6", day), "t4")
            .await
            .unwrap(),
        "a reclaim naming a former holder does not"
    );
    assert!(
        matches!(store.claim_key(&key_request("o", "k1", "t7", day)).await.unwrap(), KeyClaim::Held(h) if h.task_id == "t5")
    );
}

/// An expired key is free again, and the sweep deletes expired keys (only those).
pub async fn expired_idempotency_keys_are_free_and_purged(store: &dyn TaskStore) {
    let short = std::time::Duration::from_millis(200);
    let day = std::time::Duration::from_secs(86_400);
    for key in ["a", "b", "c"] {
        store
            .claim_key(&key_request("o", key, "t1", short))
            .await
            .unwrap();
    }
    store
        .claim_key(&key_request("o", "kept", "t1", day))
        .await
        .unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(400)).await;
    assert_eq!(
        store
            .claim_key(&key_request("o", "a", "t2", day))
            .await
            .unwrap(),
        KeyClaim::Claimed,
        "an expired key is claimed anew"
    );
    assert_eq!(
        store.purge_expired_keys(1).await.unwrap(),
        1,
        "at most the limit"
    );
    assert_eq!(store.purge_expired_keys(100).await.unwrap(), 1);
    assert_eq!(store.purge_expired_keys(100).await.unwrap(), 0);
    for (key, task) in [("a", "t2"), ("kept", "t1")] {
        assert!(
            matches!(store.claim_key(&key_request("o", key, "t3", day)).await.unwrap(), KeyClaim::Held(h) if h.task_id == task),
            "{key} survives the sweep"
        );
    }
}

/// `create_with` and `append_all`: several events as one step, numbered in order, the same
/// snapshot and log as one append each, and all or nothing.
pub async fn changes_commit_together(store: &dyn TaskStore) {
    let created = vec![artifact("t1", "a", false), artifact("t1", "b", true)];
    let (events, task) = store
        .create_with(new_task("alice", "t1", "c1", 1_000), created)
        .await
        .unwrap();
    assert_eq!(events.iter().map(|e| e.seq).collect::<Vec<_>>(), [1, 2, 3]);
    assert!(
        matches!(events[0].event.payload, Some(Payload::Task(ref t)) if t.artifacts.is_empty())
    );
    assert_eq!(task.artifacts[0].parts.len(), 2);
    let rec = store.get("alice", "t1", None).await.unwrap().unwrap();
    assert_eq!((rec.seq, &rec.task), (3, &task));

    // A follow-up message, a chunk and the end, together.
    let follow = TaskChange {
        user_message: Some(message("t1-m1")),
        ..status("t1", TaskState::Working, 2_000)
    };
    let batch = vec![
        follow,
        artifact("t1", "c", true),
        status("t1", TaskState::Completed, 3_000),
    ];
    let (events, task) = store.append_all("t1", 3, batch).await.unwrap();
    assert_eq!(events.iter().map(|e| e.seq).collect::<Vec<_>>(), [4, 5, 6]);
    assert_eq!(state_of(&task), TaskState::Completed);
    assert_eq!(task.history.len(), 2);
    assert_eq!(task.artifacts[0].parts.len(), 3);
    let rec = store.get("alice", "t1", None).await.unwrap().unwrap();
    assert_eq!((rec.seq, &rec.task), (6, &task));
    let log = store.events_after("alice", "t1", 0).await.unwrap();
    assert_eq!(
        log.iter().map(|e| e.seq).collect::<Vec<_>>(),
        (1..=6).collect::<Vec<_>>()
    );
    assert_eq!(
        log[3..].iter().map(|e| &e.event).collect::<Vec<_>>(),
        events.iter().map(|e| &e.event).collect::<Vec<_>>()
    );

    // Nothing of a batch that moves past a terminal state is kept.
    store
        .create(new_task("alice", "t2", "c1", 1_000))
        .await
        .unwrap();
    let past_end = vec![
        status("t2", TaskState::Completed, 2_000),
        status("t2", TaskState::Working, 3_000),
    ];
    assert!(matches!(
        store.append_all("t2", 1, past_end).await,
        Err(StoreError::Terminal(_))
    ));
    let rec = store.get("alice", "t2", None).await.unwrap().unwrap();
    assert_eq!((rec.seq, state_of(&rec.task)), (1, TaskState::Submitted));
    assert_eq!(store.events_after("alice", "t2", 0).await.unwrap().len(), 1);
    // A stale sequence number refuses the whole batch too.
    assert!(matches!(
        store
            .append_all("t2", 5, vec![status("t2", TaskState::Working, 2_000)])
            .await,
        Err(StoreError::Conflict { .. })
    ));
}
