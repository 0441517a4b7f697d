//! `kill -9` of the real binary in the middle of 50 streaming tasks: no half-written task. For
//! every task the snapshot, its history and artifact rows and the event log agree, and replaying
//! the event log with `apply_event` gives the stored snapshot.

use std::time::Duration;

use a2a_store::{PgOptions, PgTaskStore, TaskStore};
use a2a_types::state::apply_event;
use a2a_types::v1::stream_response::Payload;
use serde_json::json;
use sqlx::Row;

use super::process::GatewayProcess;
use crate::harness::script_message;

const TASKS: usize = 50;

#[tokio::test]
async fn kill_9_mid_stream_leaves_every_task_consistent() {
    let db = a2a_testing::TestDatabase::create().await;
    GatewayProcess::migrate(db.url());
    let gw = GatewayProcess::start(db.url());

    // 50 streams, each 40 chunks 20 ms apart (~0.8 s): all in flight when the process dies.
    let mut streams = Vec::new();
    for _ in 0..TASKS {
        let script = json!({"chunks": 40, "delayMs": 20});
        let params = json!({"tenant": "scenario", "message": script_message(script)});
        streams.push(gw.stream("SendStreamingMessage", params).await);
    }
    let mut ids = Vec::new();
    for stream in &mut streams {
        let first = stream.next().await.expect("the Task event");
        ids.push(
            first.data["result"]["task"]["id"]
                .as_str()
                .unwrap()
                .to_owned(),
        );
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    gw.kill9();
    drop(streams);

    let store = PgTaskStore::connect_lazy(db.url(), &PgOptions::default()).unwrap();
    let (mut finished, mut partial) = (0, 0);
    for id in &ids {
        let rec = store
            .get("anonymous", id, None)
            .await
            .unwrap()
            .expect("every announced task is stored");
        let events = store.events_after("anonymous", id, 0).await.unwrap();
        let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
        assert_eq!(
            seqs,
            (1..=rec.seq).collect::<Vec<_>>(),
            "task {id}: the log holds every event up to the snapshot's sequence, no more"
        );
        let Some(Payload::Task(mut replayed)) = events[0].event.payload.clone() else {
            panic!("task {id}: event 1 is the task as created");
        };
        for e in &events[1..] {
            apply_event(&mut replayed, &e.event);
        }
        assert_eq!(replayed.status, rec.task.status, "task {id}: status");
        assert_eq!(
            replayed.artifacts, rec.task.artifacts,
            "task {id}: artifacts"
        );
        assert_eq!(replayed.history, rec.task.history, "task {id}: history");

        let row = sqlx::query(
            "SELECT t.seq, t.history_len, t.artifacts_len, \
                    (SELECT count(*) FROM task_history h WHERE h.task_id = t.id) AS h, \
                    (SELECT count(*) FROM task_artifacts a WHERE a.task_id = t.id) AS a, \
                    (SELECT max(seq) FROM task_events e WHERE e.task_id = t.id) AS e \
               FROM tasks t WHERE t.id = $1",
        )
        .bind(id)
        .fetch_one(store.pool())
        .await
        .unwrap();
        let n = |c: &str| row.try_get::<i64, _>(c).unwrap();
        let len = |c: &str| i64::from(row.try_get::<i32, _>(c).unwrap());
        assert_eq!(n("seq"), n("e"), "task {id}: last sequence = last event");
        assert_eq!(len("history_len"), n("h"), "task {id}: history rows");
        assert_eq!(len("artifacts_len"), n("a"), "task {id}: artifact rows");

        match rec.task.artifacts.first().map(|a| a.parts.len()) {
            Some(40) => finished += 1,
            _ => partial += 1,
        }
    }
    assert!(
        partial > 0,
        "the kill must land mid-stream ({finished} tasks had finished)"
    );
}
