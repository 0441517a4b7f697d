//! The runner while the task store is unreachable (`MemoryTaskStore::set_unavailable`) or loses
//! the answer of a write it committed (`MemoryTaskStore::lose_write_answers`): what the caller
//! gets, what is left stored, and that no event a caller was given is missing from the task's
//! log (nor one in the log given twice).
//!
//! The `scenario` agent below goes WORKING, sends its first chunk at once and the next ones
//! 100 ms apart: an outage that starts at 150 ms catches the turn between two commits.

use std::sync::{Arc, Mutex};

use futures::StreamExt;

use super::*;
use crate::service::{EventStream, SeqEvent};

/// A caller following a stream in a task of its own.
struct Follower {
    got: Arc<Mutex<Vec<Result<SeqEvent, A2aError>>>>,
    end: tokio::task::JoinHandle<()>,
}

impl Follower {
    fn new(mut stream: EventStream) -> Self {
        let got = Arc::new(Mutex::new(Vec::new()));
        let sink = got.clone();
        let end = tokio::spawn(async move {
            while let Some(item) = stream.next().await {
                sink.lock().unwrap().push(item);
            }
        });
        Self { got, end }
    }

    /// The events given so far, with their sequence numbers; panics on an error.
    fn events(&self) -> Vec<(u64, StreamResponse)> {
        self.got
            .lock()
            .unwrap()
            .iter()
            .map(|item| match item {
                Ok(SeqEvent {
                    seq: Some(seq),
                    event,
                }) => (*seq, event.clone()),
                other => panic!("not a task event: {other:?}"),
            })
            .collect()
    }

    fn task_id(&self) -> String {
        match self.events().first() {
            Some((
                _,
                StreamResponse {
                    payload: Some(Payload::Task(task)),
                },
            )) => task.id.clone(),
            other => panic!("the stream did not start with the task: {other:?}"),
        }
    }

    /// The events given once the stream has ended (a stream that has not ended ten minutes
    /// later, in paused time, never will: the test fails).
    async fn ended(mut self) -> Vec<(u64, StreamResponse)> {
        let ended = tokio::time::timeout(Duration::from_secs(600), &mut self.end).await;
        match ended {
            Ok(joined) => joined.unwrap(),
            Err(_) => panic!("the stream never ended; given: {:?}", self.events()),
        }
        self.events()
    }
}

/// A streaming send to `scenario` with four chunks 100 ms apart, followed.
async fn streaming(svc: &A2aService) -> Follower {
    let script = serde_json::json!({"chunks": 4, "delayMs": 100});
    let stream = svc
        .send_streaming_message(
            &RequestContext::anonymous(),
            send_to_scenario(script, false),
        )
        .await
        .unwrap();
    Follower::new(stream)
}

/// Every event the caller was given is the log's event of that sequence number: none is
/// missing from the log, none is given twice, none out of order.
fn assert_given_from_the_log(given: &[(u64, StreamResponse)], log: &[StoredEvent]) {
    let given_seqs: Vec<u64> = given.iter().map(|(seq, _)| *seq).collect();
    let numbered: Vec<u64> = (1..=given.len() as u64).collect();
    assert_eq!(given_seqs, numbered, "given in order, once each");
    for (seq, event) in given {
        let logged = log.iter().find(|e| e.seq == *seq);
        assert_eq!(
            logged.map(|e| &*e.event),
            Some(event),
            "event {seq} as given is in the log"
        );
    }
}

/// What an outage is: down for a while, or one commit's answer lost.
#[derive(Debug, Clone, Copy)]
enum Fault {
    Down(Duration),
    AnswerLost,
}

/// A followed streaming send (see [`streaming`]) meeting `fault` at 150 ms: the service, its
/// store, the follower, and how many turns were running when the fault was over (the store was
/// about to come back, or a commit had lost its answer).
async fn streaming_through(fault: Fault) -> (A2aService, Arc<MemoryTaskStore>, Follower, usize) {
    let (svc, store) = service("");
    let follower = streaming(&svc).await;
    tokio::time::sleep(Duration::from_millis(150)).await;
    match fault {
        Fault::Down(outage) => {
            store.set_unavailable(true);
            tokio::time::sleep(outage).await;
        }
        Fault::AnswerLost => store.lose_write_answers(1),
    }
    let running_then = running(&svc);
    store.set_unavailable(false);
    (svc, store, follower, running_then)
}

