//! The store conformance suite and PostgreSQL-specific properties, on a real PostgreSQL: a fresh
//! database per test (`a2a_testing::TestDatabase`: `A2A_TEST_DATABASE_URL` or a private server).

use std::sync::Arc;

use a2a_store::{
    DispatchMark, KeyClaim, KeyRequest, ListQuery, MemoryTaskStore, NewTask, Orphan, PgOptions,
    PgTaskStore, PushConfigPage, PushQuota, StoreError, StoreResult, StoredEvent, TaskChange,
    TaskPage, TaskRecord, TaskStore, UpstreamRef,
};
use a2a_testing::TestDatabase;
use a2a_types::v1::stream_response::Payload;
use a2a_types::v1::{
    Artifact, Message, Part, Role, StreamResponse, Task, TaskArtifactUpdateEvent,
    TaskPushNotificationConfig, TaskState, TaskStatus, TaskStatusUpdateEvent, part::Content,
};
use a2a_types::wkt::Timestamp;
use async_trait::async_trait;

/// A migrated PgTaskStore that owns its test database (dropped with it).
struct TestStore {
    store: PgTaskStore,
    db: TestDatabase,
}

impl TestStore {
    async fn new() -> Self {
        let db = TestDatabase::create().await;
        let store = open(&db).await;
        Self { store, db }
    }

    /// Another store on the same database, as another gateway process would have.
    async fn twin(&self) -> PgTaskStore {
        open(&self.db).await
    }
}

async fn open(db: &TestDatabase) -> PgTaskStore {
    let store = PgTaskStore::connect_lazy(db.url(), &PgOptions::default()).unwrap();
    store.migrate().await.unwrap();
    store
}

#[async_trait]
impl TaskStore for TestStore {
    async fn create_with(
        &self,
        new: NewTask,
        c: Vec<TaskChange>,
    ) -> StoreResult<(Vec<StoredEvent>, Task)> {
        self.store.create_with(new, c).await
    }
    async fn append_fenced(
        &self,
        id: &str,
        seq: u64,
        epoch: Option<u64>,
        c: Vec<TaskChange>,
    ) -> StoreResult<(Vec<StoredEvent>, Task)> {
        self.store.append_fenced(id, seq, epoch, c).await
    }
    async fn get(&self, o: &str, id: &str, h: Option<usize>) -> StoreResult<Option<TaskRecord>> {
        self.store.get(o, id, h).await
    }
    async fn list(&self, o: &str, q: &ListQuery) -> StoreResult<TaskPage> {
        self.store.list(o, q).await
    }
    async fn events_after(&self, o: &str, id: &str, s: u64) -> StoreResult<Vec<StoredEvent>> {
        self.store.events_after(o, id, s).await
    }
    async fn last_seqs(&self, ids: &[String]) -> StoreResult<Vec<(String, u64)>> {
        self.store.last_seqs(ids).await
    }
    async fn put_push_config(
        &self,
        o: &str,
        c: TaskPushNotificationConfig,
        d: a2a_types::Dialect,
        q: PushQuota,
    ) -> StoreResult<TaskPushNotificationConfig> {
        self.store.put_push_config(o, c, d, q).await
    }
    async fn get_push_config(
        &self,
        o: &str,
        t: &str,
        id: &str,
    ) -> StoreResult<Option<TaskPushNotificationConfig>> {
        self.store.get_push_config(o, t, id).await
    }
    async fn list_push_configs(
        &self,
        o: &str,
        t: &str,
        n: usize,
        tok: &str,
    ) -> StoreResult<PushConfigPage> {
        self.store.list_push_configs(o, t, n, tok).await
    }
    async fn delete_push_config(&self, o: &str, t: &str, id: &str) -> StoreResult<()> {
        self.store.delete_push_config(o, t, id).await
    }
    async fn set_upstream(&self, id: &str, u: UpstreamRef) -> StoreResult<()> {
        self.store.set_upstream(id, u).await
    }
    async fn mark_dispatch(&self, id: &str, mark: DispatchMark) -> StoreResult<()> {
        self.store.mark_dispatch(id, mark).await
    }
    async fn claim_key(&self, r: &KeyRequest) -> StoreResult<KeyClaim> {
        self.store.claim_key(r).await
    }
    async fn reclaim_key(&self, r: &KeyRequest, stale: &str) -> StoreResult<bool> {
        self.store.reclaim_key(r, stale).await
    }
    async fn release_key(&self, o: &str, k: &str, t: &str) -> StoreResult<()> {
        self.store.release_key(o, k, t).await
    }
    async fn purge_expired_keys(&self, n: usize) -> StoreResult<u64> {
        self.store.purge_expired_keys(n).await
    }
    async fn purge_tasks(&self, before: std::time::SystemTime, n: usize) -> StoreResult<u64> {
        self.store.purge_tasks(before, n).await
    }
    async fn purge_stale_leases(&self, grace: std::time::Duration) -> StoreResult<u64> {
        self.store.purge_stale_leases(grace).await
    }
    async fn interrupted_before(
        &self,
        before: std::time::SystemTime,
        n: usize,
    ) -> StoreResult<Vec<a2a_store::Interrupted>> {
        self.store.interrupted_before(before, n).await
    }
    async fn usage(&self, o: &str, n: u64) -> StoreResult<a2a_store::OwnerUsage> {
        self.store.usage(o, n).await
    }
    async fn ping(&self) -> StoreResult<()> {
        self.store.ping().await
    }
    fn has_outbox(&self) -> bool {
        self.store.has_outbox()
    }
    async fn outbox_published(&self, commits: &[(String, u64)]) -> StoreResult<u64> {
        self.store.outbox_published(commits).await
    }
    async fn relay_outbox(
        &self,
        older_than: std::time::Duration,
        limit: usize,
        inline_max: usize,
        relay: &dyn a2a_store::OutboxRelay,
    ) -> StoreResult<a2a_store::RelayPass> {
        self.store
            .relay_outbox(older_than, limit, inline_max, relay)
            .await
    }
    async fn outbox_depth(&self, n: u64) -> StoreResult<a2a_store::OutboxDepth> {
        self.store.outbox_depth(n).await
    }
}

