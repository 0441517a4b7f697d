//! The 11 RPCs over gRPC: sends, streams, tasks, push configs.

use super::*;
#[tokio::test]
async fn send_message_to_echo_completes_with_an_artifact() {
    let gw = TestGateway::start().await;
    let mut c = client(&gw).await;
    let task = task_of(
        c.send_message(req(text("hello")))
            .await
            .unwrap()
            .into_inner(),
    );
    assert_eq!(state(&task), TaskState::Completed);
    assert_eq!(task.artifacts.len(), 1);
    assert_eq!(
        task.artifacts[0].parts[0].content,
        Some(part::Content::Text("hello".into()))
    );
    // A missing a2a-version is served as 1.0, like a missing HTTP header.
    let task = task_of(c.send_message(text("x")).await.unwrap().into_inner());
    assert_eq!(state(&task), TaskState::Completed);
}

#[tokio::test]
async fn streaming_five_chunks_then_ok() {
    let gw = TestGateway::start().await;
    let mut c = client(&gw).await;
    let stream = c
        .send_streaming_message(req(script(json!({"chunks": 5, "delayMs": 5}), false)))
        .await
        .unwrap()
        .into_inner();
    let events = drain(stream).await;
    let labels: Vec<_> = events.iter().map(label).collect();
    assert_eq!(
        labels,
        [
            "task",
            "TASK_STATE_WORKING",
            "artifact",
            "artifact",
            "artifact",
            "artifact",
            "artifact",
            "TASK_STATE_COMPLETED"
        ]
    );
    let chunks: Vec<_> = events[2..7]
        .iter()
        .map(|e| match e {
            stream_response::Payload::ArtifactUpdate(a) => (a.append, a.last_chunk),
            _ => unreachable!(),
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
async fn a_message_reply_is_one_event_then_ok() {
    let gw = TestGateway::start().await;
    let mut c = client(&gw).await;
    let stream = c
        .send_streaming_message(req(script(json!({"end": "message"}), false)))
        .await
        .unwrap()
        .into_inner();
    let labels: Vec<_> = drain(stream).await.iter().map(label).collect();
    assert_eq!(labels, ["message"]);
}

#[tokio::test]
async fn get_task_honours_history_length() {
    let gw = TestGateway::start().await;
    let mut c = client(&gw).await;
    let id = task_of(c.send_message(req(text("x"))).await.unwrap().into_inner()).id;
    let get = |history_length| GetTaskRequest {
        id: id.clone(),
        history_length,
        ..Default::default()
    };
    let full = c.get_task(req(get(None))).await.unwrap().into_inner();
    assert_eq!(full.history.len(), 1);
    let none = c.get_task(req(get(Some(0)))).await.unwrap().into_inner();
    assert!(none.history.is_empty());
    let err = c.get_task(req(get(Some(-1)))).await.unwrap_err();
    let info = assert_a2a_error(&err, Code::InvalidArgument, "INVALID_PARAMS");
    assert_eq!(info.metadata["field"], "historyLength");
}

#[tokio::test]
async fn list_tasks_pages_with_a_cursor() {
    let gw = TestGateway::start().await;
    let mut c = client(&gw).await;
    for i in 0..3 {
        c.send_message(req(text(&format!("t{i}")))).await.unwrap();
    }
    let page = |page_token: String| ListTasksRequest {
        page_size: Some(2),
        page_token,
        ..Default::default()
    };
    let first = c
        .list_tasks(req(page(String::new())))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (first.tasks.len(), first.total_size, first.page_size),
        (2, 3, 2)
    );
    assert!(!first.next_page_token.is_empty());
    let second = c
        .list_tasks(req(page(first.next_page_token)))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(second.tasks.len(), 1);
    assert!(second.next_page_token.is_empty());
    assert!(first.tasks.iter().all(|t| t.id != second.tasks[0].id));
}

/// gRPC carries a Timestamp's seconds and nanos as they are: an out-of-range one is
/// InvalidParams naming the field, never an overflow, and the gateway goes on serving.
#[tokio::test]
async fn list_tasks_refuses_an_out_of_range_timestamp() {
    let gw = TestGateway::start().await;
    let mut c = client(&gw).await;
    c.send_message(req(text("t"))).await.unwrap();
    for (seconds, nanos) in [
        (i64::MAX, 0),
        (i64::MIN, 0),
        (253_402_300_800, 0),
        (0, -1),
        (0, 1_000_000_000),
    ] {
        let err = c
            .list_tasks(req(ListTasksRequest {
                status_timestamp_after: Some(a2a_types::wkt::Timestamp { seconds, nanos }),
                ..Default::default()
            }))
            .await
            .unwrap_err();
        assert_eq!(
            err.code(),
            Code::InvalidArgument,
            "{seconds} {nanos}: {err:?}"
        );
        let bad = err.get_details_bad_request().expect("a BadRequest detail");
        assert_eq!(bad.field_violations[0].field, "statusTimestampAfter");
    }
    let listed = c
        .list_tasks(req(ListTasksRequest::default()))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(listed.tasks.len(), 1);
}

#[tokio::test]
async fn cancel_a_hanging_task_then_cancel_again_is_refused() {
    let gw = TestGateway::start().await;
    let mut c = client(&gw).await;
    let sent = c
        .send_message(req(script(json!({"end": "hang"}), true)))
        .await
        .unwrap();
    let id = task_of(sent.into_inner()).id;
    let cancel = || CancelTaskRequest {
        id: id.clone(),
        ..Default::default()
    };
    let task = c.cancel_task(req(cancel())).await.unwrap().into_inner();
    assert_eq!(state(&task), TaskState::Canceled);
    let err = c.cancel_task(req(cancel())).await.unwrap_err();
    let info = assert_a2a_error(&err, Code::FailedPrecondition, "TASK_NOT_CANCELABLE");
    assert_eq!(info.metadata["taskId"], id);
    // The client crate's view of the same status.
    assert!(matches!(
        a2a_types::A2aError::from_status(&err),
        a2a_types::A2aError::TaskNotCancelable { .. }
    ));
}

#[tokio::test]
async fn subscribe_follows_a_running_task_to_the_end() {
    let gw = TestGateway::start().await;
    let mut c = client(&gw).await;
    let sent = c
        .send_message(req(script(json!({"chunks": 3, "delayMs": 300}), true)))
        .await
        .unwrap();
    let id = task_of(sent.into_inner()).id;
    let stream = c
        .subscribe_to_task(req(SubscribeToTaskRequest {
            id: id.clone(),
            ..Default::default()
        }))
        .await
        .unwrap()
        .into_inner();
    let labels: Vec<_> = drain(stream).await.iter().map(label).collect();
    assert_eq!(labels.first().map(String::as_str), Some("task"));
    assert_eq!(
        labels.last().map(String::as_str),
        Some("TASK_STATE_COMPLETED")
    );
    // A terminal task has nothing left to follow.
    let err = c
        .subscribe_to_task(req(SubscribeToTaskRequest {
            id,
            ..Default::default()
        }))
        .await
        .unwrap_err();
    assert_a2a_error(&err, Code::FailedPrecondition, "UNSUPPORTED_OPERATION");
}

#[tokio::test]
async fn push_config_crud() {
    let gw = TestGateway::start().await;
    let mut c = client(&gw).await;
    let task_id = task_of(c.send_message(req(text("x"))).await.unwrap().into_inner()).id;
    let created = c
        .create_task_push_notification_config(req(TaskPushNotificationConfig {
            task_id: task_id.clone(),
            url: "https://hooks.example.com/a2a".into(),
            token: "tok".into(),
            ..Default::default()
        }))
        .await
        .unwrap()
        .into_inner();
    assert!(!created.id.is_empty(), "the server assigns an id");
    let key = GetTaskPushNotificationConfigRequest {
        task_id: task_id.clone(),
        id: created.id.clone(),
        ..Default::default()
    };
    let got = c
        .get_task_push_notification_config(req(key.clone()))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(got, created);
    let listed = c
        .list_task_push_notification_configs(req(ListTaskPushNotificationConfigsRequest {
            task_id: task_id.clone(),
            ..Default::default()
        }))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(listed.configs, std::slice::from_ref(&created));
    c.delete_task_push_notification_config(req(DeleteTaskPushNotificationConfigRequest {
        task_id: task_id.clone(),
        id: created.id.clone(),
        ..Default::default()
    }))
    .await
    .unwrap();
    let err = c
        .get_task_push_notification_config(req(key))
        .await
        .unwrap_err();
    assert_a2a_error(&err, Code::NotFound, "TASK_NOT_FOUND");
}