/// An outage shorter than the runner's patience, or the answer of one of its commits lost: the
/// turn waits it out, or reads its lost commit back, and goes on where it was. The task ends as
/// the agent ended it, each event stored once, and the caller is given the whole log.
async fn a_turn_goes_on_through(fault: Fault) {
    let (svc, store, follower, running_then) = streaming_through(fault).await;
    assert_eq!(running_then, 1, "{fault:?}: the turn waits for the store");
    let task_id = follower.task_id();
    let given = follower.ended().await;
    let (rec, log) = assert_consistent(&store, &task_id).await;
    assert_eq!(state_of(&rec.task), TaskState::Completed, "{fault:?}");
    assert_eq!(kinds(&log), FOUR_CHUNKS_COMPLETED, "{fault:?}");
    assert_eq!(
        rec.task.artifacts[0].parts.len(),
        4,
        "{fault:?}: each chunk stored once"
    );
    assert_given_from_the_log(&given, &log);
    assert_eq!(
        given.len(),
        log.len(),
        "{fault:?}: the caller was given it all"
    );
    assert_eq!(running(&svc), 0, "{fault:?}: the turn ended");
}

#[tokio::test(start_paused = true)]
async fn a_store_outage_shorter_than_the_patience_delays_the_turn_and_loses_nothing() {
    a_turn_goes_on_through(Fault::Down(Duration::from_secs(30))).await;
}

#[tokio::test(start_paused = true)]
async fn a_commit_whose_answer_was_lost_is_read_back_not_stored_twice() {
    a_turn_goes_on_through(Fault::AnswerLost).await;
}

/// An outage past the runner's patience (60 s), over before a second one has passed: the
/// commit that waited fails, and the runner ends the task FAILED, saying the store was
/// unreachable, once it is back. The events of the write that failed were given to nobody and
/// are not stored; the caller is given the log, the failure last, and its stream ends.
#[tokio::test(start_paused = true)]
async fn a_store_outage_past_the_patience_fails_the_task_once_the_store_is_back() {
    let (svc, store, follower, running_then) =
        streaming_through(Fault::Down(Duration::from_secs(90))).await;
    assert_eq!(running_then, 1, "the turn waits to record the failure");
    let task_id = follower.task_id();
    let given = follower.ended().await;
    let (rec, log) = assert_consistent(&store, &task_id).await;
    assert_eq!(state_of(&rec.task), TaskState::Failed, "{:?}", kinds(&log));
    let why = rec.task.status.as_ref().and_then(|s| s.message.as_ref());
    let why = why.map(|m| format!("{:?}", m.parts)).unwrap_or_default();
    assert!(why.contains("unreachable"), "the failure says why: {why}");
    assert!(
        rec.task.artifacts[0].parts.len() < 4,
        "the chunks of the failed write are not stored"
    );
    assert_given_from_the_log(&given, &log);
    assert_eq!(given.len(), log.len(), "the caller was given the failure");
    assert_eq!(running(&svc), 0, "the turn ended");
}

/// An outage that outlasts the runner's patience twice (its write, then the failure it would
/// record): the turn stops and releases the task, which stays as its last commit left it,
/// consistent, and every event the caller was given is stored. Once the store is back, a cancel
/// ends the task (nothing runs it any more), and the caller's stream ends with it.
#[tokio::test(start_paused = true)]
async fn a_store_outage_past_twice_the_patience_stops_the_turn_and_leaves_its_task_whole() {
    let (svc, store, follower, running_then) =
        streaming_through(Fault::Down(Duration::from_secs(150))).await;
    assert_eq!(running_then, 0, "the turn gave up and released its task");
    let task_id = follower.task_id();
    let (rec, log) = assert_consistent(&store, &task_id).await;
    assert_eq!(state_of(&rec.task), TaskState::Working);
    assert_given_from_the_log(&follower.events(), &log);

    let req = CancelTaskRequest {
        id: task_id.clone(),
        ..Default::default()
    };
    let canceled = svc
        .cancel_task(&RequestContext::anonymous(), req)
        .await
        .unwrap();
    assert_eq!(state_of(&canceled), TaskState::Canceled);
    let given = follower.ended().await;
    let (rec, log) = assert_consistent(&store, &task_id).await;
    assert_eq!(state_of(&rec.task), TaskState::Canceled);
    assert_given_from_the_log(&given, &log);
    assert_eq!(given.len(), log.len(), "the caller was given the cancel");
}