#[path = "pg/health.rs"]
mod health;
#[path = "pg/outbox.rs"]
mod outbox;
#[path = "pg/registry.rs"]
mod registry;
#[path = "pg/retention.rs"]
mod retention;

mod conformance {
    a2a_store::store_conformance_suite!(super::TestStore::new().await);
}

fn text(s: &str) -> Part {
    Part {
        content: Some(Content::Text(s.into())),
        ..Default::default()
    }
}

fn message(id: &str, role: Role) -> Message {
    Message {
        message_id: id.into(),
        role: role as i32,
        parts: vec![text(id)],
        ..Default::default()
    }
}

fn status(state: TaskState, ms: i64, msg: Option<Message>) -> StreamResponse {
    StreamResponse {
        payload: Some(Payload::StatusUpdate(TaskStatusUpdateEvent {
            status: Some(TaskStatus {
                state: state as i32,
                message: msg,
                timestamp: Some(Timestamp::from_millis(ms)),
            }),
            ..Default::default()
        })),
    }
}

fn chunk(artifact_id: &str, s: &str, append: bool) -> StreamResponse {
    StreamResponse {
        payload: Some(Payload::ArtifactUpdate(TaskArtifactUpdateEvent {
            artifact: Some(Artifact {
                artifact_id: artifact_id.into(),
                name: format!("{artifact_id}-name"),
                parts: vec![text(s)],
                ..Default::default()
            }),
            append,
            ..Default::default()
        })),
    }
}

fn new_task(id: &str) -> NewTask {
    NewTask {
        push: None,
        upstream_key: None,
        owner: "alice".into(),
        agent: "scenario".into(),
        task: Task {
            id: id.into(),
            context_id: "ctx".into(),
            status: Some(TaskStatus {
                state: TaskState::Submitted as i32,
                message: None,
                timestamp: Some(Timestamp::from_millis(1_000)),
            }),
            history: vec![message("m0", Role::User)],
            ..Default::default()
        },
    }
}

