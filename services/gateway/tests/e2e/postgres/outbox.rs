//! The transactional outbox (issue 27 item 1, review M5) with the real binary: a commit made
//! while Redis is down reaches the worker's stream once Redis is back, and a commit whose
//! replica is killed (`kill -9`) between its commit and its publish is relayed by another
//! replica. Before the outbox, the first survived only in the replica's memory and the second
//! was lost: an echo task's whole turn is one commit, so nothing later would announce it.

use std::time::{Duration, Instant};

use serde_json::json;
use sqlx::Row;

use super::process::GatewayProcess;
use crate::harness::user_message;

/// The outbox rows of the database: (task id, last sequence number of the commit).
async fn outbox_rows(pool: &sqlx::PgPool) -> Vec<(String, i64)> {
    sqlx::query("SELECT task_id, seq FROM event_outbox ORDER BY task_id, seq")
        .fetch_all(pool)
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get("task_id"), r.get("seq")))
        .collect()
}

/// The sequence numbers the worker's stream (the task's partition of `{prefix}events`, the
/// gateway's default partition count) holds for `task_id`.
async fn stream_seqs(redis_url: &str, prefix: &str, task_id: &str) -> Option<Vec<u64>> {
    let client = redis::Client::open(redis_url).ok()?;
    let mut conn = client.get_multiplexed_async_connection().await.ok()?;
    let reply: redis::streams::StreamRangeReply = redis::cmd("XRANGE")
        .arg(a2a_bus::events_key(
            prefix,
            a2a_bus::keys::partition_of(task_id, a2a_bus::keys::DEFAULT_PARTITIONS),
        ))
        .arg("-")
        .arg("+")
        .query_async(&mut conn)
        .await
        .ok()?;
    Some(
        reply
            .ids
            .iter()
            .filter(|e| e.get::<String>("t").as_deref() == Some(task_id))
            .filter_map(|e| e.get::<u64>("s"))
            .collect(),
    )
}

/// SendMessage's params: `text` to echo, with a push config (only tasks with one reach the
/// worker's stream, see `BusEvent::push`; no worker runs here, so its URL is never called).
fn pushed(text: &str) -> serde_json::Value {
    json!({"message": user_message(text),
           "configuration": {"taskPushNotificationConfig": {"url": "https://hooks.example.com/outbox"}}})
}

/// The task's last sequence number.
async fn last_seq(pool: &sqlx::PgPool, task_id: &str) -> i64 {
    sqlx::query("SELECT seq FROM tasks WHERE id = $1")
        .bind(task_id)
        .fetch_one(pool)
        .await
        .unwrap()
        .get("seq")
}