/// A send while the store is down is refused at once with `Unavailable` (the binding maps it
/// to 503 / UNAVAILABLE), whether it fails before its turn (the owner's quota is read from the
/// store) or at the turn's first write, which creates the task: nothing is stored and nothing
/// runs (the runner only waits to read back whether the create was stored after all), and the
/// same send succeeds once the store is back.
#[tokio::test(start_paused = true)]
async fn a_send_during_a_store_outage_is_refused_with_unavailable_at_once() {
    let (svc, store) = service("");
    let ctx = RequestContext::anonymous();
    store.set_unavailable(true);
    let started = tokio::time::Instant::now();
    let refused = svc
        .send_message(&ctx, send_to_scenario(serde_json::json!({}), false))
        .await;
    assert!(
        matches!(refused, Err(A2aError::Unavailable(_))),
        "{refused:?}"
    );
    // Past the send's preparation: the runner's first write meets the outage.
    let message = Message {
        task_id: "during-outage".into(),
        context_id: "c".into(),
        ..scripted(serde_json::json!({}))
    };
    let turn = direct_turn(&svc, message.clone(), None, 0, Resume::No);
    let first = svc.start_turn(turn).await.unwrap();
    assert!(
        matches!(first, Err(A2aError::Unavailable(_))),
        "the caller is told the store is unreachable"
    );
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "refused at once: a new task does not wait for the store"
    );
    // Only the runner's read-back of the create (was it stored after all?) waits for the store;
    // it finds nothing once the store is back, and the task id is released.
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(
        running(&svc),
        1,
        "the create's outcome is settled once the store is back"
    );
    store.set_unavailable(false);
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(running(&svc), 0, "nothing runs");
    assert!(store.is_empty(), "nothing stored");

    let task = send(&svc, send_to_scenario(serde_json::json!({}), false)).await;
    assert_eq!(state_of(&task), TaskState::Completed);
    let turn = direct_turn(&svc, message, None, 0, Resume::No);
    let first = svc.start_turn(turn).await.unwrap();
    assert!(first.is_ok(), "the same turn runs once the store is back");
}

/// A send with an inline push config whose task's create meets the outage waits for the store
/// (its config is not dropped for a database restart) and creates the task, with the config,
/// once: whether the store was down, or committed the create and lost its answer (the retry
/// finds the task its first attempt stored, and reads it back).
#[tokio::test(start_paused = true)]
async fn a_create_with_a_push_config_waits_out_an_outage_and_is_stored_once() {
    for fault in [Fault::Down(Duration::from_secs(5)), Fault::AnswerLost] {
        let (svc, store) = service("");
        let id = format!("{fault:?}");
        let message = Message {
            task_id: id.clone(),
            context_id: "c".into(),
            ..scripted(serde_json::json!({"chunks": 2}))
        };
        let mut turn = direct_turn(&svc, message, None, 0, Resume::No);
        turn.push_config = Some(TaskPushNotificationConfig {
            url: "https://hooks.example.com/outage".into(),
            ..Default::default()
        });
        match fault {
            Fault::Down(_) => store.set_unavailable(true),
            Fault::AnswerLost => store.lose_write_answers(1),
        }
        let first = svc.start_turn(turn);
        if let Fault::Down(outage) = fault {
            tokio::time::sleep(outage).await;
            assert!(store.is_empty(), "{fault:?}: nothing stored while down");
            store.set_unavailable(false);
        }
        let first = first.await.unwrap();
        assert!(first.is_ok(), "{fault:?}: the caller gets its task");
        tokio::time::sleep(Duration::from_secs(1)).await;
        let (rec, log) = assert_consistent(&store, &id).await;
        assert_eq!(state_of(&rec.task), TaskState::Completed, "{fault:?}");
        assert_eq!(kinds(&log)[0], "task", "{fault:?}");
        assert_eq!(rec.task.artifacts[0].parts.len(), 2, "{fault:?}");
        let (webhooks, from, _) = store.push_targets(&id).unwrap();
        assert_eq!(
            (webhooks.len(), from),
            (1, 0),
            "{fault:?}: its config, once"
        );
        assert_eq!(store.len(), 1, "{fault:?}");
        assert_eq!(running(&svc), 0, "{fault:?}");
    }
}