/// Every kind of change, including the rare ones (a Task event that shrinks history and
/// artifacts, an artifact replaced rather than appended): the PostgreSQL snapshots must equal
/// the in-memory store's after every step, read through this store and through a fresh one.
#[tokio::test]
async fn snapshots_equal_the_in_memory_store() {
    let pg = TestStore::new().await;
    let mem = MemoryTaskStore::new();
    let changes: Vec<TaskChange> = {
        let plain = |event| TaskChange {
            user_message: None,
            event,
        };
        let ask = message("question", Role::Agent);
        let replacement = Task {
            id: "t".into(),
            context_id: "ctx".into(),
            status: Some(TaskStatus {
                state: TaskState::Working as i32,
                message: None,
                timestamp: Some(Timestamp::from_millis(9_000)),
            }),
            history: vec![message("only", Role::Agent)],
            artifacts: vec![Artifact {
                artifact_id: "z".into(),
                parts: vec![text("z")],
                ..Default::default()
            }],
            metadata: None,
        };
        vec![
            plain(status(TaskState::Working, 2_000, None)),
            plain(chunk("a", "1", false)),
            plain(chunk("a", "2", true)),
            plain(chunk("b", "x", false)),
            plain(chunk("a", "3", true)),
            plain(chunk("b", "y", false)), // replaces b
            plain(StreamResponse {
                payload: Some(Payload::Message(message("note", Role::Agent))),
            }),
            plain(status(TaskState::InputRequired, 3_000, Some(ask))),
            TaskChange {
                user_message: Some(message("answer", Role::User)),
                event: status(TaskState::Working, 4_000, None),
            },
            plain(StreamResponse {
                payload: Some(Payload::Task(replacement)),
            }),
            plain(chunk("z", "more", true)),
            plain(status(TaskState::Completed, 10_000, None)),
        ]
    };
    pg.create(new_task("t")).await.unwrap();
    mem.create(new_task("t")).await.unwrap();
    for (i, change) in changes.into_iter().enumerate() {
        let seq = i as u64 + 1;
        let (pe, ps) = pg.append("t", seq, change.clone()).await.unwrap();
        let (me, ms) = mem.append("t", seq, change).await.unwrap();
        assert_eq!(
            (pe, &ps),
            (me, &ms),
            "step {i}: appended event and snapshot"
        );
        let fresh = pg.twin().await;
        for history in [None, Some(0), Some(2)] {
            let want = mem.get("alice", "t", history).await.unwrap();
            assert_eq!(
                pg.get("alice", "t", history).await.unwrap(),
                want,
                "step {i}"
            );
            assert_eq!(
                fresh.get("alice", "t", history).await.unwrap(),
                want,
                "step {i}"
            );
        }
    }
    assert_eq!(
        pg.events_after("alice", "t", 0).await.unwrap(),
        mem.events_after("alice", "t", 0).await.unwrap()
    );
}

/// Many tasks appended concurrently share statements; each task still gets its events in
/// order, and racing writers on one task get exactly one success.
#[tokio::test]
async fn concurrent_appends_batch_without_losing_or_mixing_events() {
    let pg = Arc::new(TestStore::new().await);
    let tasks: Vec<String> = (0..40).map(|i| format!("task-{i:03}")).collect();
    let mut runs = Vec::new();
    for id in tasks.clone() {
        let pg = pg.clone();
        runs.push(tokio::spawn(async move {
            pg.create(new_task(&id)).await.unwrap();
            let mut seq = 1;
            for n in 0..10 {
                let event = chunk("a", &n.to_string(), n > 0);
                seq = pg
                    .append(
                        &id,
                        seq,
                        TaskChange {
                            user_message: None,
                            event,
                        },
                    )
                    .await
                    .unwrap()
                    .0
                    .seq;
            }
            // Two writers that both saw `seq`: one wins, the other conflicts.
            let race = |ms| {
                let pg = pg.clone();
                let id = id.clone();
                async move {
                    let event = status(TaskState::Completed, ms, None);
                    pg.append(
                        &id,
                        seq,
                        TaskChange {
                            user_message: None,
                            event,
                        },
                    )
                    .await
                }
            };
            let (a, b) = tokio::join!(race(5_000), race(6_000));
            let wins = [&a, &b].iter().filter(|r| r.is_ok()).count();
            assert_eq!(wins, 1, "{a:?} / {b:?}");
            assert!(
                [a, b]
                    .into_iter()
                    .any(|r| matches!(r, Err(StoreError::Conflict { .. }))),
                "the loser conflicts"
            );
        }));
    }
    for run in runs {
        run.await.unwrap();
    }
    for id in &tasks {
        let events = pg.events_after("alice", id, 0).await.unwrap();
        assert_eq!(
            events.iter().map(|e| e.seq).collect::<Vec<_>>(),
            (1..=12).collect::<Vec<_>>()
        );
        let rec = pg.get("alice", id, None).await.unwrap().unwrap();
        assert_eq!(rec.task.artifacts[0].parts.len(), 10);
        assert_eq!(rec.seq, 12);
    }
}

