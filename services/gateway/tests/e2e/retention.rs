//! Retention through the real gateway (`[retention]`): a terminal task past its time to live is
//! gone on every binding, exactly as a task that never existed, while tasks that are running or
//! waiting for input are kept however old they are.

use std::time::Duration;

use serde_json::json;

use crate::auth::{BINDINGS, client};
use crate::harness::{TestGateway, state};
use crate::isolation::{OPS, run};
use crate::metrics::Scrape;

#[tokio::test]
async fn an_expired_task_is_not_found_on_every_binding() {
    let gw =
        TestGateway::with_admin("[retention]\ntask_ttl = \"1s\"\nsweep_interval = \"200ms\"\n")
            .await;
    let done = gw.send_text("short-lived").await;
    assert_eq!(state(&done), "TASK_STATE_COMPLETED");
    let done = done["id"].as_str().unwrap().to_owned();
    let hang = gw
        .scenario(json!({"end": "hang"}), json!({"returnImmediately": true}))
        .await;
    let hang = hang["task"]["id"].as_str().unwrap().to_owned();
    let waiting = gw
        .scenario(json!({"end": "input-required"}), json!({}))
        .await;
    assert_eq!(state(&waiting["task"]), "TASK_STATE_INPUT_REQUIRED");
    let waiting = waiting["task"]["id"].as_str().unwrap().to_owned();

    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    while gw
        .rpc("GetTask", json!({"id": done}))
        .await
        .get("error")
        .is_none()
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the completed task outlived its time to live by 14 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for kind in BINDINGS {
        let c = client(&gw, kind, None);
        let missing = uuid::Uuid::now_v7().to_string();
        for op in OPS {
            let expired = run(&c, op, &done).await.replace(&done, "<id>");
            let never = run(&c, op, &missing).await.replace(&missing, "<id>");
            assert_eq!(expired, never, "{kind:?} {op}");
            assert!(
                expired.contains("TaskNotFound") || expired.contains("not found"),
                "{kind:?} {op}: {expired}"
            );
        }
    }
    // Older than the time to live by now, but not terminal: kept.
    let running = gw.ok("GetTask", json!({"id": hang})).await;
    assert_eq!(state(&running), "TASK_STATE_WORKING");
    let interrupted = gw.ok("GetTask", json!({"id": waiting})).await;
    assert_eq!(state(&interrupted), "TASK_STATE_INPUT_REQUIRED");
    let listed = gw.ok("ListTasks", json!({})).await;
    let ids: Vec<&str> = listed["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_str().unwrap())
        .collect();
    assert!(!ids.contains(&done.as_str()), "{ids:?}");
    assert!(ids.contains(&hang.as_str()) && ids.contains(&waiting.as_str()));

    let metrics = Scrape::take(&gw).await;
    assert!(
        metrics.has(
            "a2a_retention_deleted_tasks_total",
            &[("reason", "task_ttl")]
        ),
        "{}",
        metrics.text()
    );
    gw.ok("CancelTask", json!({"id": hang})).await;
}

/// The embedded gateway's bound: past `max_tasks`, the tasks that finished first are gone and
/// the running one stays, whatever its age.
#[tokio::test]
async fn the_embedded_store_keeps_max_tasks_evicting_finished_tasks_first() {
    let gw = TestGateway::embedded("[retention]\nmax_tasks = 3\n").await;
    let hang = gw
        .scenario(json!({"end": "hang"}), json!({"returnImmediately": true}))
        .await;
    let hang = hang["task"]["id"].as_str().unwrap().to_owned();
    let mut done = Vec::new();
    for n in 0..5 {
        let task = gw.send_text(&format!("task {n}")).await;
        done.push(task["id"].as_str().unwrap().to_owned());
    }
    assert_eq!(gw.task_count().await, 3);
    for gone in &done[..3] {
        assert_eq!(gw.err_code("GetTask", json!({"id": gone})).await, -32001);
    }
    for kept in done[3..].iter().chain([&hang]) {
        gw.ok("GetTask", json!({"id": kept})).await;
    }
    gw.ok("CancelTask", json!({"id": hang})).await;
}
