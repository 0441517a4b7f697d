//! Retention on PostgreSQL beyond the conformance suite: a time to live counted in days, one
//! sweeping replica at a time, the index the sweep reads, and stale dispatch leases.

use std::time::{Duration, SystemTime};

use a2a_store::pg::TASK_SWEEP_LOCK;
use a2a_store::{NewTask, TaskStore};
use a2a_types::v1::{Task, TaskState};
use sqlx::Connection;

use super::{TestStore, status};

const DAY: Duration = Duration::from_secs(86_400);

async fn task(store: &TestStore, id: &str, end: Option<TaskState>) {
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
    let changes = end
        .map(|state| a2a_store::TaskChange {
            user_message: None,
            event: status(state, 1_000, None),
        })
        .into_iter()
        .collect();
    store.store.create_with(new, changes).await.unwrap();
}

/// Moves the last update of tasks `ids` `age` into the past (as if they had ended then).
async fn age(store: &TestStore, ids: &[&str], age: Duration) {
    sqlx::query(
        "UPDATE tasks SET updated_at = now() - make_interval(secs => $2) WHERE id = ANY($1)",
    )
    .bind(ids)
    .bind(age.as_secs_f64())
    .execute(store.store.pool())
    .await
    .unwrap();
}

/// A week-long time to live deletes the tasks that ended more than a week ago, and only while
/// no other replica sweeps: a second replica finds the lock taken and deletes nothing.
#[tokio::test]
async fn only_one_replica_sweeps_at_a_time() {
    let store = TestStore::new().await;
    for id in ["a", "b", "c"] {
        task(&store, id, Some(TaskState::Completed)).await;
    }
    task(&store, "old-running", None).await;
    task(&store, "recent", Some(TaskState::Failed)).await;
    age(&store, &["a", "b", "c", "old-running"], 8 * DAY).await;
    age(&store, &["recent"], 6 * DAY).await;
    let cutoff = SystemTime::now() - 7 * DAY;

    // Another replica's sweep holds the lock (here: a session holding the same advisory lock).
    let mut other = sqlx::PgConnection::connect(store.db.url()).await.unwrap();
    sqlx::query("SELECT pg_advisory_lock($1)")
        .bind(TASK_SWEEP_LOCK)
        .execute(&mut other)
        .await
        .unwrap();
    assert_eq!(store.store.purge_tasks(cutoff, 1000).await.unwrap(), 0);
    sqlx::query("SELECT pg_advisory_unlock($1)")
        .bind(TASK_SWEEP_LOCK)
        .execute(&mut other)
        .await
        .unwrap();
    assert_eq!(store.store.purge_tasks(cutoff, 2).await.unwrap(), 2);
    assert_eq!(store.store.purge_tasks(cutoff, 1000).await.unwrap(), 1);
    let (left,): (Vec<String>,) = sqlx::query_as("SELECT array_agg(id ORDER BY id) FROM tasks")
        .fetch_one(store.store.pool())
        .await
        .unwrap();
    assert_eq!(left, ["old-running", "recent"]);
    let (events,): (i64,) = sqlx::query_as("SELECT count(*) FROM task_events")
        .fetch_one(store.store.pool())
        .await
        .unwrap();
    assert_eq!(events, 1 + 2, "only the kept tasks' events are left");
}

/// The sweep finds the oldest terminal tasks with a range scan of `tasks_terminal_at`, which
/// holds terminal tasks only.
#[tokio::test]
async fn the_sweep_reads_the_terminal_index() {
    let store = TestStore::new().await;
    task(&store, "done", Some(TaskState::Completed)).await;
    task(&store, "running", None).await;
    let plan: Vec<(String,)> = sqlx::query_as(
        "EXPLAIN SELECT id FROM tasks WHERE terminal_at IS NOT NULL \
           AND terminal_at < now() ORDER BY terminal_at LIMIT 1000",
    )
    .fetch_all(store.store.pool())
    .await
    .unwrap();
    let plan: Vec<String> = plan.into_iter().map(|(line,)| line).collect();
    assert!(
        plan.iter().any(|l| l.contains("tasks_terminal_at")),
        "{plan:#?}"
    );
    let (indexed,): (Vec<String>,) =
        sqlx::query_as("SELECT array_agg(id) FROM tasks WHERE terminal_at IS NOT NULL")
            .fetch_one(store.store.pool())
            .await
            .unwrap();
    assert_eq!(indexed, ["done"]);
}

