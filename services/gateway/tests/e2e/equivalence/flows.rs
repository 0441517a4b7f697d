//! The flows of the equivalence table: sends, streams, reads, listing, cancel, subscribe and
//! push-config CRUD.

use super::*;

pub(super) async fn send_echo(env: &Env, t: &mut Trace) {
    let c = env.client();
    let r = c
        .send_message(wire(json!({"message": user_message("hello")})))
        .await
        .unwrap();
    t.ok("send", &r);
    let task = task_of(&r);
    assert_eq!(state(&task), TaskState::Completed);
    assert_eq!(task.artifacts[0].artifact_id, "echo");
    let got = c.get_task(get(&task.id, None)).await.unwrap();
    assert_eq!(got, task, "GetTask returns what SendMessage returned");
    t.ok("get", &got);
}

pub(super) async fn send_every_end(env: &Env, t: &mut Trace) {
    let c = env.client();
    for (end, expected) in [
        ("completed", TaskState::Completed),
        ("failed", TaskState::Failed),
        ("rejected", TaskState::Rejected),
        ("input-required", TaskState::InputRequired),
        ("auth-required", TaskState::AuthRequired),
    ] {
        let r = send_script(&c, json!({"chunks": 2, "end": end}), json!({})).await;
        let task = task_of(&r);
        assert_eq!(state(&task), expected, "end {end}");
        assert_eq!(task.artifacts[0].parts.len(), 2);
        t.ok(end, &r);
    }
    // The client's tenant fills requests that name none.
    let sc = env.scenario_client();
    let r = sc
        .send_message(wire(
            json!({"message": script_message(json!({"end": "message"}))}),
        ))
        .await
        .unwrap();
    assert!(matches!(
        r.payload,
        Some(send_message_response::Payload::Message(_))
    ));
    t.ok("message", &r);
    let waiting = task_of(
        &sc.send_message(wire(
            json!({"message": script_message(json!({"end": "input-required"}))}),
        ))
        .await
        .unwrap(),
    );
    let mut follow = user_message("here you go");
    follow["taskId"] = json!(waiting.id);
    let done = c
        .send_message(wire(json!({"message": follow})))
        .await
        .unwrap();
    assert_eq!(state(&task_of(&done)), TaskState::Completed);
    t.ok("follow-up completes the task", &done);
}

pub(super) async fn stream_chunks_in_order(env: &Env, t: &mut Trace) {
    let c = env.scenario_client();
    let opened = c
        .send_streaming_message(wire(
            json!({"message": script_message(json!({"chunks": 4, "delayMs": 5}))}),
        ))
        .await
        .unwrap();
    let (events, err) = drain(opened).await;
    assert!(err.is_none(), "{err:?}");
    let kinds: Vec<String> = events.iter().map(|e| kind(&e.response)).collect();
    assert_eq!(
        kinds,
        [
            "task",
            "TASK_STATE_WORKING",
            "artifactUpdate",
            "artifactUpdate",
            "artifactUpdate",
            "artifactUpdate",
            "TASK_STATE_COMPLETED"
        ]
    );
    let ids: Vec<Option<String>> = events.iter().map(|e| e.id.clone()).collect();
    if env.has_event_ids() {
        let seqs: Vec<Option<String>> = (1..=7).map(|i| Some(i.to_string())).collect();
        assert_eq!(ids, seqs, "SSE ids are the task's sequence numbers");
    } else {
        assert!(ids.iter().all(Option::is_none));
    }
    t.ok("stream", &responses(&events));

    let (events, err) = drain(
        c.send_streaming_message(wire(
            json!({"message": script_message(json!({"end": "message"}))}),
        ))
        .await
        .unwrap(),
    )
    .await;
    assert!(err.is_none());
    assert_eq!(events.len(), 1, "a direct reply is a single event");
    assert_eq!(kind(&events[0].response), "message");
    assert_eq!(events[0].id, None);
    t.ok("message reply", &responses(&events));

    let (events, _) = drain(
        c.send_streaming_message(wire(
            json!({"message": script_message(json!({"end": "input-required"}))}),
        ))
        .await
        .unwrap(),
    )
    .await;
    assert_eq!(
        kind(&events.last().unwrap().response),
        "TASK_STATE_INPUT_REQUIRED",
        "the stream closes on an interrupted state"
    );
    t.ok("interrupted", &responses(&events));
}

