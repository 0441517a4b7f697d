//! `kill -9` of the replica dispatching a task: two real gateway binaries on one PostgreSQL and
//! one Redis, fronting one upstream. The surviving replica takes the task over within about one
//! dispatch lease (it re-attaches to the upstream task), the task finishes, and a client that
//! resumes its stream on the survivor with `Last-Event-ID` sees the stream complete. A built-in
//! agent's task on the dead replica cannot be resumed: it ends FAILED instead of staying WORKING.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::upstream;
use crate::harness::{SseStream, script_message};
use crate::postgres::process::GatewayProcess;

const CHUNKS: u64 = 30;

fn replica(
    db: &a2a_testing::TestDatabase,
    redis: &a2a_testing::TestRedis,
    config: &str,
) -> GatewayProcess {
    GatewayProcess::start_with(
        db.url(),
        &[
            ("A2A_CONFIG", config),
            ("A2A_REDIS_URL", redis.url()),
            ("A2A_REDIS_PREFIX", redis.prefix()),
        ],
    )
}

async fn resume(gw: &GatewayProcess, id: &str, after: &str) -> SseStream {
    let body =
        json!({"jsonrpc": "2.0", "id": "r", "method": "SubscribeToTask", "params": {"id": id}});
    let resp = reqwest::Client::new()
        .post(format!("http://{}/a2a/jsonrpc", gw.addr))
        .header("content-type", "application/json")
        .header("a2a-version", "1.0")
        .header("last-event-id", after)
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    SseStream::new(resp)
}

async fn until(gw: &GatewayProcess, id: &str, what: &str, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let task = gw.ok("GetTask", json!({"id": id})).await;
        if done(&task) {
            return task;
        }
        assert!(Instant::now() < deadline, "{what}: {task}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

// Several workers: starting a replica blocks this thread (it waits for readiness), while the
// in-process upstream must keep answering the replica's card fetch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_surviving_replica_takes_over_a_dead_replicas_task() {
    let up = upstream("").await;
    let db = a2a_testing::TestDatabase::create().await;
    let redis = a2a_testing::TestRedis::create().await;
    GatewayProcess::migrate(db.url());
    let dir = std::env::temp_dir().join(format!("a2a-takeover-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("gateway.toml");
    std::fs::write(
        &config,
        format!(
            "[dispatch]\nlease_ms = 1500\n\n{}",
            super::agent("up", &up.url(""), "")
        ),
    )
    .unwrap();
    let config = config.to_str().unwrap();
    let a = replica(&db, &redis, config);
    let b = replica(&db, &redis, config);

    // An upstream task streaming through A, and a built-in task hanging on A.
    let params = json!({"tenant": "up",
        "message": script_message(json!({"chunks": CHUNKS, "delayMs": 100}))});
    let mut stream = a.stream("SendStreamingMessage", params).await;
    let first = stream.next().await.unwrap();
    let id = first.data["result"]["task"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut last_id = first.id.clone().unwrap();
    for _ in 0..4 {
        last_id = stream.next().await.unwrap().id.unwrap();
    }
    let builtin = a
        .ok(
            "SendMessage",
            json!({"tenant": "scenario", "message": script_message(json!({"end": "hang"})),
                   "configuration": {"returnImmediately": true}}),
        )
        .await["task"]["id"]
        .as_str()
        .unwrap()
        .to_owned();

    let killed = Instant::now();
    a.kill9();
    drop(stream);

    // The client resumes on B where it stopped; B takes the task over and the stream ends
    // with COMPLETED.
    let events = resume(&b, &id, &last_id).await.collect().await;
    let taken_over_in = killed.elapsed();
    let last = events.last().expect("events after the resume point");
    assert_eq!(
        last.data["result"]["statusUpdate"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{events:?}"
    );
    let seqs: Vec<u64> = events
        .iter()
        .map(|e| e.id.as_ref().unwrap().parse().unwrap())
        .collect();
    let after: u64 = last_id.parse().unwrap();
    assert_eq!(seqs[0], after + 1, "no gap at the resume point: {seqs:?}");
    assert!(
        seqs.windows(2).all(|w| w[1] == w[0] + 1),
        "in order: {seqs:?}"
    );

    let task = b.ok("GetTask", json!({"id": id})).await;
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED");
    let parts = task["artifacts"][0]["parts"].as_array().unwrap().len() as u64;
    assert_eq!(parts, CHUNKS, "every chunk, none twice: {task}");
    assert!(
        taken_over_in < Duration::from_secs(CHUNKS / 10 + 10),
        "bounded takeover: {taken_over_in:?}"
    );
    assert_eq!(
        up.ok("ListTasks", json!({})).await["totalSize"],
        1,
        "re-attached to the same upstream task, not a new one"
    );

    let failed = until(&b, &builtin, "the built-in task never left WORKING", |t| {
        t["status"]["state"] == "TASK_STATE_FAILED"
    })
    .await;
    assert!(failed.to_string().contains("stopped"), "{failed}");
    b.stop();
    let _ = std::fs::remove_dir_all(&dir);
}
