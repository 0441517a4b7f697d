//! The runner on the in-memory store and bus, with the built-in `scenario` agent and tokio's
//! paused time (its delays and the runner's timers advance only when every task waits).

use std::sync::Arc;
use std::time::Duration;

use a2a_bus::LocalEventBus;
use a2a_store::{MemoryTaskStore, NewTask, StoredEvent, TaskRecord, TaskStore};
use a2a_types::A2aError;
use a2a_types::state::{apply_event, is_terminal, state_of};
use a2a_types::v1::{
    CancelTaskRequest, Message, Part, Role, SendMessageConfiguration, SendMessageRequest,
    StreamResponse, Task, TaskPushNotificationConfig, TaskState, TaskStatus, part::Content,
    send_message_response, stream_response::Payload,
};
use a2a_types::wkt::Timestamp;
use tokio_util::sync::CancellationToken;

use super::super::quota::Quota;
use super::super::{A2aService, RequestContext};
use super::{Resume, Turn};
use crate::agents::queue::Priority;
use crate::agents::{AgentRegistry, AgentRequest, text_part};
use crate::config::FileConfig;

const OWNER: &str = "anonymous";

/// The log of a `scenario` task of four chunks, completed (see [`kinds`]).
const FOUR_CHUNKS_COMPLETED: [&str; 7] = [
    "task",
    "working",
    "artifact",
    "artifact",
    "artifact",
    "artifact",
    "completed",
];

fn service(config: &str) -> (A2aService, Arc<MemoryTaskStore>) {
    let store = Arc::new(MemoryTaskStore::new());
    // Assembled as the gateway assembles it; its loops run detached (the tests never shut the
    // service down).
    let gw = crate::gateway::Gateway::start(crate::gateway::Parts {
        store: store.clone(),
        bus: Arc::new(LocalEventBus::new()),
        agents: AgentRegistry::builtin(),
        config: FileConfig::parse(config).unwrap(),
        public_url: "http://localhost:8080".into(),
        shutdown: CancellationToken::new(),
        keys: None,
    });
    (gw.service().clone(), store)
}

/// A user message carrying a `scenario` script.
fn scripted(script: serde_json::Value) -> Message {
    Message {
        message_id: uuid::Uuid::now_v7().to_string(),
        role: Role::User as i32,
        parts: vec![
            text_part("go"),
            Part {
                content: Some(Content::Data(serde_json::from_value(script).unwrap())),
                ..Default::default()
            },
        ],
        ..Default::default()
    }
}

