//! Hand-offs: a turn taken over from a replica that died goes on from its task as stored, and
//! a message continuing a task waits for the task's previous turn to finish in this process.

use super::*;

/// A turn taken over (its task WORKING at sequence 2, as the dead replica left it) writes
/// nothing before its agent runs (no second WORKING, the message not recorded again) and goes
/// on from the stored sequence number: a turn sent again (`Redispatch`) runs the agent, which
/// completes the task; a built-in agent's turn re-attached to (`Reattach`) cannot be resumed,
/// and the task ends FAILED, saying so. Either way the turn releases the task.
#[tokio::test(start_paused = true)]
async fn a_taken_over_turn_goes_on_from_its_task_as_stored() {
    for (resume, end) in [
        (Resume::Redispatch, TaskState::Completed),
        (Resume::Reattach, TaskState::Failed),
    ] {
        let (svc, store) = service("");
        let id = format!("{resume:?}");
        let (message, snapshot) = working_task(&store, &id).await;
        let turn = direct_turn(&svc, message, Some((snapshot, 2)), 0, resume);
        // Nobody waits for a taken-over turn's first answer (`takeover.rs` drops it).
        drop(svc.start_turn(turn));
        tokio::time::sleep(Duration::from_secs(1)).await;
        let (rec, log) = assert_consistent(&store, &id).await;
        let end_kind = end.as_str_name()[11..].to_lowercase();
        assert_eq!(kinds(&log), ["task", "working", &end_kind], "{resume:?}");
        assert_eq!(rec.task.history.len(), 1, "{resume:?}: the message once");
        if resume == Resume::Reattach {
            let why = rec.task.status.as_ref().and_then(|s| s.message.as_ref());
            let why = why.map(|m| format!("{:?}", m.parts)).unwrap_or_default();
            assert!(why.contains("cannot resume"), "{why}");
        }
        assert_eq!(running(&svc), 0, "{resume:?}: the turn ended");
    }
}

/// The message answering an interrupted task, while the turn that interrupted it has committed
/// its INPUT_REQUIRED but not yet released the task (its publish and bookkeeping are slow, as
/// while Redis is unreachable): the message waits for the release and runs, instead of being
/// refused for a turn its caller has seen end. A turn that holds the task past the wait (5 s)
/// does run on: the message is refused, and the task is left as it was.
#[tokio::test(start_paused = true)]
async fn a_message_waits_for_the_previous_turn_of_its_task_to_finish() {
    let (svc, store) = service("");
    let script = serde_json::json!({"end": "input-required"});
    let task = send(&svc, send_to_scenario(script, false)).await;
    assert_eq!(state_of(&task), TaskState::InputRequired);
    let answer = |svc: &A2aService| {
        let svc = svc.clone();
        let message = Message {
            message_id: uuid::Uuid::now_v7().to_string(),
            task_id: task.id.clone(),
            role: Role::User as i32,
            parts: vec![text_part("here you are")],
            ..Default::default()
        };
        tokio::spawn(async move {
            let req = SendMessageRequest {
                message: Some(message),
                ..Default::default()
            };
            svc.send_message(&RequestContext::anonymous(), req).await
        })
    };
    let hold = |svc: &A2aService| {
        let mut running = svc.inner.running.lock().unwrap();
        running.insert(task.id.clone(), CancellationToken::new());
    };
    let release = |svc: &A2aService| svc.inner.running.lock().unwrap().remove(&task.id);

    // Held past the wait: refused, nothing written.
    hold(&svc);
    let started = tokio::time::Instant::now();
    let refused = answer(&svc).await.unwrap();
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_secs(5) && waited < Duration::from_secs(6),
        "refused once the wait is over: {waited:?}"
    );
    assert!(
        matches!(&refused, Err(A2aError::UnsupportedOperation(m)) if m.contains("already processing")),
        "{refused:?}"
    );
    let rec = store.get(OWNER, &task.id, None).await.unwrap().unwrap();
    assert_eq!(state_of(&rec.task), TaskState::InputRequired);

    // Released within the wait: the message runs once the previous turn is done.
    let sent = answer(&svc);
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        !sent.is_finished(),
        "the message waits for the previous turn"
    );
    let rec = store.get(OWNER, &task.id, None).await.unwrap().unwrap();
    assert_eq!(
        state_of(&rec.task),
        TaskState::InputRequired,
        "nothing ran yet"
    );
    release(&svc);
    let done = match sent.await.unwrap().unwrap().payload {
        Some(send_message_response::Payload::Task(task)) => task,
        other => panic!("not a task: {other:?}"),
    };
    assert_eq!(state_of(&done), TaskState::Completed);
    let (_, log) = assert_consistent(&store, &task.id).await;
    assert_eq!(kinds(&log).last().map(String::as_str), Some("completed"));
    assert_eq!(running(&svc), 0);
}
