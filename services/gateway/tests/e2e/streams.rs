//! SSE streams: SendStreamingMessage and SubscribeToTask.

use serde_json::json;

use crate::harness::*;

#[tokio::test]
async fn streaming_five_chunks_in_order_then_close() {
    let gw = TestGateway::start().await;
    let stream = gw
        .stream(
            "SendStreamingMessage",
            json!({"tenant": "scenario", "message": script_message(json!({"chunks": 5, "delayMs": 5}))}),
        )
        .await;
    assert!(stream.content_type.starts_with("text/event-stream"));
    let events = stream.collect().await;
    let kinds: Vec<String> = events
        .iter()
        .map(|e| {
            assert_eq!(e.data["jsonrpc"], "2.0");
            assert_eq!(e.data["id"], "s", "each event carries the request id");
            let (k, v) = kind(&e.data["result"]);
            match k {
                "statusUpdate" => v["status"]["state"].as_str().unwrap().to_owned(),
                other => other.to_owned(),
            }
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "task",
            "TASK_STATE_WORKING",
            "artifactUpdate",
            "artifactUpdate",
            "artifactUpdate",
            "artifactUpdate",
            "artifactUpdate",
            "TASK_STATE_COMPLETED"
        ]
    );
    let ids: Vec<u64> = events
        .iter()
        .map(|e| e.id.as_ref().unwrap().parse().unwrap())
        .collect();
    assert_eq!(
        ids,
        (1..=8).collect::<Vec<_>>(),
        "SSE ids are the task's sequence numbers"
    );
    let chunks: Vec<_> = events[2..7]
        .iter()
        .map(|e| {
            let a = &e.data["result"]["artifactUpdate"];
            (
                a["append"].as_bool().unwrap_or(false),
                a["lastChunk"].as_bool().unwrap_or(false),
            )
        })
        .collect();
    assert_eq!(
        chunks,
        [
            (false, false),
            (true, false),
            (true, false),
            (true, false),
            (true, true)
        ]
    );
}

#[tokio::test]
async fn a_message_reply_is_a_single_event() {
    let gw = TestGateway::start().await;
    let events = gw
        .stream(
            "SendStreamingMessage",
            json!({"tenant": "scenario", "message": script_message(json!({"end": "message"}))}),
        )
        .await
        .collect()
        .await;
    assert_eq!(events.len(), 1);
    assert_eq!(kind(&events[0].data["result"]).0, "message");
    assert!(events[0].id.is_none());
}

#[tokio::test]
async fn streams_close_on_interrupted_states() {
    let gw = TestGateway::start().await;
    let events = gw
        .stream(
            "SendStreamingMessage",
            json!({"tenant": "scenario", "message": script_message(json!({"end": "input-required"}))}),
        )
        .await
        .collect()
        .await;
    let last = &events.last().unwrap().data["result"]["statusUpdate"];
    assert_eq!(last["status"]["state"], "TASK_STATE_INPUT_REQUIRED");
}