/// Another process writing the task makes this process's cached snapshot stale: the append
/// conflicts instead of applying to the wrong snapshot, and a retry at the new sequence works.
#[tokio::test]
async fn a_stale_cache_conflicts_and_recovers() {
    let pg = TestStore::new().await;
    let other = pg.twin().await;
    pg.create(new_task("t")).await.unwrap();
    let plain = |event| TaskChange {
        user_message: None,
        event,
    };
    other
        .append("t", 1, plain(chunk("a", "from-other", false)))
        .await
        .unwrap();
    match pg.append("t", 1, plain(chunk("a", "stale", true))).await {
        Err(StoreError::Conflict { actual: 2, .. }) => {}
        other => panic!("expected a conflict at sequence 2, got {other:?}"),
    }
    let (_, snap) = pg
        .append("t", 2, plain(chunk("a", "mine", true)))
        .await
        .unwrap();
    assert_eq!(
        snap.artifacts[0].parts,
        vec![text("from-other"), text("mine")]
    );
    assert_eq!(
        other.get("alice", "t", None).await.unwrap().unwrap().task,
        snap
    );
}

/// `ping` answers while the server does; the schema applies twice without harm.
#[tokio::test]
async fn ping_and_idempotent_migrations() {
    let pg = TestStore::new().await;
    pg.ping().await.unwrap();
    pg.store.migrate().await.unwrap();
}

/// A store on `db` whose connections say they belong to `replica`.
async fn replica(db: &TestDatabase, replica: &str) -> PgTaskStore {
    let options = PgOptions {
        replica: Some(replica.into()),
        ..PgOptions::default()
    };
    let store = PgTaskStore::connect_lazy(db.url(), &options).unwrap();
    store.migrate().await.unwrap();
    store
}

fn working(id: &str) -> TaskChange {
    a2a_store::suite::status(id, TaskState::Working, Timestamp::now().as_millis())
}

/// A running task whose replica stops renewing its lease is claimed by exactly one survivor,
/// once; tasks of a live replica, and settled tasks, are never claimed.
#[tokio::test]
async fn orphaned_tasks_are_taken_over_once() {
    use std::time::Duration;
    let db = TestDatabase::create().await;
    let (a, b, c) = (
        replica(&db, "a").await,
        replica(&db, "b").await,
        replica(&db, "c").await,
    );
    // Long enough that a's renewal just before b looks is still valid when b looks, on a
    // machine busy with other builds (300 ms was not).
    let lease = Duration::from_millis(1500);
    assert!(a.take_over("a", lease, 10).await.unwrap().is_empty());
    for id in ["run", "done"] {
        let mut new = NewTask {
            push: None,
            upstream_key: None,
            owner: "o".into(),
            agent: "up".into(),
            task: Task {
                id: id.into(),
                context_id: "c".into(),
                status: Some(TaskStatus {
                    state: TaskState::Submitted as i32,
                    message: None,
                    timestamp: Some(Timestamp::now()),
                }),
                ..Default::default()
            },
        };
        new.task.history.push(message("m", Role::User));
        a.create(new).await.unwrap();
        a.append(id, 1, working(id)).await.unwrap();
    }
    let done = a2a_store::suite::status("done", TaskState::Completed, Timestamp::now().as_millis());
    a.append("done", 2, done).await.unwrap();

    // a is alive (it renews its lease, as its dispatcher does): nothing to take.
    assert!(a.take_over("a", lease, 10).await.unwrap().is_empty());
    assert!(b.take_over("b", lease, 10).await.unwrap().is_empty());
    tokio::time::sleep(lease + Duration::from_millis(100)).await;
    // a's lease expired: b and c race; exactly one gets the running task.
    let (got_b, got_c) = tokio::join!(b.take_over("b", lease, 10), c.take_over("c", lease, 10));
    let mut got: Vec<Orphan> = got_b.unwrap();
    got.extend(got_c.unwrap());
    assert_eq!(
        got,
        vec![Orphan {
            owner: "o".into(),
            task_id: "run".into(),
            epoch: 1,
        }]
    );
    assert!(b.take_over("b", lease, 10).await.unwrap().is_empty());
    assert!(c.take_over("c", lease, 10).await.unwrap().is_empty());

    // Fencing (review M4): a's runner still holds epoch 0. Its late commit and its "sending"
    // mark are refused, whatever its sequence number; the survivor's epoch (1) commits.
    let rec = b.get("o", "run", None).await.unwrap().unwrap();
    assert_eq!(rec.dispatch.epoch, 1);
    let late = a2a_store::suite::status("run", TaskState::Completed, Timestamp::now().as_millis());
    assert_eq!(
        a.append_fenced("run", rec.seq, Some(0), vec![late.clone()])
            .await
            .unwrap_err(),
        StoreError::Fenced("run".into())
    );
    assert_eq!(
        a.mark_dispatch("run", DispatchMark::Sending { turn: 1, epoch: 0 })
            .await
            .unwrap_err(),
        StoreError::Fenced("run".into())
    );
    let after = b.get("o", "run", None).await.unwrap().unwrap();
    assert_eq!(after.seq, rec.seq, "the stale commit wrote nothing");
    b.mark_dispatch("run", DispatchMark::Sending { turn: 1, epoch: 1 })
        .await
        .unwrap();
    b.append_fenced("run", rec.seq, Some(1), vec![late])
        .await
        .unwrap();
}