pub(super) async fn get_with_history_length(env: &Env, t: &mut Trace) {
    let c = env.client();
    let sc = env.scenario_client();
    let waiting = task_of(&send_script(&sc, json!({"end": "input-required"}), json!({})).await);
    let mut follow = user_message("more");
    follow["taskId"] = json!(waiting.id);
    c.send_message(wire(json!({"message": follow})))
        .await
        .unwrap();
    for (label, hl, len) in [
        ("unset", None, 3),
        ("0", Some(0), 0),
        ("1", Some(1), 1),
        ("2", Some(2), 2),
        ("50", Some(50), 3),
    ] {
        let got = c.get_task(get(&waiting.id, hl)).await.unwrap();
        assert_eq!(got.history.len(), len, "historyLength {label}");
        t.ok(&format!("historyLength {label}"), &got);
    }
    let sent = c
        .send_message(wire(
            json!({"message": user_message("x"), "configuration": {"historyLength": 0}}),
        ))
        .await
        .unwrap();
    assert!(task_of(&sent).history.is_empty());
    t.ok("send with historyLength 0", &sent);
}

pub(super) async fn list_filters_and_paging(env: &Env, t: &mut Trace) {
    let c = env.client();
    let mut m = user_message("x");
    m["contextId"] = json!("ctx-a");
    c.send_message(wire(json!({"message": m}))).await.unwrap();
    let waiting = task_of(
        &send_script(
            &env.scenario_client(),
            json!({"end": "input-required"}),
            json!({}),
        )
        .await,
    );
    for i in 0..5 {
        send_text(&c, &format!("t{i}")).await;
    }
    let list = |v: Value| c.list_tasks(wire::<ListTasksRequest>(v));
    let all = list(json!({})).await.unwrap();
    assert_eq!((all.total_size, all.page_size, all.tasks.len()), (7, 50, 7));
    assert_eq!(all.next_page_token, "");
    assert!(all.tasks.iter().all(|t| t.artifacts.is_empty()));
    t.ok("all", &all);
    let by_ctx = list(json!({"contextId": "ctx-a"})).await.unwrap();
    assert_eq!(by_ctx.total_size, 1);
    t.ok("contextId", &by_ctx);
    let by_state = list(json!({"status": "TASK_STATE_INPUT_REQUIRED"}))
        .await
        .unwrap();
    assert_eq!(by_state.tasks[0].id, waiting.id);
    t.ok("status", &by_state);
    let req = |ts: &str| ListTasksRequest {
        status_timestamp_after: Some(Timestamp::parse(ts).unwrap()),
        ..Default::default()
    };
    let future = c.list_tasks(req("2999-01-01T00:00:00Z")).await.unwrap();
    assert_eq!(future.total_size, 0);
    t.ok("statusTimestampAfter future", &future);
    let past = c.list_tasks(req("2000-01-01T00:00:00.5Z")).await.unwrap();
    assert_eq!(past.total_size, 7);
    t.ok("statusTimestampAfter past", &past);
    let full = list(json!({"includeArtifacts": true, "historyLength": 0}))
        .await
        .unwrap();
    assert!(full.tasks.iter().all(|t| t.history.is_empty()));
    assert!(full.tasks.iter().any(|t| !t.artifacts.is_empty()));
    t.ok("includeArtifacts + historyLength 0", &full);
    let with_history = list(json!({"historyLength": 1})).await.unwrap();
    t.ok("historyLength 1", &with_history);

    let mut seen = Vec::new();
    let mut token = String::new();
    for page_no in 0.. {
        let page = list(json!({"pageSize": 3, "pageToken": token}))
            .await
            .unwrap();
        assert_eq!((page.total_size, page.page_size), (7, 3));
        seen.extend(page.tasks.iter().map(|t| t.id.clone()));
        t.ok(&format!("page {page_no}"), &page);
        token = page.next_page_token;
        if token.is_empty() {
            break;
        }
    }
    let newest_first: Vec<String> = all.tasks.iter().map(|t| t.id.clone()).collect();
    assert_eq!(
        seen, newest_first,
        "paging visits every task once, in order"
    );
}

