//! The A2A 0.3 gRPC service (`a2a.v1.A2AService`) on the shared listener, through a tonic
//! client generated from the 0.3 proto: every RPC, error statuses, streams with `final`, a
//! resubscribe, and one task used over 0.3 and 1.0 alike.

use std::time::Duration;

use a2a_types::v1::a2a_service_client::A2aServiceClient as V1Client;
use a2a_types::v03_grpc::proto::a2a_service_client::A2aServiceClient as V03Client;
use a2a_types::v03_grpc::proto::{
    CancelTaskRequest, CreateTaskPushNotificationConfigRequest,
    DeleteTaskPushNotificationConfigRequest, GetAgentCardRequest,
    GetTaskPushNotificationConfigRequest, GetTaskRequest, ListTaskPushNotificationConfigRequest,
    Message, Part, PushNotificationConfig, Role, SendMessageConfiguration, SendMessageRequest,
    StreamResponse, Task, TaskPushNotificationConfig, TaskState, TaskSubscriptionRequest, part,
    send_message_response, stream_response,
};
use a2a_types::wkt::{Struct, Value, value};
use serde_json::json;
use tonic::transport::Channel;
use tonic::{Code, Request, Status, Streaming};
use tonic_types::StatusExt;

use crate::harness::TestGateway;

async fn channel(gw: &TestGateway) -> Channel {
    Channel::from_shared(format!("http://{}", gw.addr))
        .unwrap()
        .connect()
        .await
        .expect("gRPC connects to the HTTP listener (h2c)")
}

async fn clients(gw: &TestGateway) -> (V03Client<Channel>, V1Client<Channel>) {
    let ch = channel(gw).await;
    (V03Client::new(ch.clone()), V1Client::new(ch))
}

fn object(v: serde_json::Value) -> Struct {
    match Value::from(v).kind {
        Some(value::Kind::StructValue(s)) => s,
        other => panic!("an object, got {other:?}"),
    }
}

fn message(parts: Vec<part::Part>, metadata: Option<Struct>) -> Message {
    Message {
        message_id: uuid::Uuid::new_v4().to_string(),
        role: Role::User as i32,
        content: parts
            .into_iter()
            .map(|p| Part {
                part: Some(p),
                metadata: None,
            })
            .collect(),
        metadata,
        ..Default::default()
    }
}

fn text(t: &str) -> SendMessageRequest {
    SendMessageRequest {
        request: Some(message(vec![part::Part::Text(t.into())], None)),
        ..Default::default()
    }
}

