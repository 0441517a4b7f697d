//! Faults: a receiver that is down for 20 s, and a worker killed with SIGKILL in the middle of a
//! burst while another one runs.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::harness::Deployment;
use crate::receiver::{Receiver, task_id_of};

#[tokio::test]
async fn a_receiver_down_for_20_seconds_gets_everything_after_it_comes_back() {
    let env = Deployment::start("127.0.0.1").await;
    let mut receiver = Receiver::start().await;
    // Retries at most 2 s apart, and enough of them to outlast the outage.
    let _worker = env.worker(&[
        ("A2A_WORKER_BACKOFF_BASE_MS", "200"),
        ("A2A_WORKER_BACKOFF_MAX_MS", "2000"),
        ("A2A_WORKER_MAX_ATTEMPTS", "40"),
    ]);
    receiver.down().await;
    let down_at = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..3 {
        let task = env
            .scenario_task(
                json!({"chunks": 2}),
                json!({"url": receiver.url("/hook")}),
                false,
            )
            .await;
        tasks.push(task["id"].as_str().unwrap().to_owned());
    }
    tokio::time::sleep(Duration::from_secs(20).saturating_sub(down_at.elapsed())).await;
    assert!(receiver.requests().is_empty());
    receiver.up().await;
    // 3 tasks x (task, working, 2 chunks, completed).
    receiver
        .wait_for(Duration::from_secs(20), |r| r.len() >= 15)
        .await;
    let mut per_task: HashMap<&str, Vec<String>> = HashMap::new();
    let got = receiver.requests();
    for r in &got {
        per_task
            .entry(task_id_of(&r.json))
            .or_default()
            .push(String::from_utf8_lossy(&r.body).into_owned());
    }
    for id in &tasks {
        let bodies = &per_task[id.as_str()];
        assert_eq!(bodies.len(), 5, "every event of {id} exactly once");
        assert!(bodies[0].contains("\"task\""), "the Task first");
        assert!(bodies[4].contains("TASK_STATE_COMPLETED"), "completed last");
    }
    let dead = env.store().dead_letters(true, 100).await.unwrap();
    assert!(dead.is_empty(), "nothing gave up: {dead:?}");
}

const TASKS: usize = 20;
/// Events per task: the Task, WORKING, 97 chunks, COMPLETED.
const EVENTS_PER_TASK: usize = 100;

#[tokio::test]
async fn kill_9_of_one_of_two_workers_during_a_burst_of_2000_events_loses_none() {
    let env = Deployment::start("127.0.0.1").await;
    let receiver = Receiver::start().await;
    let a = env.worker(&[("A2A_WORKER_NAME", "worker-a")]);
    let _b = env.worker(&[("A2A_WORKER_NAME", "worker-b")]);
    let url = receiver.url("/hook");
    let mut tasks = Vec::new();
    for _ in 0..TASKS {
        let task = env
            .scenario_task(
                json!({"chunks": EVENTS_PER_TASK - 3, "delayMs": 1}),
                json!({"url": url}),
                true,
            )
            .await;
        tasks.push(task["id"].as_str().unwrap().to_owned());
    }
    // Kill one worker in the middle of the burst.
    let total = TASKS * EVENTS_PER_TASK;
    receiver
        .wait_for(Duration::from_secs(30), |r| r.len() >= total / 5)
        .await;
    a.kill9();
    let killed_at = receiver.requests().len();
    assert!(killed_at < total, "the kill came before the burst was over");

    // Every event arrives at least once: per task, 100 distinct bodies (every event of a task
    // differs: its kind, state, timestamp or chunk text).
    let distinct = |r: &[crate::receiver::Received]| {
        let mut per_task: HashMap<String, HashSet<Vec<u8>>> = HashMap::new();
        for x in r {
            per_task
                .entry(task_id_of(&x.json).to_owned())
                .or_default()
                .insert(x.body.to_vec());
        }
        per_task
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    let per_task = loop {
        let per_task = distinct(&receiver.requests());
        let done = tasks
            .iter()
            .all(|t| per_task.get(t).is_some_and(|s| s.len() >= EVENTS_PER_TASK));
        if done || Instant::now() > deadline {
            break per_task;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let counts: Vec<usize> = tasks
        .iter()
        .map(|t| per_task.get(t).map_or(0, HashSet::len))
        .collect();
    assert!(
        counts.iter().all(|n| *n == EVENTS_PER_TASK),
        "distinct events per task: {counts:?}"
    );
    let got = receiver.requests().len();
    eprintln!("kill -9 after {killed_at} deliveries; {got} deliveries for {total} events");
    let dead = env.store().dead_letters(true, 10).await.unwrap();
    assert!(dead.is_empty(), "nothing gave up: {dead:?}");
}