/// Leases that expired more than the grace ago are deleted; recent and live ones are kept.
#[tokio::test]
async fn stale_dispatch_leases_are_deleted() {
    let store = TestStore::new().await;
    sqlx::query(
        "INSERT INTO dispatch_leases (replica, expires_at) VALUES \
           ('gone', now() - interval '2 hours'), ('recent', now() - interval '10 minutes'), \
           ('live', now() + interval '15 seconds')",
    )
    .execute(store.store.pool())
    .await
    .unwrap();
    let grace = Duration::from_secs(3600);
    assert_eq!(store.store.purge_stale_leases(grace).await.unwrap(), 1);
    assert_eq!(store.store.purge_stale_leases(grace).await.unwrap(), 0);
    let (left,): (Vec<String>,) =
        sqlx::query_as("SELECT array_agg(replica ORDER BY replica) FROM dispatch_leases")
            .fetch_one(store.store.pool())
            .await
            .unwrap();
    assert_eq!(left, ["live", "recent"]);
}

/// `owner_bytes` keeps about a row per owner and live writer: the rows of connections that are
/// gone are folded into slot 0 by the sweep, the sums unchanged; the rows of live writers stay.
#[tokio::test]
async fn owner_bytes_of_gone_connections_are_folded() {
    let store = TestStore::new().await;
    let message = a2a_types::v1::Message {
        message_id: "m".into(),
        parts: vec![a2a_types::v1::Part {
            content: Some(a2a_types::v1::part::Content::Text("hello".into())),
            ..Default::default()
        }],
        ..Default::default()
    };
    let new = NewTask {
        push: None,
        upstream_key: None,
        owner: "alice".into(),
        agent: "echo".into(),
        task: Task {
            id: "a".into(),
            context_id: "c".into(),
            history: vec![message],
            ..Default::default()
        },
    };
    store.store.create(new).await.unwrap();
    let before = store.store.usage("alice", 0).await.unwrap().bytes;
    assert!(before > 0);
    // Rows left by writer connections that are gone (no backend has these pids).
    sqlx::query(
        "INSERT INTO owner_bytes (owner, slot, bytes) VALUES \
           ('alice', -7, 100), ('alice', -8, 20), ('bob', -7, 5), ('bob', 0, 1)",
    )
    .execute(store.store.pool())
    .await
    .unwrap();
    store
        .store
        .purge_stale_leases(Duration::from_secs(3600))
        .await
        .unwrap();
    assert_eq!(
        store.store.usage("alice", 0).await.unwrap().bytes,
        before + 120
    );
    assert_eq!(store.store.usage("bob", 0).await.unwrap().bytes, 6);
    let rows: Vec<(String, i32, i64)> =
        sqlx::query_as("SELECT owner, slot, bytes FROM owner_bytes ORDER BY owner, slot")
            .fetch_all(store.store.pool())
            .await
            .unwrap();
    assert!(
        rows.iter().all(|(_, slot, _)| *slot >= 0),
        "gone slots folded: {rows:?}"
    );
    assert!(rows.contains(&("bob".into(), 0, 6)), "{rows:?}");
    // The live writer's own row (its backend pid) is kept.
    assert!(
        rows.iter().any(|(o, slot, _)| o == "alice" && *slot > 0),
        "{rows:?}"
    );
}

/// The expiry sweep finds the oldest interrupted tasks with a range scan of
/// `tasks_interrupted`, which holds interrupted tasks only.
#[tokio::test]
async fn the_expiry_sweep_reads_the_interrupted_index() {
    let store = TestStore::new().await;
    task(&store, "asking", Some(TaskState::InputRequired)).await;
    task(&store, "auth", Some(TaskState::AuthRequired)).await;
    task(&store, "running", None).await;
    task(&store, "done", Some(TaskState::Completed)).await;
    let plan: Vec<(String,)> = sqlx::query_as(
        "EXPLAIN SELECT id, context_id, seq FROM tasks \
          WHERE state IN (6, 8) AND status_ms < 5000 ORDER BY status_ms LIMIT 500",
    )
    .fetch_all(store.store.pool())
    .await
    .unwrap();
    let plan: Vec<String> = plan.into_iter().map(|(line,)| line).collect();
    assert!(
        plan.iter().any(|l| l.contains("tasks_interrupted")),
        "{plan:#?}"
    );
    let found = store
        .store
        .interrupted_before(SystemTime::UNIX_EPOCH + Duration::from_secs(5), 10)
        .await
        .unwrap();
    let mut ids: Vec<_> = found.into_iter().map(|t| t.task_id).collect();
    ids.sort();
    assert_eq!(ids, ["asking", "auth"]);
    // The open-task count of `usage` is a scan of the owner's open states on the state index,
    // never of the owner's terminal tasks.
    let plan: Vec<(String,)> = sqlx::query_as(
        "EXPLAIN SELECT 1 FROM tasks WHERE owner = 'alice' AND state IN (0, 1, 2, 6, 8) \
          LIMIT 10000",
    )
    .fetch_all(store.store.pool())
    .await
    .unwrap();
    let plan: Vec<String> = plan.into_iter().map(|(line,)| line).collect();
    assert!(
        plan.iter().any(|l| l.contains("tasks_owner_state_recent")),
        "{plan:#?}"
    );
    assert_eq!(store.store.usage("alice", 0).await.unwrap().open_tasks, 3);
}