pub(super) async fn cancel_hang_and_completed(env: &Env, t: &mut Trace) {
    let c = env.client();
    let r = send_script(
        &env.scenario_client(),
        json!({"chunks": 0, "end": "hang"}),
        json!({"returnImmediately": true}),
    )
    .await;
    let id = task_of(&r).id;
    t.ok("working", &wait_working(&c, &id).await);
    let cancel = |id: &str| {
        c.cancel_task(CancelTaskRequest {
            id: id.into(),
            ..Default::default()
        })
    };
    let canceled = cancel(&id).await.unwrap();
    assert_eq!(state(&canceled), TaskState::Canceled);
    t.ok("cancel", &canceled);
    let got = c.get_task(get(&id, None)).await.unwrap();
    assert_eq!(state(&got), TaskState::Canceled);
    t.ok("get after cancel", &got);
    let again = cancel(&id).await;
    assert!(matches!(
        err_of(&again),
        A2aError::TaskNotCancelable {
            state: TaskState::Canceled,
            ..
        }
    ));
    t.res("cancel again", &again);
    let done = send_text(&c, "x").await;
    let r = cancel(&done.id).await;
    assert!(matches!(
        err_of(&r),
        A2aError::TaskNotCancelable {
            state: TaskState::Completed,
            ..
        }
    ));
    t.res("cancel completed", &r);
    let waiting = task_of(
        &send_script(
            &env.scenario_client(),
            json!({"end": "input-required"}),
            json!({}),
        )
        .await,
    );
    let r = cancel(&waiting.id).await.unwrap();
    assert_eq!(state(&r), TaskState::Canceled);
    t.ok("cancel input-required", &r);
}

pub(super) async fn subscribe_joins_mid_stream(env: &Env, t: &mut Trace) {
    let c = env.scenario_client();
    let mut first = c
        .send_streaming_message(wire(
            json!({"message": script_message(json!({"chunks": 10, "delayMs": 100}))}),
        ))
        .await
        .unwrap();
    let mut head = Vec::new();
    for _ in 0..4 {
        head.push(first.next().await.unwrap().unwrap());
    }
    let task_id = match &head[0].response.payload {
        Some(stream_response::Payload::Task(task)) => task.id.clone(),
        other => panic!("the first event is the task: {other:?}"),
    };
    let second = c
        .subscribe_to_task(SubscribeToTaskRequest {
            id: task_id,
            ..Default::default()
        })
        .await
        .unwrap();
    let (rest, err) = drain(first).await;
    assert!(err.is_none());
    let (second, err) = drain(second).await;
    assert!(err.is_none());
    head.extend(rest);
    let first = head;
    assert_eq!(first.len(), 13, "task + WORKING + 10 chunks + COMPLETED");
    t.ok("first stream", &responses(&first));

    // The snapshot holds what happened before it: task (1) + WORKING (2) + n chunks.
    let snapshot = match &second[0].response.payload {
        Some(stream_response::Payload::Task(task)) => task.clone(),
        other => panic!("a subscription starts with the task: {other:?}"),
    };
    assert_eq!(state(&snapshot), TaskState::Working);
    let chunks: usize = snapshot.artifacts.iter().map(|a| a.parts.len()).sum();
    assert!(chunks >= 2, "joined mid-stream, after {chunks} chunks");
    let seq = 2 + chunks;
    if env.has_event_ids() {
        assert_eq!(second[0].id, Some(seq.to_string()));
    }
    assert_eq!(
        second[1..],
        first[seq..],
        "the same ordered tail after the snapshot (ids included), no gap, no duplicate"
    );
    t.ok(
        "second subscriber: snapshot kind, tail == first stream after it",
        &json!({"snapshot": kind(&second[0].response), "sameTail": second[1..] == first[seq..]}),
    );
}