/// An idempotency key claimed by a replica that died is reported abandoned once its lease has
/// expired (never while it lives), and a retry can claim it anew.
#[tokio::test]
async fn keys_of_a_dead_replica_are_abandoned() {
    use std::time::Duration;
    let db = TestDatabase::create().await;
    let (a, b) = (replica(&db, "a").await, replica(&db, "b").await);
    // Long enough for lazily opened connections on a busy machine.
    let lease = Duration::from_millis(1_500);
    a.take_over("a", lease, 0).await.unwrap();
    let key = |task_id: &str| KeyRequest {
        owner: "o".into(),
        key: "k".into(),
        fingerprint: "fp".into(),
        task_id: task_id.into(),
        after_seq: 0,
        ttl: Duration::from_secs(60),
    };
    assert_eq!(a.claim_key(&key("t1")).await.unwrap(), KeyClaim::Claimed);
    let held = |claim| match claim {
        KeyClaim::Held(h) => h,
        other => panic!("held: {other:?}"),
    };
    let alive = held(b.claim_key(&key("t2")).await.unwrap());
    assert_eq!((alive.task_id.as_str(), alive.abandoned), ("t1", false));
    tokio::time::sleep(Duration::from_millis(1_600)).await;
    let dead = held(b.claim_key(&key("t2")).await.unwrap());
    assert_eq!((dead.task_id.as_str(), dead.abandoned), ("t1", true));
    assert!(b.reclaim_key(&key("t2"), "t1").await.unwrap());
    b.take_over("b", lease, 0).await.unwrap();
    let now = held(a.claim_key(&key("t3")).await.unwrap());
    assert_eq!(
        (now.task_id.as_str(), now.abandoned),
        ("t2", false),
        "b holds it now"
    );
}

async fn delivery_store(db: &TestDatabase) -> a2a_store::pg::PgDeliveryStore {
    let store = a2a_store::pg::PgDeliveryStore::connect_lazy(
        db.url(),
        2,
        std::time::Duration::from_secs(3),
    )
    .unwrap();
    store.migrate().await.unwrap();
    store
}

const DAY: f64 = 24.0 * 3600.0;