/// Waits (at most `patience`) until the worker's stream holds every event of `task_id` and the
/// outbox is empty.
async fn relayed(
    pool: &sqlx::PgPool,
    redis_url: &str,
    prefix: &str,
    task_id: &str,
    patience: Duration,
) {
    let last = last_seq(pool, task_id).await as u64;
    let deadline = Instant::now() + patience;
    loop {
        let seqs = stream_seqs(redis_url, prefix, task_id).await;
        let rows = outbox_rows(pool).await;
        let mut got = seqs.clone().unwrap_or_default();
        got.sort_unstable();
        got.dedup();
        if got == (1..=last).collect::<Vec<_>>() && rows.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "not relayed in {patience:?}: the stream holds {seqs:?} of {task_id} (1..={last} \
             expected), the outbox {rows:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Redis is killed (by PID), an echo task runs to its end while it is down (its publish fails),
/// and Redis comes back empty: the replica's outbox relay publishes the commit, so the worker's
/// stream gets every event, and the row is deleted.
#[tokio::test]
async fn a_commit_while_redis_is_down_is_published_once_redis_is_back() {
    let server = a2a_testing::RedisServer::start().expect("a private redis-server");
    let url = server.url();
    let db = a2a_testing::TestDatabase::create().await;
    GatewayProcess::migrate(db.url());
    let pool = sqlx::PgPool::connect(db.url()).await.unwrap();
    let prefix = "outbox:";
    let gw = GatewayProcess::start_with(
        db.url(),
        &[
            ("A2A_REDIS_URL", url.as_str()),
            ("A2A_REDIS_PREFIX", prefix),
            ("A2A_OUTBOX_RELAY_AFTER_MS", "500"),
        ],
    );
    // A first task, published as usual: its row goes at once.
    let before = gw.ok("SendMessage", pushed("before")).await;
    let before_id = before["task"]["id"].as_str().unwrap().to_owned();
    relayed(&pool, &url, prefix, &before_id, Duration::from_secs(10)).await;

    server.stop().unwrap();
    let during = gw.ok("SendMessage", pushed("during")).await;
    assert_eq!(during["task"]["status"]["state"], "TASK_STATE_COMPLETED");
    let id = during["task"]["id"].as_str().unwrap().to_owned();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(
        outbox_rows(&pool).await,
        vec![(id.clone(), last_seq(&pool, &id).await)],
        "the commit is in the outbox while Redis is down"
    );

    server.start_again().unwrap();
    relayed(&pool, &url, prefix, &id, Duration::from_secs(20)).await;
}

/// A replica whose publish is held after its commit (the `failpoints` build: while a file
/// exists) is killed with SIGKILL in that window; the other replica finds the commit in the
/// outbox, left behind, and publishes it. The killed replica never relays rows left behind
/// here (its threshold is an hour), so the events in the stream are the survivor's doing.
#[tokio::test]
async fn a_replica_killed_between_commit_and_publish_is_relayed_by_another() {
    let redis = a2a_testing::TestRedis::create().await;
    let db = a2a_testing::TestDatabase::create().await;
    GatewayProcess::migrate(db.url());
    let pool = sqlx::PgPool::connect(db.url()).await.unwrap();
    let dir = tempfile_dir();
    let stall = dir.join("relay-stall");
    std::fs::write(&stall, b"").unwrap();
    let stall_path = stall.to_str().unwrap();
    let doomed = GatewayProcess::start_with(
        db.url(),
        &[
            ("A2A_REDIS_URL", redis.url()),
            ("A2A_REDIS_PREFIX", redis.prefix()),
            ("A2A_OUTBOX_RELAY_AFTER_MS", "3600000"),
            ("A2A_FAILPOINT_RELAY_STALL", stall_path),
        ],
    );
    let survivor = GatewayProcess::start_with(
        db.url(),
        &[
            ("A2A_REDIS_URL", redis.url()),
            ("A2A_REDIS_PREFIX", redis.prefix()),
            ("A2A_OUTBOX_RELAY_AFTER_MS", "1000"),
        ],
    );
    // The send hangs in the held publish: it is left running.
    let addr = doomed.addr.clone();
    let send = tokio::spawn(async move {
        let client = reqwest::Client::new();
        a2a_testing::jsonrpc(
            &client,
            &format!("http://{addr}"),
            "SendMessage",
            pushed("kill me"),
        )
        .await
    });
    // Committed: the task is stored COMPLETED and its outbox row waits.
    let deadline = Instant::now() + Duration::from_secs(20);
    let id = loop {
        let rows = outbox_rows(&pool).await;
        if let Some((id, _)) = rows.first() {
            let state: Option<i16> = sqlx::query("SELECT state FROM tasks WHERE id = $1")
                .bind(id)
                .fetch_optional(&pool)
                .await
                .unwrap()
                .map(|r| r.get("state"));
            if state == Some(3) {
                break id.clone();
            }
        }
        assert!(Instant::now() < deadline, "the commit never happened");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(
        stream_seqs(redis.url(), redis.prefix(), &id).await,
        Some(vec![]),
        "nothing published yet"
    );
    doomed.kill9();
    let _ = send.await;
    relayed(
        &pool,
        redis.url(),
        redis.prefix(),
        &id,
        Duration::from_secs(20),
    )
    .await;
    drop(survivor);
    let _ = std::fs::remove_dir_all(&dir);
}

fn tempfile_dir() -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("a2a-outbox-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
