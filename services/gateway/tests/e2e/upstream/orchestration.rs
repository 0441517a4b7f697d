//! Orchestration: idempotent SendMessage with an `Idempotency-Key` in front of an upstream, and
//! the bounded, prioritised dispatch queue of an upstream agent.

use serde_json::{Value, json};

use super::{error, front, script, task_until, upstream};
use crate::harness::{script_message, state};

/// 100 sends of one request with one `Idempotency-Key`, all at once: 100 identical answers,
/// one task at the gateway and one at the upstream.
#[tokio::test]
async fn retries_with_one_key_return_the_same_task() {
    let up = upstream("").await;
    let gw = front(&up, "").await;
    let params = json!({"tenant": "up",
        "message": script_message(json!({"chunks": 2, "delayMs": 100}))});
    let sends = (0..100).map(|_| gw.rpc_keyed("SendMessage", params.clone(), "retry-1"));
    let answers: Vec<Value> = futures::future::join_all(sends)
        .await
        .into_iter()
        .map(|a| a["result"].clone())
        .collect();
    assert_eq!(
        state(&answers[0]["task"]),
        "TASK_STATE_COMPLETED",
        "{}",
        answers[0]
    );
    for a in &answers {
        assert_eq!(a, &answers[0], "every duplicate gets the same answer");
    }
    assert_eq!(gw.ok("ListTasks", json!({})).await["totalSize"], 1);
    assert_eq!(up.ok("ListTasks", json!({})).await["totalSize"], 1);

    // The same request as a stream, with the same key: the blocking send's task, replayed.
    let replay = gw
        .post_keyed("SendStreamingMessage", params.clone(), "retry-1")
        .await;
    let replay = crate::harness::SseStream::new(replay).collect().await;
    assert_eq!(
        replay.len(),
        1,
        "a settled task is the whole stream: {replay:?}"
    );
    assert_eq!(replay[0].data["result"]["task"], answers[0]["task"]);
    // Without a key the same message (same messageId) is a new message: a new task.
    let again = gw.ok("SendMessage", params.clone()).await;
    assert_ne!(again["task"]["id"], answers[0]["task"]["id"]);
    assert_eq!(up.ok("ListTasks", json!({})).await["totalSize"], 2);

    // Streaming retries with one key replay the first stream's task.
    let first = crate::harness::SseStream::new(
        gw.post_keyed("SendStreamingMessage", params.clone(), "stream-1")
            .await,
    )
    .collect()
    .await;
    let events = crate::harness::SseStream::new(
        gw.post_keyed("SendStreamingMessage", params, "stream-1")
            .await,
    )
    .collect()
    .await;
    let first_task = &first[0].data["result"]["task"];
    let task = &events[0].data["result"]["task"];
    assert_eq!(task["id"], first_task["id"], "{events:?}");
    assert_eq!(up.ok("ListTasks", json!({})).await["totalSize"], 3);
}

/// Another owner's message ids are theirs: the same id from a second owner is a new task.
/// (Owners need authentication; here the built-in agent shows the same for anonymous callers:
/// a new message id is a new task.)
#[tokio::test]
async fn a_new_message_id_is_a_new_task() {
    let up = upstream("").await;
    let gw = front(&up, "").await;
    let a = gw
        .ok("SendMessage", script("up", json!({}), json!({})))
        .await;
    let b = gw
        .ok("SendMessage", script("up", json!({}), json!({})))
        .await;
    assert_ne!(a["task"]["id"], b["task"]["id"]);
}

fn hang(priority: &str) -> Value {
    let mut message = script_message(json!({"end": "hang"}));
    message["metadata"] = json!({"priority": priority});
    json!({"tenant": "up", "message": message, "configuration": {"returnImmediately": true}})
}

/// One slot, two places: the CRITICAL turn overtakes the LOW one queued before it, and a third
/// queued turn is refused with a retryable error.
#[tokio::test]
async fn priority_decides_who_goes_first_and_a_full_queue_refuses() {
    let up = upstream("").await;
    let gw = front(&up, "max_concurrency = 1\nqueue_capacity = 2").await;
    let running = gw.ok("SendMessage", hang("NORMAL")).await["task"]["id"].clone();
    task_until(&gw, running.as_str().unwrap(), |t| {
        state(t) == "TASK_STATE_WORKING"
    })
    .await;

    let low = gw.ok("SendMessage", hang("LOW")).await["task"].clone();
    let critical = gw.ok("SendMessage", hang("CRITICAL")).await["task"].clone();
    assert_eq!(state(&low), "TASK_STATE_SUBMITTED", "queued: {low}");
    assert_eq!(
        state(&critical),
        "TASK_STATE_SUBMITTED",
        "queued: {critical}"
    );

    let e = error(&gw, "SendMessage", hang("HIGH")).await;
    assert_eq!(e["data"][0]["reason"], "UNAVAILABLE", "{e}");
    assert!(
        e["message"].as_str().unwrap().contains("queue is full"),
        "{e}"
    );

    // The slot frees: CRITICAL runs, LOW still waits.
    gw.ok("CancelTask", json!({"id": running})).await;
    let critical_id = critical["id"].as_str().unwrap();
    task_until(&gw, critical_id, |t| state(t) == "TASK_STATE_WORKING").await;
    let low_now = gw.ok("GetTask", json!({"id": low["id"]})).await;
    assert_eq!(state(&low_now), "TASK_STATE_SUBMITTED", "{low_now}");

    // A queued task can be canceled; then LOW gets its turn once CRITICAL is done.
    gw.ok("CancelTask", json!({"id": critical_id})).await;
    task_until(&gw, low["id"].as_str().unwrap(), |t| {
        state(t) == "TASK_STATE_WORKING"
    })
    .await;
    gw.ok("CancelTask", json!({"id": low["id"]})).await;
}