/// Pruning deletes exactly the log rows older than the retention, a window at a time (25 old
/// rows with windows of 4: the last window holds old and young rows), and nothing with a zero
/// retention; dead letters are kept whatever their age.
#[tokio::test]
async fn the_delivery_log_is_pruned_by_age() {
    use a2a_store::pg::NewDeadLetter;
    use std::time::Duration;
    let db = TestDatabase::create().await;
    let store = delivery_store(&db).await;
    let week = Duration::from_secs(7 * 24 * 3600);
    // Oldest first: hourly from 9 days to 8 days ago; then a minute inside the week, an hour
    // ago, now.
    let old: Vec<f64> = (0..25)
        .map(|i| 8.0 * DAY + f64::from(24 - i) * 3600.0)
        .collect();
    a2a_testing::insert_delivery_log_rows(store.pool(), "old", &old).await;
    a2a_testing::insert_delivery_log_rows(store.pool(), "young", &[7.0 * DAY - 60.0, 3600.0, 0.0])
        .await;
    let letter = NewDeadLetter {
        task_id: "old".into(),
        seq: 1,
        config: TaskPushNotificationConfig::default(),
        event: StreamResponse::default(),
        dialect: a2a_types::Dialect::V03,
        attempts: 8,
        last_error: "HTTP 500".into(),
    };
    let letter_id = store.add_dead_letter(&letter, 0).await.unwrap();
    sqlx::query("UPDATE push_dead_letters SET created_at = now() - interval '90 days'")
        .execute(store.pool())
        .await
        .unwrap();

    assert_eq!(store.prune_log(Duration::ZERO, 4).await.unwrap(), 0);
    assert_eq!(store.logged_attempts("old").await.unwrap().len(), 25);

    assert_eq!(store.prune_log(week, 4).await.unwrap(), 25);
    assert!(store.logged_attempts("old").await.unwrap().is_empty());
    let young: Vec<u64> = store
        .logged_attempts("young")
        .await
        .unwrap()
        .iter()
        .map(|a| a.seq)
        .collect();
    assert_eq!(young, [1, 2, 3]);
    assert_eq!(store.prune_log(week, 4).await.unwrap(), 0, "nothing left");
    let letters = store.dead_letters(true, 10).await.unwrap();
    assert_eq!(letters.len(), 1);
    assert_eq!(letters[0].id, letter_id);
    assert_eq!(
        letters[0].dialect,
        a2a_types::Dialect::V03,
        "the dialect is kept"
    );
}

/// Workers pruning at once delete every old row exactly once between them, without errors.
#[tokio::test]
async fn concurrent_pruning_deletes_each_row_once() {
    use std::time::Duration;
    let db = TestDatabase::create().await;
    let (a, b) = (delivery_store(&db).await, delivery_store(&db).await);
    let old: Vec<f64> = (0..2000).map(|i| 20.0 * DAY - f64::from(i)).collect();
    a2a_testing::insert_delivery_log_rows(a.pool(), "old", &old).await;
    a2a_testing::insert_delivery_log_rows(a.pool(), "young", &[60.0]).await;
    let day = Duration::from_secs(24 * 3600);
    let (got_a, got_b) = tokio::join!(a.prune_log(day, 7), b.prune_log(day, 7));
    assert_eq!(got_a.unwrap() + got_b.unwrap(), 2000);
    assert!(a.logged_attempts("old").await.unwrap().is_empty());
    assert_eq!(a.logged_attempts("young").await.unwrap().len(), 1);
}

/// Leases are renewed in one statement for many tasks: only those the worker still holds are
/// extended, and the others are returned (lost, or never held).
#[tokio::test]
async fn leases_are_renewed_together_and_lost_ones_named() {
    use std::time::Duration;
    let db = TestDatabase::create().await;
    let store = delivery_store(&db).await;
    let pool = store.pool();
    for (id, owner) in [
        ("mine-1", Some("w")),
        ("mine-2", Some("w")),
        ("theirs", Some("x")),
        ("free", None),
    ] {
        sqlx::query(
            "INSERT INTO push_progress (task_id, delivered_seq, lease_owner, lease_until) \
             VALUES ($1, 0, $2, CASE WHEN $2 IS NULL THEN '-infinity'::timestamptz \
                                     ELSE now() + interval '1 second' END)",
        )
        .bind(id)
        .bind(owner)
        .execute(pool)
        .await
        .unwrap();
    }
    let ids: Vec<String> = ["mine-1", "theirs", "mine-2", "free", "unknown"]
        .map(String::from)
        .to_vec();
    let lost = store
        .renew(&ids, "w", Duration::from_secs(600))
        .await
        .unwrap();
    assert_eq!(lost, ["theirs", "free", "unknown"]);
    let extended: Vec<String> = sqlx::query_scalar(
        "SELECT task_id FROM push_progress WHERE lease_until > now() + interval '5 minutes' \
         ORDER BY task_id",
    )
    .fetch_all(pool)
    .await
    .unwrap();
    assert_eq!(extended, ["mine-1", "mine-2"]);
    assert!(
        store
            .renew(&[], "w", Duration::from_secs(1))
            .await
            .unwrap()
            .is_empty()
    );
}