/// A message to the scenario agent (0.3 has no tenant: the `skill` hint routes it), the script
/// in a data part. `blocking` false returns at once, as 0.3's proto default says.
fn script(script: serde_json::Value, blocking: bool) -> SendMessageRequest {
    SendMessageRequest {
        request: Some(message(
            vec![
                part::Part::Text("run".into()),
                part::Part::Data(a2a_types::v03_grpc::proto::DataPart {
                    data: Some(object(script)),
                }),
            ],
            Some(object(json!({"skill": "scenario"}))),
        )),
        configuration: Some(SendMessageConfiguration {
            blocking,
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn task_of(resp: a2a_types::v03_grpc::proto::SendMessageResponse) -> Task {
    match resp.payload {
        Some(send_message_response::Payload::Task(t)) => t,
        other => panic!("expected a task, got {other:?}"),
    }
}

fn state(task: &Task) -> TaskState {
    TaskState::try_from(task.status.as_ref().unwrap().state).unwrap()
}

async fn drain(mut stream: Streaming<StreamResponse>) -> Vec<stream_response::Payload> {
    let mut out = Vec::new();
    loop {
        let next = tokio::time::timeout(Duration::from_secs(10), stream.message())
            .await
            .expect("an event within 10 s");
        match next.expect("the stream ends with OK") {
            Some(ev) => out.push(ev.payload.expect("a payload")),
            None => return out,
        }
    }
}

/// An event's label in 0.3 terms; a status update says whether it is `final`.
fn label(p: &stream_response::Payload) -> String {
    use stream_response::Payload::*;
    match p {
        Task(_) => "task".into(),
        Msg(_) => "message".into(),
        ArtifactUpdate(_) => "artifact".into(),
        StatusUpdate(s) => {
            let state = TaskState::try_from(s.status.as_ref().unwrap().state).unwrap();
            let fin = if s.r#final { " final" } else { "" };
            format!("{}{fin}", state.as_str_name())
        }
    }
}

fn assert_a2a_error(status: &Status, code: Code, reason: &str) {
    assert_eq!(status.code(), code, "{status:?}");
    let info = status
        .get_details_error_info()
        .unwrap_or_else(|| panic!("an ErrorInfo detail: {status:?}"));
    assert_eq!(info.domain, "a2a-protocol.org");
    assert_eq!(info.reason, reason);
}

/// A 1.0 request, as 1.0 clients send it.
fn req1<T>(m: T) -> Request<T> {
    let mut r = Request::new(m);
    r.metadata_mut()
        .insert("a2a-version", "1.0".parse().unwrap());
    r
}

fn as_key<T>(key: &str, m: T) -> Request<T> {
    let mut r = Request::new(m);
    r.metadata_mut().insert("x-api-key", key.parse().unwrap());
    r
}

fn named(id: &str) -> String {
    format!("tasks/{id}")
}

#[tokio::test]
async fn send_message_blocks_by_default_and_answers_in_0_3_shapes() {
    let gw = TestGateway::start().await;
    let (mut c, _) = clients(&gw).await;
    let task = task_of(c.send_message(text("hello")).await.unwrap().into_inner());
    assert_eq!(state(&task), TaskState::Completed);
    let part = &task.artifacts[0].parts[0];
    assert_eq!(part.part, Some(part::Part::Text("hello".into())));
    // The user's message is in the history, its parts in 0.3's `content`.
    assert_eq!(
        task.history[0].content[0].part,
        Some(part::Part::Text("hello".into()))
    );
    // An `a2a-version: 0.3` entry is what this service speaks anyway.
    let mut req = Request::new(text("again"));
    req.metadata_mut()
        .insert("a2a-version", "0.3".parse().unwrap());
    let task = task_of(c.send_message(req).await.unwrap().into_inner());
    assert_eq!(state(&task), TaskState::Completed);
}

#[tokio::test]
async fn streaming_ends_with_a_final_status_update() {
    let gw = TestGateway::start().await;
    let (mut c, _) = clients(&gw).await;
    let stream = c
        .send_streaming_message(script(json!({"chunks": 3, "delayMs": 5}), true))
        .await
        .unwrap()
        .into_inner();
    let labels: Vec<_> = drain(stream).await.iter().map(label).collect();
    assert_eq!(
        labels,
        [
            "task",
            "TASK_STATE_WORKING",
            "artifact",
            "artifact",
            "artifact",
            "TASK_STATE_COMPLETED final"
        ]
    );
    // An interrupted turn is final too: the stream ends there.
    let stream = c
        .send_streaming_message(script(json!({"end": "input-required"}), true))
        .await
        .unwrap()
        .into_inner();
    let labels: Vec<_> = drain(stream).await.iter().map(label).collect();
    assert_eq!(
        labels.last().map(String::as_str),
        Some("TASK_STATE_INPUT_REQUIRED final")
    );
}

#[tokio::test]
async fn get_task_honours_history_length_and_names() {
    let gw = TestGateway::start().await;
    let (mut c, _) = clients(&gw).await;
    let id = task_of(c.send_message(text("x")).await.unwrap().into_inner()).id;
    let get = |history_length| GetTaskRequest {
        name: named(&id),
        history_length,
    };
    let full = c.get_task(get(0)).await.unwrap().into_inner();
    assert_eq!(full.id, id);
    assert!(!full.history.is_empty(), "0 is the whole history in 0.3");
    let one = c.get_task(get(1)).await.unwrap().into_inner();
    assert_eq!(one.history.len(), 1);

    let missing = c
        .get_task(GetTaskRequest {
            name: named("0190d9c8-0000-7000-8000-000000000000"),
            history_length: 0,
        })
        .await
        .unwrap_err();
    assert_a2a_error(&missing, Code::NotFound, "TASK_NOT_FOUND");
    let bad = c
        .get_task(GetTaskRequest {
            name: "agents/x/tasks/y".into(),
            history_length: 0,
        })
        .await
        .unwrap_err();
    assert_a2a_error(&bad, Code::InvalidArgument, "INVALID_PARAMS");
}

#[tokio::test]
async fn cancel_then_cancel_again_is_refused() {
    let gw = TestGateway::start().await;
    let (mut c, _) = clients(&gw).await;
    let id = task_of(
        c.send_message(script(json!({"end": "hang"}), false))
            .await
            .unwrap()
            .into_inner(),
    )
    .id;
    let cancel = || CancelTaskRequest { name: named(&id) };
    let task = c.cancel_task(cancel()).await.unwrap().into_inner();
    assert_eq!(state(&task), TaskState::Cancelled);
    assert_eq!(
        TaskState::Cancelled.as_str_name(),
        "TASK_STATE_CANCELLED",
        "0.3 spells it with two Ls"
    );
    let err = c.cancel_task(cancel()).await.unwrap_err();
    assert_a2a_error(&err, Code::FailedPrecondition, "TASK_NOT_CANCELABLE");
}

#[tokio::test]
async fn task_subscription_follows_a_running_task_to_its_final_event() {
    let gw = TestGateway::start().await;
    let (mut c, _) = clients(&gw).await;
    let id = task_of(
        c.send_message(script(json!({"chunks": 3, "delayMs": 300}), false))
            .await
            .unwrap()
            .into_inner(),
    )
    .id;
    let stream = c
        .task_subscription(TaskSubscriptionRequest { name: named(&id) })
        .await
        .unwrap()
        .into_inner();
    let labels: Vec<_> = drain(stream).await.iter().map(label).collect();
    assert_eq!(labels.first().map(String::as_str), Some("task"));
    assert_eq!(
        labels.last().map(String::as_str),
        Some("TASK_STATE_COMPLETED final")
    );
    // Only the last status update is final.
    assert_eq!(labels.iter().filter(|l| l.ends_with(" final")).count(), 1);
    let err = c
        .task_subscription(TaskSubscriptionRequest { name: named(&id) })
        .await
        .unwrap_err();
    assert_a2a_error(&err, Code::FailedPrecondition, "UNSUPPORTED_OPERATION");
}

#[tokio::test]
async fn a_subscription_ends_with_the_final_event_of_an_interrupted_turn() {
    // 1.0's SubscribeToTask stays open past INPUT_REQUIRED; a 0.3 stream ends at its final
    // event, as 0.3 servers end theirs.
    let gw = TestGateway::start().await;
    let (mut c, _) = clients(&gw).await;
    let id = task_of(
        c.send_message(script(
            json!({"chunks": 3, "delayMs": 300, "end": "input-required"}),
            false,
        ))
        .await
        .unwrap()
        .into_inner(),
    )
    .id;
    let stream = c
        .task_subscription(TaskSubscriptionRequest { name: named(&id) })
        .await
        .unwrap()
        .into_inner();
    let labels: Vec<_> = drain(stream).await.iter().map(label).collect();
    assert_eq!(labels.first().map(String::as_str), Some("task"));
    assert_eq!(
        labels.last().map(String::as_str),
        Some("TASK_STATE_INPUT_REQUIRED final")
    );
}

#[tokio::test]
async fn push_config_crud_by_resource_name() {
    let gw = TestGateway::start().await;
    let (mut c, _) = clients(&gw).await;
    let id = task_of(c.send_message(text("x")).await.unwrap().into_inner()).id;
    let created = c
        .create_task_push_notification_config(CreateTaskPushNotificationConfigRequest {
            parent: named(&id),
            config_id: "cfg-1".into(),
            config: Some(TaskPushNotificationConfig {
                name: String::new(),
                push_notification_config: Some(PushNotificationConfig {
                    url: "https://hooks.example.com/a2a".into(),
                    token: "tok".into(),
                    ..Default::default()
                }),
            }),
        })
        .await
        .unwrap()
        .into_inner();
    let name = format!("tasks/{id}/pushNotificationConfigs/cfg-1");
    assert_eq!(created.name, name);
    let body = created.push_notification_config.as_ref().unwrap();
    assert_eq!((body.id.as_str(), body.token.as_str()), ("cfg-1", "tok"));

    let got = c
        .get_task_push_notification_config(GetTaskPushNotificationConfigRequest {
            name: name.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(got, created);
    let listed = c
        .list_task_push_notification_config(ListTaskPushNotificationConfigRequest {
            parent: named(&id),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(listed.configs, std::slice::from_ref(&created));
    c.delete_task_push_notification_config(DeleteTaskPushNotificationConfigRequest {
        name: name.clone(),
    })
    .await
    .unwrap();
    let err = c
        .get_task_push_notification_config(GetTaskPushNotificationConfigRequest { name })
        .await
        .unwrap_err();
    assert_a2a_error(&err, Code::NotFound, "TASK_NOT_FOUND");
    let bad = c
        .get_task_push_notification_config(GetTaskPushNotificationConfigRequest {
            name: named(&id),
        })
        .await
        .unwrap_err();
    assert_a2a_error(&bad, Code::InvalidArgument, "INVALID_PARAMS");
}

#[tokio::test]
async fn get_agent_card_is_the_0_3_card() {
    let gw = TestGateway::start().await;
    let (mut c, _) = clients(&gw).await;
    let card = c
        .get_agent_card(GetAgentCardRequest {})
        .await
        .unwrap()
        .into_inner();
    let public = gw.card().await;
    assert_eq!(card.protocol_version, "0.3.0");
    assert_eq!(card.name, public["name"].as_str().unwrap());
    assert!(!card.url.is_empty(), "a main url");
    assert!(
        !card.preferred_transport.is_empty(),
        "a preferred transport"
    );
    let transports: Vec<_> = card
        .additional_interfaces
        .iter()
        .map(|i| i.transport.as_str())
        .collect();
    assert!(transports.contains(&"GRPC"), "{transports:?}");
    assert_eq!(
        card.capabilities.unwrap().streaming,
        public["capabilities"]["streaming"]
            .as_bool()
            .unwrap_or(false)
    );
    assert_eq!(
        card.skills.len(),
        public["skills"].as_array().unwrap().len()
    );
}

#[tokio::test]
async fn a_task_is_one_task_over_0_3_and_1_0() {
    use a2a_types::v1;
    let gw = TestGateway::start().await;
    let (mut c03, mut c1) = clients(&gw).await;

    // Created over 0.3, read and canceled over 1.0.
    let id = task_of(
        c03.send_message(script(json!({"end": "hang"}), false))
            .await
            .unwrap()
            .into_inner(),
    )
    .id;
    let read = c1
        .get_task(req1(v1::GetTaskRequest {
            id: id.clone(),
            ..Default::default()
        }))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(read.id, id);
    let canceled = c1
        .cancel_task(req1(v1::CancelTaskRequest {
            id: id.clone(),
            ..Default::default()
        }))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        v1::TaskState::try_from(canceled.status.unwrap().state).unwrap(),
        v1::TaskState::Canceled
    );
    let seen = c03
        .get_task(GetTaskRequest {
            name: named(&id),
            history_length: 0,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(state(&seen), TaskState::Cancelled);

    // Created over 1.0, followed and canceled over 0.3, read back over 1.0.
    let sent = c1
        .send_message(req1(v1::SendMessageRequest {
            tenant: "scenario".into(),
            message: Some(v1::Message {
                message_id: uuid::Uuid::new_v4().to_string(),
                role: v1::Role::User as i32,
                parts: vec![v1::Part {
                    content: Some(v1::part::Content::Data(json!({"end": "hang"}).into())),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            configuration: Some(v1::SendMessageConfiguration {
                return_immediately: true,
                ..Default::default()
            }),
            ..Default::default()
        }))
        .await
        .unwrap()
        .into_inner();
    let Some(v1::send_message_response::Payload::Task(t)) = sent.payload else {
        panic!("a task");
    };
    let id = t.id;
    let mut follow = c03
        .task_subscription(TaskSubscriptionRequest { name: named(&id) })
        .await
        .unwrap()
        .into_inner();
    let first = follow.message().await.unwrap().unwrap();
    assert!(matches!(
        first.payload,
        Some(stream_response::Payload::Task(ref t)) if t.id == id
    ));
    let canceled = c03
        .cancel_task(CancelTaskRequest { name: named(&id) })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(state(&canceled), TaskState::Cancelled);
    let rest: Vec<_> = drain(follow).await.iter().map(label).collect();
    assert_eq!(
        rest.last().map(String::as_str),
        Some("TASK_STATE_CANCELLED final")
    );
    let read = c1
        .get_task(req1(v1::GetTaskRequest {
            id: id.clone(),
            ..Default::default()
        }))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        v1::TaskState::try_from(read.status.unwrap().state).unwrap(),
        v1::TaskState::Canceled
    );
}

#[tokio::test]
async fn version_0_3_on_the_1_0_service_is_still_refused() {
    let gw = TestGateway::start().await;
    let (_, mut c1) = clients(&gw).await;
    let mut req = Request::new(a2a_types::v1::GetTaskRequest {
        id: "x".into(),
        ..Default::default()
    });
    req.metadata_mut()
        .insert("a2a-version", "0.3".parse().unwrap());
    let err = c1.get_task(req).await.unwrap_err();
    assert_a2a_error(&err, Code::FailedPrecondition, "VERSION_NOT_SUPPORTED");
}

#[tokio::test]
async fn owners_stay_apart_over_0_3() {
    let gw = TestGateway::with_config(AUTH).await;
    let (mut c, _) = clients(&gw).await;
    let anonymous = c.send_message(text("x")).await.unwrap_err();
    assert_eq!(anonymous.code(), Code::Unauthenticated, "{anonymous:?}");
    let id = task_of(
        c.send_message(as_key("alice-key", text("x")))
            .await
            .unwrap()
            .into_inner(),
    )
    .id;
    let get = || GetTaskRequest {
        name: named(&id),
        history_length: 0,
    };
    c.get_task(as_key("alice-key", get())).await.unwrap();
    let err = c.get_task(as_key("bob-key", get())).await.unwrap_err();
    assert_a2a_error(&err, Code::NotFound, "TASK_NOT_FOUND");
    // An authenticated caller's GetAgentCard is the extended card.
    let card = c
        .get_agent_card(as_key("bob-key", GetAgentCardRequest {}))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(card.description, "the extended card");
    assert!(card.supports_authenticated_extended_card);
}

const AUTH: &str = r#"
[auth]
requirements = [{ key = [] }]

[auth.schemes.key]
scheme = { apiKeySecurityScheme = { location = "header", name = "X-API-Key" } }
keys = [{ id = "alice", key = "alice-key" }, { id = "bob", key = "bob-key" }]

[extended_card]
description = "the extended card"
"#;

#[tokio::test]
async fn task_subscription_resumes_after_an_event_id() {
    let gw = TestGateway::start().await;
    let (mut c, _) = clients(&gw).await;
    let stream = c
        .send_streaming_message(script(json!({"chunks": 3, "delayMs": 5}), true))
        .await
        .unwrap()
        .into_inner();
    let events = drain(stream).await;
    let Some(stream_response::Payload::Task(t)) = events.first() else {
        panic!("the task first");
    };
    // Event 1 is the task as created; the stream's events are consecutive after it.
    let last = events.len();
    let mut resume = Request::new(TaskSubscriptionRequest { name: named(&t.id) });
    resume
        .metadata_mut()
        .insert("a2a-last-event-id", (last - 2).to_string().parse().unwrap());
    let replayed = drain(c.task_subscription(resume).await.unwrap().into_inner()).await;
    let labels: Vec<_> = replayed.iter().map(label).collect();
    assert_eq!(labels, ["artifact", "TASK_STATE_COMPLETED final"]);
}

#[tokio::test]
async fn a_retried_send_with_the_same_idempotency_key_gets_the_first_task() {
    let gw = TestGateway::start().await;
    let (mut c, _) = clients(&gw).await;
    let request = SendMessageRequest {
        configuration: Some(SendMessageConfiguration {
            blocking: true,
            ..Default::default()
        }),
        ..text("once")
    };
    let keyed = |r: SendMessageRequest| {
        let mut r = Request::new(r);
        r.metadata_mut()
            .insert("idempotency-key", "grpc03-retry-1".parse().unwrap());
        r
    };
    let first = task_of(
        c.send_message(keyed(request.clone()))
            .await
            .unwrap()
            .into_inner(),
    );
    let again = task_of(
        c.send_message(keyed(request.clone()))
            .await
            .unwrap()
            .into_inner(),
    );
    assert_eq!(first.id, again.id);
    let other = SendMessageRequest {
        request: text("another").request,
        ..request
    };
    let err = c.send_message(keyed(other)).await.unwrap_err();
    assert_a2a_error(&err, Code::InvalidArgument, "IDEMPOTENCY_KEY_REUSED");
}