/// A cancel while the runner waits out an outage: refused with `Unavailable` while the store
/// is down (it cannot read the task), it works once the store is back although the runner is
/// still between two retries. The write the runner was retrying is stored first, then the
/// cancel: one terminal event, the log numbered without a gap.
#[tokio::test(start_paused = true)]
async fn a_cancel_during_a_store_outage_takes_effect_once_the_store_is_back() {
    let (svc, store) = service("");
    let ctx = RequestContext::anonymous();
    let script = serde_json::json!({"chunks": 4, "delayMs": 100});
    let task = send(&svc, send_to_scenario(script, true)).await;
    let cancel = || CancelTaskRequest {
        id: task.id.clone(),
        ..Default::default()
    };
    tokio::time::sleep(Duration::from_millis(150)).await;
    store.set_unavailable(true);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let refused = svc.cancel_task(&ctx, cancel()).await;
    assert!(
        matches!(refused, Err(A2aError::Unavailable(_))),
        "{refused:?}"
    );
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!(running(&svc), 1, "the turn still waits for the store");
    store.set_unavailable(false);
    let canceled = svc.cancel_task(&ctx, cancel()).await.unwrap();
    assert_eq!(state_of(&canceled), TaskState::Canceled);
    let (rec, log) = assert_consistent(&store, &task.id).await;
    assert_eq!(state_of(&rec.task), TaskState::Canceled);
    let kinds = kinds(&log);
    assert_eq!(kinds.last().map(String::as_str), Some("canceled"));
    // Chunks 0 and 1 came before the outage; chunk 2's write waited for the store.
    assert_eq!(
        kinds.iter().filter(|k| *k == "artifact").count(),
        3,
        "the write that waited is stored before the cancel: {kinds:?}"
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(running(&svc), 0, "the turn ended");
}

/// A new task's create without a push config is not retried through an outage (a new
/// request is refused as retryable at once). When the store commits it and loses the answer,
/// the caller is told `Unavailable` at once all the same (it retries as a new send, and never
/// learns this task's id); the runner then reads the task back and ends it FAILED, saying
/// why, through its normal write, and releases the task: nothing is left stored that is not
/// over, nothing runs it, and it no longer counts against the owner's `open_tasks_per_owner`
/// (of 1 here: the owner's next send is let through).
#[tokio::test(start_paused = true)]
async fn a_create_whose_answer_was_lost_strands_no_task() {
    let (svc, store) = service("[limits.quotas]\nopen_tasks_per_owner = 1");
    let message = Message {
        task_id: "lost".into(),
        context_id: "c".into(),
        ..scripted(serde_json::json!({"chunks": 2, "delayMs": 100}))
    };
    let turn = direct_turn(&svc, message, None, 0, Resume::No);
    store.lose_write_answers(1);
    let started = tokio::time::Instant::now();
    let first = svc.start_turn(turn).await.unwrap();
    assert!(
        matches!(first, Err(A2aError::Unavailable(_))),
        "the caller is told the store is unreachable: {:?}",
        first.map(drop)
    );
    assert!(started.elapsed() < Duration::from_secs(1), "told at once");
    tokio::time::sleep(Duration::from_secs(10)).await;
    let (rec, log) = assert_consistent(&store, "lost").await;
    assert_eq!(state_of(&rec.task), TaskState::Failed, "{:?}", kinds(&log));
    assert_eq!(kinds(&log).last().map(String::as_str), Some("failed"));
    let why = rec.task.status.as_ref().and_then(|s| s.message.as_ref());
    let why = why.map(|m| format!("{:?}", m.parts)).unwrap_or_default();
    assert!(why.contains("unreachable"), "the failure says why: {why}");
    assert_eq!(running(&svc), 0, "the task is released");
    let task = send(&svc, send_to_scenario(serde_json::json!({}), false)).await;
    assert_eq!(
        state_of(&task),
        TaskState::Completed,
        "the failed task no longer counts as open"
    );
}