/// SubscribeToTask ends only at a terminal state: a subscriber to an INPUT_REQUIRED task gets
/// the Task, stays connected, sees the turn the follow-up starts and closes after COMPLETED;
/// a resume (`Last-Event-ID`) replays across the interrupted state and goes on live.
pub(super) async fn subscribe_waits_past_input_required(env: &Env, t: &mut Trace) {
    let c = env.client();
    let sc = env.scenario_client();
    let waiting = task_of(&send_script(&sc, json!({"end": "input-required"}), json!({})).await).id;
    let subscribe = |c: A2aClient, id: String| async move {
        c.subscribe_to_task(SubscribeToTaskRequest {
            id,
            ..Default::default()
        })
        .await
        .unwrap()
    };
    let mut sub = subscribe(c.clone(), waiting.clone()).await;
    let first = sub.next().await.unwrap().unwrap();
    assert_eq!(kind(&first.response), "task");
    quiet(&mut sub, "a subscriber to an INPUT_REQUIRED task").await;
    // A resume from the task's last event (the interrupted state) also stays open.
    let resume_from = |after: u64| {
        let header = if env.kind == BindingKind::Grpc {
            "a2a-last-event-id"
        } else {
            "last-event-id"
        };
        c.clone().with_header(header, &after.to_string()).unwrap()
    };
    // task (1), WORKING (2), the chunk (3), INPUT_REQUIRED (4).
    let mut live = subscribe(resume_from(4), waiting.clone()).await;
    quiet(&mut live, "a resume at the interrupted state").await;

    let mut follow = user_message("here you go");
    follow["taskId"] = json!(waiting);
    let done = c
        .send_message(wire(json!({"message": follow})))
        .await
        .unwrap();
    assert_eq!(state(&task_of(&done)), TaskState::Completed);
    let (rest, err) = drain(sub).await;
    assert!(err.is_none(), "{err:?}");
    let kinds: Vec<String> = rest.iter().map(|e| kind(&e.response)).collect();
    assert_eq!(
        kinds.last().map(String::as_str),
        Some("TASK_STATE_COMPLETED"),
        "the follow-up's events, then the stream closes: {kinds:?}"
    );
    t.ok("subscriber after the follow-up", &responses(&rest));
    let (tail, err) = drain(live).await;
    assert!(err.is_none(), "{err:?}");
    assert_eq!(responses(&tail), responses(&rest), "the resumed tail");

    // A replay that crosses the interrupted state does not close there.
    let (replayed, err) = drain(subscribe(resume_from(2), waiting).await).await;
    assert!(err.is_none(), "{err:?}");
    let kinds: Vec<String> = replayed.iter().map(|e| kind(&e.response)).collect();
    assert_eq!(kinds[..2], ["artifactUpdate", "TASK_STATE_INPUT_REQUIRED"]);
    assert_eq!(responses(&replayed[2..]), responses(&rest));
    if env.has_event_ids() {
        assert_eq!(replayed[0].id.as_deref(), Some("3"));
    }
    t.ok("replay from event 2", &responses(&replayed));
}

/// Asserts that `s` stays open and says nothing for a while.
async fn quiet(s: &mut EventStream, who: &str) {
    let next = tokio::time::timeout(Duration::from_millis(300), s.next()).await;
    assert!(next.is_err(), "{who} stays connected: {next:?}");
}

pub(super) async fn push_config_crud(env: &Env, t: &mut Trace) {
    let c = env.client();
    let tid = send_text(&c, "x").await.id;
    let created = c
        .create_push_config(wire(
            json!({"taskId": tid, "url": "https://hooks.example.com/a2a",
            "token": "tok", "authentication": {"scheme": "Bearer", "credentials": "secret"}}),
        ))
        .await
        .unwrap();
    assert!(!created.id.is_empty(), "the server assigns an id");
    t.ok("create", &created);
    let mine = c
        .create_push_config(wire(
            json!({"taskId": tid, "id": "my-id", "url": "https://hooks.example.com/2"}),
        ))
        .await
        .unwrap();
    assert_eq!(mine.id, "my-id");
    t.ok("create with id", &mine);
    let req = |id: &str| GetTaskPushNotificationConfigRequest {
        task_id: tid.clone(),
        id: id.into(),
        ..Default::default()
    };
    let got = c.get_push_config(req(&created.id)).await.unwrap();
    assert_eq!(got, created);
    t.ok("get", &got);
    let list = |size: i32, token: &str| {
        c.list_push_configs(ListTaskPushNotificationConfigsRequest {
            task_id: tid.clone(),
            page_size: size,
            page_token: token.into(),
            ..Default::default()
        })
    };
    let page = list(1, "").await.unwrap();
    assert_eq!(page.configs.len(), 1);
    assert!(!page.next_page_token.is_empty());
    t.ok("list page 1", &page);
    let page2 = list(1, &page.next_page_token).await.unwrap();
    assert_eq!(page2.configs[0].id, "my-id");
    t.ok("list page 2", &page2);
    let del = DeleteTaskPushNotificationConfigRequest {
        task_id: tid.clone(),
        id: created.id.clone(),
        ..Default::default()
    };
    c.delete_push_config(del.clone()).await.unwrap();
    t.res(
        "delete again (idempotent)",
        &c.delete_push_config(del).await,
    );
    let gone = c.get_push_config(req(&created.id)).await;
    assert!(matches!(err_of(&gone), A2aError::TaskNotFound { .. }));
    t.res("get deleted", &gone);
    let all = list(0, "").await.unwrap();
    assert_eq!(all.configs.len(), 1);
    t.ok("list after delete", &all);
    let inline = c
        .send_message(wire(json!({"message": user_message("x"), "configuration":
            {"taskPushNotificationConfig": {"url": "https://hooks.example.com/inline"}}})))
        .await
        .unwrap();
    let listed = c
        .list_push_configs(ListTaskPushNotificationConfigsRequest {
            task_id: task_of(&inline).id,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(listed.configs[0].url, "https://hooks.example.com/inline");
    t.ok("inline config from SendMessage", &listed);
}