#[tokio::test]
async fn a_second_subscriber_joins_mid_stream_and_sees_the_same_tail() {
    let gw = TestGateway::start().await;
    let mut first = gw
        .stream(
            "SendStreamingMessage",
            json!({"tenant": "scenario", "message": script_message(json!({"chunks": 10, "delayMs": 30}))}),
        )
        .await;
    let head = first.next().await.unwrap();
    let task_id = head.data["result"]["task"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    // Let a few chunks pass before the second subscriber joins.
    for _ in 0..3 {
        first.next().await.unwrap();
    }
    let second = gw.stream("SubscribeToTask", json!({"id": task_id})).await;
    let rest_first = first.collect().await;
    let second = second.collect().await;

    let (k, snapshot) = kind(&second[0].data["result"]);
    assert_eq!(k, "task", "a subscription starts with the task");
    let snap_seq: u64 = second[0].id.as_ref().unwrap().parse().unwrap();
    assert!(
        snap_seq >= 4,
        "the snapshot already holds what happened: seq {snap_seq}"
    );
    assert!(!snapshot["artifacts"].as_array().unwrap().is_empty());

    let tail_ids = |evs: &[SseEvent]| -> Vec<u64> {
        evs.iter()
            .map(|e| e.id.as_ref().unwrap().parse().unwrap())
            .collect()
    };
    let second_ids = tail_ids(&second[1..]);
    let first_ids = tail_ids(&rest_first);
    assert_eq!(
        second_ids,
        first_ids
            .iter()
            .copied()
            .filter(|s| *s > snap_seq)
            .collect::<Vec<_>>(),
        "the same ordered tail, no gap and no duplicate after the snapshot"
    );
    assert_eq!(
        *first_ids.last().unwrap(),
        13,
        "task + WORKING + 10 chunks + COMPLETED"
    );
    let second_data: Vec<_> = second[1..]
        .iter()
        .map(|e| e.data["result"].clone())
        .collect();
    let first_data: Vec<_> = rest_first
        .iter()
        .filter(|e| e.id.as_ref().unwrap().parse::<u64>().unwrap() > snap_seq)
        .map(|e| e.data["result"].clone())
        .collect();
    assert_eq!(second_data, first_data);
}

#[tokio::test]
async fn subscribe_errors() {
    let gw = TestGateway::start().await;
    assert_eq!(
        gw.err_code("SubscribeToTask", json!({"id": "nope"})).await,
        -32001
    );
    let done = gw.send_text("x").await;
    assert_eq!(
        gw.err_code("SubscribeToTask", json!({"id": done["id"]}))
            .await,
        -32004
    );
}

#[tokio::test]
async fn subscribing_to_a_waiting_task_stays_open_until_it_is_terminal() {
    let gw = TestGateway::start().await;
    for end in ["input-required", "auth-required"] {
        let task = gw.scenario(json!({"end": end}), json!({})).await["task"].clone();
        let mut stream = gw
            .stream("SubscribeToTask", json!({"id": task["id"]}))
            .await;
        let first = stream.next().await.unwrap();
        assert_eq!(first.data["result"]["task"]["id"], task["id"]);
        let more = tokio::time::timeout(std::time::Duration::from_millis(300), stream.next()).await;
        assert!(
            more.is_err(),
            "{end}: the subscriber stays connected: {more:?}"
        );
        let mut follow = user_message("here you go");
        follow["taskId"] = task["id"].clone();
        gw.ok("SendMessage", json!({"message": follow})).await;
        let rest = stream.collect().await;
        let last = &rest.last().expect("the follow-up's events").data["result"]["statusUpdate"];
        assert_eq!(last["status"]["state"], "TASK_STATE_COMPLETED", "{end}");
    }
}

#[tokio::test]
async fn cancel_ends_open_streams() {
    let gw = TestGateway::start().await;
    let mut stream = gw
        .stream(
            "SendStreamingMessage",
            json!({"tenant": "scenario", "message": script_message(json!({"end": "hang"}))}),
        )
        .await;
    let task_id = stream.next().await.unwrap().data["result"]["task"]["id"].clone();
    let working = stream.next().await.unwrap();
    assert_eq!(
        working.data["result"]["statusUpdate"]["status"]["state"],
        "TASK_STATE_WORKING"
    );
    let mut watcher = gw.stream("SubscribeToTask", json!({"id": task_id})).await;
    watcher.next().await.unwrap();
    gw.ok("CancelTask", json!({"id": task_id})).await;
    for s in [stream, watcher] {
        let rest = s.collect().await;
        let last = &rest.last().expect("the CANCELED event").data["result"]["statusUpdate"];
        assert_eq!(last["status"]["state"], "TASK_STATE_CANCELED");
    }
}

#[tokio::test]
async fn streaming_can_be_disabled() {
    let gw = TestGateway::with_config("[card]\nstreaming = false").await;
    let resp = gw
        .rpc(
            "SendStreamingMessage",
            json!({"message": user_message("x")}),
        )
        .await;
    assert_eq!(resp["error"]["code"], -32004);
    assert_eq!(
        gw.err_code("SubscribeToTask", json!({"id": "x"})).await,
        -32004
    );
    let card = gw.card().await;
    assert_eq!(card["capabilities"]["streaming"], false);
}

#[tokio::test]
async fn shutdown_ends_open_streams() {
    let gw = TestGateway::start().await;
    let mut stream = gw
        .stream(
            "SendStreamingMessage",
            json!({"tenant": "scenario", "message": script_message(json!({"end": "hang"}))}),
        )
        .await;
    stream.next().await.unwrap();
    let drain = tokio::spawn(async move { stream.collect().await });
    gw.stop().await;
    drain.await.unwrap();
}