/// A holder frees its lease only once it delivered to the end of the task's log
/// (`Release::IfDone`): another worker that found the lease held left it the entries of the
/// events past its progress. A commit in flight is waited for (the task row is read
/// `FOR SHARE`), so an event whose entry the other worker may already have handled is never
/// missed; `Release::Anyway` frees it whatever is left, and a worker that lost the lease is
/// told so.
#[tokio::test]
async fn a_holder_keeps_its_lease_while_the_log_goes_on() {
    use a2a_store::pg::{Advanced, Release};
    use std::time::Duration;
    let db = TestDatabase::create().await;
    let (a, b) = (delivery_store(&db).await, delivery_store(&db).await);
    let pool = a.pool();
    sqlx::query(
        "INSERT INTO tasks (id, owner, agent, context_id, state, status_ms, seq, \
         history_len, artifacts_len, snapshot) VALUES ('t', 'o', 'a', 'c', 2, 0, 2, 0, 0, '')",
    )
    .execute(pool)
    .await
    .unwrap();
    let lease_to_a = "INSERT INTO push_progress (task_id, delivered_seq, lease_owner, lease_until) \
         VALUES ('t', 0, 'a', now() + interval '1 hour') ON CONFLICT (task_id) DO UPDATE \
         SET lease_owner = 'a', lease_until = now() + interval '1 hour'";
    sqlx::query(lease_to_a).execute(pool).await.unwrap();
    let progress = || async {
        sqlx::query_as::<_, (i64, Option<String>)>(
            "SELECT delivered_seq, lease_owner FROM push_progress WHERE task_id = 't'",
        )
        .fetch_one(pool)
        .await
        .unwrap()
    };

    assert_eq!(
        a.advance("t", "a", 1, Release::IfDone).await,
        Ok(Advanced::Behind(2))
    );
    assert_eq!(
        progress().await,
        (1, Some("a".into())),
        "recorded, lease kept"
    );
    assert_eq!(
        b.advance("t", "b", 2, Release::IfDone).await,
        Ok(Advanced::Lost)
    );

    // An append in flight: keeping the lease does not wait for it; releasing does, and then
    // reads the appended event.
    let mut append = pool.begin().await.unwrap();
    sqlx::query("UPDATE tasks SET seq = 3 WHERE id = 't'")
        .execute(&mut *append)
        .await
        .unwrap();
    assert_eq!(
        a.advance("t", "a", 2, Release::Keep).await,
        Ok(Advanced::Recorded)
    );
    let release = tokio::spawn({
        let a = a.clone();
        async move { a.advance("t", "a", 2, Release::IfDone).await }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !release.is_finished(),
        "the release waits for the commit in flight"
    );
    append.commit().await.unwrap();
    assert_eq!(release.await.unwrap(), Ok(Advanced::Behind(3)));
    assert_eq!(progress().await, (2, Some("a".into())));

    assert_eq!(
        a.advance("t", "a", 3, Release::IfDone).await,
        Ok(Advanced::Recorded)
    );
    assert_eq!(progress().await, (3, None), "delivered to the end: freed");
    assert_eq!(
        a.advance("t", "a", 3, Release::IfDone).await,
        Ok(Advanced::Lost)
    );

    sqlx::query(lease_to_a).execute(pool).await.unwrap();
    sqlx::query("UPDATE tasks SET seq = 5 WHERE id = 't'")
        .execute(pool)
        .await
        .unwrap();
    assert_eq!(
        a.advance("t", "a", 4, Release::Anyway).await,
        Ok(Advanced::Recorded)
    );
    assert_eq!(
        progress().await,
        (4, None),
        "freed, the rest left to the sweep"
    );
}

/// The reconciliation sweep (migration 0012): finds the tasks whose delivery is behind their
/// log and whose lease is free, settles the terminal ones delivered to their end (never looked
/// at again), forgets the progress of tasks that are gone, looks at a row once per interval,
/// and two workers sweeping at once get each row once.
#[tokio::test]
async fn the_sweep_finds_tasks_behind_their_log_once() {
    use std::time::Duration;
    let db = TestDatabase::create().await;
    let store = delivery_store(&db).await;
    let pool = store.pool();
    // (id, state, seq, delivered, lease held)
    let rows = [
        ("done", 3, 5, 5, false),
        ("behind", 2, 5, 2, false),
        ("behind-done", 3, 4, 1, false),
        ("leased", 2, 5, 2, true),
    ];
    for (id, state, seq, delivered, leased) in rows {
        sqlx::query(
            "INSERT INTO tasks (id, owner, agent, context_id, state, status_ms, seq, \
             history_len, artifacts_len, snapshot) VALUES ($1, 'o', 'a', 'c', $2, 0, $3, 0, 0, '')",
        )
        .bind(id)
        .bind(state as i16)
        .bind(seq as i64)
        .execute(pool)
        .await
        .unwrap();
        sqlx::query(
            "INSERT INTO push_progress (task_id, delivered_seq, lease_owner, lease_until) \
             VALUES ($1, $2, CASE WHEN $3 THEN 'w' END, \
                     CASE WHEN $3 THEN now() + interval '1 hour' ELSE '-infinity' END)",
        )
        .bind(id)
        .bind(delivered as i64)
        .bind(leased)
        .execute(pool)
        .await
        .unwrap();
    }
    sqlx::query("INSERT INTO push_progress (task_id, delivered_seq, lease_until) VALUES ('gone', 1, '-infinity')")
        .execute(pool)
        .await
        .unwrap();
    let minute = Duration::from_secs(60);
    let (a, b) = tokio::join!(store.sweep(2, minute), store.sweep(2, minute));
    let (mut found, mut gone) = (Vec::new(), 0);
    for (behind, g) in [a.unwrap(), b.unwrap()] {
        found.extend(behind.into_iter().map(|b| (b.task_id, b.seq)));
        gone += g;
    }
    let (rest, g) = store.sweep(10, minute).await.unwrap();
    found.extend(rest.into_iter().map(|b| (b.task_id, b.seq)));
    gone += g;
    found.sort();
    assert_eq!(
        found,
        [("behind".to_owned(), 5), ("behind-done".to_owned(), 4)],
        "each behind task once; not the leased one"
    );
    assert_eq!(gone, 1, "the progress of a task that is gone is forgotten");
    assert!(
        store.sweep(10, minute).await.unwrap().0.is_empty(),
        "looked at once per interval"
    );
    let settled: Vec<(String,)> =
        sqlx::query_as("SELECT task_id FROM push_progress WHERE settled ORDER BY task_id")
            .fetch_all(pool)
            .await
            .unwrap();
    assert_eq!(settled, [("done".to_owned(),)]);
    // With no interval, the unsettled rows come back (the leased one still not).
    let (again, _) = store.sweep(10, Duration::ZERO).await.unwrap();
    let mut again: Vec<String> = again.into_iter().map(|b| b.task_id).collect();
    again.sort();
    assert_eq!(again, ["behind", "behind-done"]);
}

/// A config stored with its task starts its delivery progress before the task as created
/// (sequence 0), even when the create stored later events with it; a config added to an
/// existing task starts at the event before its current one.
#[tokio::test]
async fn an_inline_push_config_is_delivered_from_the_start() {
    use a2a_store::suite::{new_task_with_push, status};
    let store = TestStore::new().await;
    let new = new_task_with_push("alice", "inline", "hook", PushQuota::NONE);
    let changes = vec![
        status("inline", TaskState::Working, 2),
        status("inline", TaskState::Completed, 3),
    ];
    store.create_with(new, changes).await.unwrap();
    store.create(new_task("later")).await.unwrap();
    store
        .append("later", 1, status("later", TaskState::Working, 2))
        .await
        .unwrap();
    let cfg = TaskPushNotificationConfig {
        task_id: "later".into(),
        id: "hook".into(),
        url: "https://example.com/hook".into(),
        ..Default::default()
    };
    store
        .put_push_config("alice", cfg, a2a_types::Dialect::V1, PushQuota::NONE)
        .await
        .unwrap();
    let progress: Vec<(String, i64)> =
        sqlx::query_as("SELECT task_id, delivered_seq FROM push_progress ORDER BY task_id")
            .fetch_all(store.store.pool())
            .await
            .unwrap();
    assert_eq!(
        progress,
        [("inline".to_owned(), 0), ("later".to_owned(), 1)]
    );
}
