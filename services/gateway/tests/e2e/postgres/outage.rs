//! PostgreSQL stops under a running gateway and comes back: requests fail fast with the
//! "unavailable" mapping (JSON-RPC -32603, `/readyz` 503) while it is down and succeed again
//! afterwards, without restarting the gateway. The server is a private one, stopped by its PID.

use std::sync::Arc;
use std::time::{Duration, Instant};

use a2a_testing::{PgServer, TestDatabase};
use serde_json::json;

use crate::harness::{TestGateway, user_message};

const INTERNAL_ERROR: i64 = -32603;

#[tokio::test]
async fn requests_fail_fast_while_postgres_is_down_and_recover_without_restart() {
    let server = Arc::new(
        tokio::task::spawn_blocking(PgServer::start)
            .await
            .unwrap()
            .expect("a private PostgreSQL server for the outage test"),
    );
    let db = TestDatabase::create_on(&server).await.unwrap();
    let gw = TestGateway::with_database("[database]\nacquire_timeout_ms = 1000", db.url()).await;
    let readyz = || async {
        gw.client
            .get(gw.url("/readyz"))
            .send()
            .await
            .unwrap()
            .status()
    };

    let before = gw.send_text("before the outage").await;
    let id = before["id"].as_str().unwrap().to_owned();
    assert_eq!(readyz().await, 200);

    let pid = server.pid().expect("the server runs");
    let stopper = server.clone();
    tokio::task::spawn_blocking(move || stopper.stop())
        .await
        .unwrap()
        .unwrap();
    assert!(
        !std::path::Path::new(&format!("/proc/{pid}")).exists(),
        "PostgreSQL (pid {pid}) is down"
    );

    for _ in 0..2 {
        let started = Instant::now();
        let send = gw
            .rpc("SendMessage", json!({"message": user_message("during")}))
            .await;
        assert_eq!(send["error"]["code"], INTERNAL_ERROR, "{send}");
        let get = gw.rpc("GetTask", json!({"id": id})).await;
        assert_eq!(get["error"]["code"], INTERNAL_ERROR, "{get}");
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "fails fast, took {:?}",
            started.elapsed()
        );
    }
    assert_eq!(readyz().await, 503);

    let starter = server.clone();
    tokio::task::spawn_blocking(move || starter.start_again())
        .await
        .unwrap()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let send = gw
            .rpc("SendMessage", json!({"message": user_message("after")}))
            .await;
        if send.get("error").is_none() {
            assert_eq!(
                send["result"]["task"]["status"]["state"],
                "TASK_STATE_COMPLETED"
            );
            break;
        }
        assert!(Instant::now() < deadline, "no recovery within 15 s: {send}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Recovered for good: every operation works, the task from before is intact.
    for _ in 0..5 {
        gw.send_text("steady").await;
    }
    let got = gw.ok("GetTask", json!({"id": id})).await;
    assert_eq!(got, before);
    assert_eq!(readyz().await, 200);
}
