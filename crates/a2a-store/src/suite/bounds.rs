//! Per-owner bound cases of the conformance suite: which tasks [`TaskStore::interrupted_before`]
//! finds for the expiry sweep, and what [`TaskStore::usage`] counts.

use std::time::{Duration, SystemTime};

use a2a_types::v1::TaskState;

use super::{artifact, new_task, status};
use crate::{OwnerUsage, StoreError, TaskStore, stored_bytes};

fn at_ms(ms: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_millis(ms)
}

/// Interrupted tasks (INPUT_REQUIRED, AUTH_REQUIRED) whose status is older than the cutoff are
/// found oldest first, at most `limit`, whoever owns them; running, terminal and newer ones are
/// not. Expiring one is an append guarded by the sequence number found: a second expiry of the
/// same find (another replica's) is a conflict, and the task is no longer found.
pub async fn interrupted_tasks_are_found_oldest_first(store: &dyn TaskStore) {
    use TaskState::{AuthRequired, Completed, InputRequired, Working};
    let cases = [
        ("alice", "int-input", InputRequired, 2_000),
        ("bob", "int-auth", AuthRequired, 1_500),
        ("alice", "int-working", Working, 1_000),
        ("alice", "int-done", Completed, 1_000),
        ("alice", "int-late", InputRequired, 9_000),
    ];
    for (owner, id, state, ms) in cases {
        store.create(new_task(owner, id, "c1", 500)).await.unwrap();
        store.append(id, 1, status(id, state, ms)).await.unwrap();
    }
    let found = store.interrupted_before(at_ms(5_000), 10).await.unwrap();
    let ids: Vec<_> = found.iter().map(|t| t.task_id.as_str()).collect();
    assert_eq!(
        ids,
        ["int-auth", "int-input"],
        "oldest first, interrupted only"
    );
    assert_eq!(found[0].seq, 2);
    assert_eq!(found[0].context_id, "c1");
    let first = store.interrupted_before(at_ms(5_000), 1).await.unwrap();
    assert_eq!(first.len(), 1, "the limit");
    assert_eq!(first[0].task_id, "int-auth");
    assert!(
        store
            .interrupted_before(at_ms(1_000), 10)
            .await
            .unwrap()
            .is_empty(),
        "nothing is older than the cutoff"
    );

    // Expiring: the first replica's append wins, the second finds the task moved.
    let expire = |id: &str| status(id, TaskState::Canceled, 6_000);
    store
        .append("int-auth", 2, expire("int-auth"))
        .await
        .unwrap();
    let again = store.append("int-auth", 2, expire("int-auth")).await;
    assert!(
        matches!(
            again,
            Err(StoreError::Conflict { .. } | StoreError::Terminal(_))
        ),
        "{again:?}"
    );
    // A task the client resumed meanwhile is not found either.
    store
        .append("int-input", 2, status("int-input", Working, 3_000))
        .await
        .unwrap();
    assert!(
        store
            .interrupted_before(at_ms(5_000), 10)
            .await
            .unwrap()
            .is_empty()
    );
    let found = store.interrupted_before(at_ms(10_000), 10).await.unwrap();
    let ids: Vec<_> = found.iter().map(|t| t.task_id.as_str()).collect();
    assert_eq!(ids, ["int-late"]);
}

/// `usage` counts an owner's tasks that are not terminal (interrupted ones included), up to
/// the bound asked, and the bytes of its stored messages and artifacts, as [`stored_bytes`] of
/// each task; another owner's tasks count for that owner only; retention gives the bytes back.
pub async fn usage_counts_open_tasks_and_stored_bytes(store: &dyn TaskStore) {
    use TaskState::{Completed, InputRequired, Working};
    let empty = store.usage("alice", 0).await.unwrap();
    assert_eq!(empty, OwnerUsage::default());
    for (id, state) in [
        ("use-1", None),
        ("use-2", Some(Working)),
        ("use-3", Some(InputRequired)),
        ("use-4", Some(Completed)),
    ] {
        store
            .create(new_task("alice", id, "c1", 500))
            .await
            .unwrap();
        if let Some(state) = state {
            store.append(id, 1, status(id, state, 1_000)).await.unwrap();
        }
    }
    store
        .create(new_task("bob", "use-bob", "c1", 500))
        .await
        .unwrap();
    store
        .append("use-2", 2, artifact("use-2", &"x".repeat(10_000), false))
        .await
        .unwrap();
    store
        .append("use-2", 3, artifact("use-2", &"y".repeat(5_000), true))
        .await
        .unwrap();

    let mut expected = 0;
    for id in ["use-1", "use-2", "use-3", "use-4"] {
        let rec = store.get("alice", id, None).await.unwrap().unwrap();
        expected += stored_bytes(&rec.task);
    }
    assert!(expected > 15_000, "{expected}");
    let usage = store.usage("alice", 0).await.unwrap();
    assert_eq!(usage.open_tasks, 3, "submitted, working and input-required");
    assert_eq!(usage.bytes, expected);
    assert_eq!(store.usage("alice", 2).await.unwrap().open_tasks, 2);
    let bob = store.usage("bob", 0).await.unwrap();
    assert_eq!(bob.open_tasks, 1);
    let bob_task = store.get("bob", "use-bob", None).await.unwrap().unwrap();
    assert_eq!(bob.bytes, stored_bytes(&bob_task.task));

    // Ending a task frees its place, not its bytes; deleting it frees its bytes.
    store
        .append("use-3", 2, status("use-3", Completed, 2_000))
        .await
        .unwrap();
    assert_eq!(store.usage("alice", 0).await.unwrap().open_tasks, 2);
    let done = store.get("alice", "use-4", None).await.unwrap().unwrap();
    let three = store.get("alice", "use-3", None).await.unwrap().unwrap();
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert_eq!(store.purge_tasks(SystemTime::now(), 10).await.unwrap(), 2);
    let after = store.usage("alice", 0).await.unwrap();
    assert_eq!(
        after.bytes,
        expected - stored_bytes(&done.task) - stored_bytes(&three.task)
    );
    assert_eq!(after.open_tasks, 2);

    // A task created terminal (its answer stored with it) opens nothing, and an append refused
    // because its task is terminal closes nothing.
    store
        .create_with(
            new_task("alice", "use-5", "c1", 500),
            vec![status("use-5", Completed, 3_000)],
        )
        .await
        .unwrap();
    assert!(
        store
            .append("use-5", 2, status("use-5", Completed, 4_000))
            .await
            .is_err()
    );
    assert_eq!(store.usage("alice", 0).await.unwrap().open_tasks, 2);
}
