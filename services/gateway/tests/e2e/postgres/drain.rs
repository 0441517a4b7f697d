//! SIGTERM while SendMessage turns run on PostgreSQL: the real binary stops accepting
//! connections, answers the requests in flight, lets the running turns finish (at most
//! `limits.drain_timeout_secs`) and only then exits, with status 0. No task a client was told
//! about is lost or FAILED because of the shutdown; a turn that outlasts the bound is left
//! running in the database, for the replica that takes it over.

use std::time::{Duration, Instant};

use a2a_store::{PgOptions, PgTaskStore, TaskStore};
use a2a_types::state::state_of;
use a2a_types::v1::TaskState;
use serde_json::json;

use super::process::GatewayProcess;
use crate::harness::script_message;

/// Blocking sends in flight when SIGTERM arrives.
const TURNS: usize = 40;
/// Each turn streams this many chunks 100 ms apart (~1.5 s): far from done at SIGTERM.
const CHUNKS: usize = 15;
/// The drain bound of the gateway under test.
const DRAIN: Duration = Duration::from_secs(6);

// Several workers: waiting for the process to exit blocks the test thread.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_lets_running_turns_finish_before_exiting() {
    let db = a2a_testing::TestDatabase::create().await;
    GatewayProcess::migrate(db.url());
    let dir = std::env::temp_dir().join(format!("a2a-drain-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("gateway.toml");
    std::fs::write(
        &config,
        format!("[limits]\ndrain_timeout_secs = {}\n", DRAIN.as_secs()),
    )
    .unwrap();
    let mut gw = GatewayProcess::start_with(db.url(), &[("A2A_CONFIG", config.to_str().unwrap())]);
    let store = PgTaskStore::connect_lazy(db.url(), &PgOptions::default()).unwrap();

    // A turn that never ends by itself: it holds the drain until the bound.
    let hang = json!({"tenant": "scenario", "message": script_message(json!({"end": "hang"})),
                      "configuration": {"returnImmediately": true}});
    let hang = gw.ok("SendMessage", hang).await["task"]["id"]
        .as_str()
        .unwrap()
        .to_owned();

    let sends = futures::future::join_all((0..TURNS).map(|_| {
        let script = json!({"chunks": CHUNKS, "delayMs": 100});
        gw.rpc(
            "SendMessage",
            json!({"tenant": "scenario", "message": script_message(script)}),
        )
    }));
    // SIGTERM once every turn has created its task, long before any can finish.
    let signal = async {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let tasks: i64 = sqlx::query_scalar("SELECT count(*) FROM tasks")
                .fetch_one(store.pool())
                .await
                .unwrap();
            if tasks == i64::try_from(TURNS + 1).unwrap() {
                break;
            }
            assert!(Instant::now() < deadline, "{tasks} tasks were created");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        gw.terminate();
        Instant::now()
    };
    let (answers, signaled) = tokio::join!(sends, signal);

    // Every request in flight was answered with its task.
    let ids: Vec<String> = answers
        .iter()
        .map(|a| {
            a["result"]["task"]["id"]
                .as_str()
                .unwrap_or_else(|| panic!("an in-flight send is answered with its task: {a}"))
                .to_owned()
        })
        .collect();
    // While it drains, the gateway takes no new connection.
    assert!(
        tokio::net::TcpStream::connect(&gw.addr).await.is_err(),
        "a draining gateway refuses new connections"
    );

    let status = gw
        .wait_exit(DRAIN + Duration::from_secs(5))
        .expect("the gateway exits within the drain bound");
    assert!(status.success(), "exit status {status}");
    let took = signaled.elapsed();
    assert!(
        took < DRAIN + Duration::from_secs(3),
        "exited {took:?} after SIGTERM"
    );

    // Every turn ran to its end, all of its chunks stored.
    for id in &ids {
        let rec = store
            .get("anonymous", id, None)
            .await
            .unwrap()
            .expect("every acknowledged task is stored");
        assert_eq!(
            state_of(&rec.task),
            TaskState::Completed,
            "task {id}: {:?}",
            rec.task.status
        );
        let parts = rec.task.artifacts.first().map_or(0, |a| a.parts.len());
        assert_eq!(parts, CHUNKS, "task {id}: every chunk stored");
    }
    // The turn that outlasted the drain is still running in the database (not FAILED): the
    // replica that takes it over decides its end.
    let rec = store.get("anonymous", &hang, None).await.unwrap().unwrap();
    assert_eq!(
        state_of(&rec.task),
        TaskState::Working,
        "{:?}",
        rec.task.status
    );
    let _ = std::fs::remove_dir_all(&dir);
}