fn send_to_scenario(script: serde_json::Value, return_immediately: bool) -> SendMessageRequest {
    SendMessageRequest {
        tenant: "scenario".into(),
        message: Some(scripted(script)),
        configuration: Some(SendMessageConfiguration {
            return_immediately,
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The task a send answered with.
async fn send(svc: &A2aService, req: SendMessageRequest) -> Task {
    let resp = svc
        .send_message(&RequestContext::anonymous(), req)
        .await
        .unwrap();
    match resp.payload {
        Some(send_message_response::Payload::Task(task)) => task,
        other => panic!("not a task: {other:?}"),
    }
}

/// What each event of a log is, in order (`task`, a state name, `artifact`).
fn kinds(events: &[StoredEvent]) -> Vec<String> {
    events
        .iter()
        .map(|e| match &e.event.payload {
            Some(Payload::Task(_)) => "task".to_owned(),
            Some(Payload::StatusUpdate(u)) => {
                u.status.as_ref().unwrap().state().as_str_name()[11..].to_lowercase()
            }
            Some(Payload::ArtifactUpdate(_)) => "artifact".to_owned(),
            other => format!("{other:?}"),
        })
        .collect()
}

fn seqs(events: &[StoredEvent]) -> Vec<u64> {
    events.iter().map(|e| e.seq).collect()
}

fn running(svc: &A2aService) -> usize {
    svc.inner.running.lock().unwrap().len()
}

/// Stores task `id` of the `scenario` agent as a replica that died left it: created by a
/// scripted message, then WORKING (sequence 2). The message, and the task as stored.
async fn working_task(store: &MemoryTaskStore, id: &str) -> (Message, Task) {
    let message = Message {
        task_id: id.into(),
        context_id: "c".into(),
        ..scripted(serde_json::json!({}))
    };
    let task = Task {
        id: id.into(),
        context_id: "c".into(),
        status: Some(TaskStatus {
            state: TaskState::Submitted as i32,
            message: None,
            timestamp: Some(Timestamp::now()),
        }),
        history: vec![message.clone()],
        ..Default::default()
    };
    let new = NewTask {
        owner: OWNER.into(),
        agent: "scenario".into(),
        task,
        upstream_key: None,
        push: None,
    };
    let working = a2a_store::suite::status(id, TaskState::Working, Timestamp::now().as_millis());
    let (_, snapshot) = store.create_with(new, vec![working]).await.unwrap();
    (message, snapshot)
}

/// A turn of the `scenario` agent on `message`'s task, as a send (`task` is `None`: a new task)
/// or a takeover (`task` is the stored snapshot and its sequence number) prepares one, for
/// [`A2aService::start_turn`] directly: what the runner does, apart from the preparation.
fn direct_turn(
    svc: &A2aService,
    message: Message,
    task: Option<(Task, u64)>,
    epoch: u64,
    resume: Resume,
) -> Turn {
    let (task, continues) = task.unzip();
    Turn {
        agent: svc.inner.agents.get("scenario").unwrap(),
        owner: OWNER.into(),
        parent: a2a_process::telemetry::TraceSpan::NONE,
        traceparent: None,
        request: AgentRequest {
            task_id: message.task_id.clone(),
            context_id: message.context_id.clone(),
            turn: task.as_ref().map_or(1, super::turns_of),
            message,
            task,
            upstream: None,
            upstream_key: None,
            hops: 0,
        },
        continues,
        epoch,
        push_config: None,
        dialect: a2a_types::Dialect::V1,
        cancel: CancellationToken::new(),
        resume,
        priority: Priority::Normal,
        key: None,
        blocking: false,
        _quota: svc
            .inner
            .quotas
            .acquire(Quota::RunningTurns, OWNER)
            .unwrap(),
    }
}

/// The stored task is what its log says: the log is numbered 1, 2, 3... up to the task's
/// sequence number, and its events, applied in order, give the stored snapshot (but for the
/// client messages in its history).
async fn assert_consistent(
    store: &MemoryTaskStore,
    task_id: &str,
) -> (TaskRecord, Vec<StoredEvent>) {
    let rec = store.get(OWNER, task_id, None).await.unwrap().unwrap();
    let events = store.events_after(OWNER, task_id, 0).await.unwrap();
    let numbered: Vec<u64> = (1..=rec.seq).collect();
    assert_eq!(seqs(&events), numbered, "{:?}", kinds(&events));
    let mut folded = Task::default();
    for e in &events {
        apply_event(&mut folded, &e.event);
    }
    // The client messages that continued the task are recorded in its history, not as events.
    let mut stored = rec.task.clone();
    for task in [&mut folded, &mut stored] {
        task.history.retain(|m| m.role != Role::User as i32);
    }
    assert_eq!(folded, stored, "the snapshot is its log applied");
    (rec, events)
}

/// Every event the agent produced is committed once, in order, numbered 1, 2, 3... (the task
/// as created first), whether it came alone or in a burst with others.
#[tokio::test(start_paused = true)]
async fn events_are_committed_in_order_with_consecutive_sequence_numbers() {
    let (svc, store) = service("");
    let script = serde_json::json!({"chunks": 4, "delayMs": 50});
    let task = send(&svc, send_to_scenario(script, false)).await;
    assert_eq!(state_of(&task), TaskState::Completed, "{task:?}");
    let events = store.events_after(OWNER, &task.id, 0).await.unwrap();
    assert_eq!(seqs(&events), [1, 2, 3, 4, 5, 6, 7]);
    assert_eq!(kinds(&events), FOUR_CHUNKS_COMPLETED);
    let rec = store.get(OWNER, &task.id, None).await.unwrap().unwrap();
    assert_eq!(rec.seq, 7);
    assert_eq!(
        rec.task.artifacts[0].parts.len(),
        4,
        "the chunks appended in order"
    );
    assert_eq!(running(&svc), 0, "the turn ended");
}

/// A cancel racing the agent's completion: whichever is committed first wins, the other is
/// refused or comes to nothing. The log stays numbered without a gap and ends with exactly one
/// terminal event, and the cancel's answer agrees with it.
#[tokio::test(start_paused = true)]
async fn a_cancel_racing_the_completion_ends_the_task_once() {
    let (svc, store) = service("");
    let ctx = RequestContext::anonymous();
    // The agent completes 100 ms after it started: the cancel comes before, at the same
    // instant, or after.
    for (offset_ms, expected) in [
        (50, Some(TaskState::Canceled)),
        (100, None),
        (101, None),
        (150, Some(TaskState::Completed)),
    ] {
        let script = serde_json::json!({"chunks": 2, "delayMs": 100});
        let task = send(&svc, send_to_scenario(script, true)).await;
        tokio::time::sleep(Duration::from_millis(offset_ms)).await;
        let req = CancelTaskRequest {
            id: task.id.clone(),
            ..Default::default()
        };
        let answered = match svc.cancel_task(&ctx, req).await {
            Ok(task) => state_of(&task),
            Err(A2aError::TaskNotCancelable { state, .. }) => state,
            Err(e) => panic!("offset {offset_ms} ms: {e:?}"),
        };
        // Let the turn finish whatever it still does.
        tokio::time::sleep(Duration::from_secs(1)).await;
        let rec = store.get(OWNER, &task.id, None).await.unwrap().unwrap();
        let end = state_of(&rec.task);
        assert_eq!(answered, end, "offset {offset_ms} ms");
        if let Some(expected) = expected {
            assert_eq!(end, expected, "offset {offset_ms} ms");
        }
        let events = store.events_after(OWNER, &task.id, 0).await.unwrap();
        let numbered: Vec<u64> = (1..=rec.seq).collect();
        assert_eq!(seqs(&events), numbered, "offset {offset_ms} ms");
        let terminal = events
            .iter()
            .filter(|e| match &e.event.payload {
                Some(Payload::StatusUpdate(u)) => is_terminal(u.status.as_ref().unwrap().state()),
                _ => false,
            })
            .count();
        assert_eq!(terminal, 1, "offset {offset_ms} ms: {:?}", kinds(&events));
        assert_eq!(running(&svc), 0, "offset {offset_ms} ms: the turn ended");
    }
}

/// A turn whose task was taken over by another replica since it started (the task's epoch is
/// no longer the turn's): its agent's commit is refused by the fencing token, and the turn
/// stops there. Nothing is written, not even the FAILED a failing turn writes, and the
/// process's claim on the task goes with the turn.
#[tokio::test(start_paused = true)]
async fn a_commit_refused_by_the_fencing_token_stops_the_turn() {
    let (svc, store) = service("");
    let (message, snapshot) = working_task(&store, "fenced").await;
    let before = store.get(OWNER, "fenced", None).await.unwrap().unwrap();
    assert_eq!((before.seq, before.dispatch.epoch), (2, 0));
    // The turn resumes the task under epoch 1: the store holds 0, as if another replica had
    // claimed the task since (a takeover moves the epoch on; the in-memory store keeps none).
    let turn = direct_turn(&svc, message, Some((snapshot, 2)), 1, Resume::Redispatch);
    let first = svc.start_turn(turn).await.unwrap();
    let error = match first {
        Err(e) => e,
        Ok(_) => panic!("a fenced turn answered"),
    };
    assert!(error.to_string().contains("taken over"), "{error}");
    tokio::time::sleep(Duration::from_secs(1)).await;
    let after = store.get(OWNER, "fenced", None).await.unwrap().unwrap();
    assert_eq!(after.seq, 2, "nothing written: {:?}", after.task.status);
    assert_eq!(state_of(&after.task), TaskState::Working);
    assert_eq!(running(&svc), 0, "the turn stopped");
}

/// A send's inline push config is stored with its task, its delivery starting at the task as
/// created; one past its quota refuses the send, and nothing of it is stored.
#[tokio::test(start_paused = true)]
async fn an_inline_push_config_is_stored_with_its_task_or_refuses_the_send() {
    let (svc, store) = service("[limits.quotas]\npush_configs_per_owner = 1");
    let with_config = |url: &str| {
        let mut req = send_to_scenario(serde_json::json!({"chunks": 2}), false);
        if let Some(cfg) = &mut req.configuration {
            cfg.task_push_notification_config = Some(TaskPushNotificationConfig {
                url: url.into(),
                ..Default::default()
            });
        }
        req
    };
    let task = send(&svc, with_config("https://hooks.example.com/1")).await;
    assert_eq!(state_of(&task), TaskState::Completed, "{task:?}");
    let (webhooks, from, _) = store.push_targets(&task.id).unwrap();
    assert_eq!(webhooks.len(), 1);
    assert_eq!(webhooks[0].config.task_id, task.id);
    assert_eq!(from, 0, "delivered from the task as created");

    let refused = svc
        .send_message(
            &RequestContext::anonymous(),
            with_config("https://hooks.example.com/2"),
        )
        .await;
    assert!(
        matches!(&refused, Err(A2aError::QuotaExceeded { quota, .. }) if quota == "push_configs_per_owner"),
        "{refused:?}"
    );
    let query = a2a_store::ListQuery {
        page_size: 10,
        ..Default::default()
    };
    let page = store.list(OWNER, &query).await.unwrap();
    assert_eq!(page.total_size, 1, "the refused send stored no task");
    assert_eq!(running(&svc), 0);
}

mod outage;
mod takeover;
