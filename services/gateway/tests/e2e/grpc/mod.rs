//! The gRPC binding on the shared listener, through the generated tonic client: the RPCs
//! (`operations`), and errors, service parameters, limits, shutdown, health, reflection and a
//! malformed frame (`protocol`).

mod operations;
mod protocol;

use std::time::Duration;

use a2a_types::v1::a2a_service_client::A2aServiceClient;
use a2a_types::v1::{
    CancelTaskRequest, DeleteTaskPushNotificationConfigRequest,
    GetTaskPushNotificationConfigRequest, GetTaskRequest, ListTaskPushNotificationConfigsRequest,
    ListTasksRequest, Message, Part, Role, SendMessageConfiguration, SendMessageRequest,
    StreamResponse, SubscribeToTaskRequest, Task, TaskPushNotificationConfig, TaskState, part,
    send_message_response, stream_response,
};
use serde_json::json;
use tonic::transport::Channel;
use tonic::{Code, Request, Status, Streaming};
use tonic_types::StatusExt;

use crate::harness::TestGateway;

/// A plaintext HTTP/2 channel to the gateway's one listener.
async fn channel(gw: &TestGateway) -> Channel {
    Channel::from_shared(format!("http://{}", gw.addr))
        .unwrap()
        .connect()
        .await
        .expect("gRPC connects to the HTTP listener (h2c)")
}

async fn client(gw: &TestGateway) -> A2aServiceClient<Channel> {
    A2aServiceClient::new(channel(gw).await)
}

/// A request with `a2a-version: 1.0`, as every 1.0 client sends it.
fn req<T>(message: T) -> Request<T> {
    let mut r = Request::new(message);
    r.metadata_mut()
        .insert("a2a-version", "1.0".parse().unwrap());
    r
}

fn message(parts: Vec<part::Content>) -> Message {
    Message {
        message_id: uuid::Uuid::new_v4().to_string(),
        role: Role::User as i32,
        parts: parts
            .into_iter()
            .map(|c| Part {
                content: Some(c),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }
}

fn text(t: &str) -> SendMessageRequest {
    SendMessageRequest {
        message: Some(message(vec![part::Content::Text(t.into())])),
        ..Default::default()
    }
}

/// A message to the scenario agent; the script travels as a data part.
fn script(script: serde_json::Value, return_immediately: bool) -> SendMessageRequest {
    SendMessageRequest {
        tenant: "scenario".into(),
        message: Some(message(vec![
            part::Content::Text("run".into()),
            part::Content::Data(script.into()),
        ])),
        configuration: Some(SendMessageConfiguration {
            return_immediately,
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn task_of(resp: a2a_types::v1::SendMessageResponse) -> Task {
    match resp.payload {
        Some(send_message_response::Payload::Task(t)) => t,
        other => panic!("expected a task, got {other:?}"),
    }
}

fn state(task: &Task) -> TaskState {
    TaskState::try_from(task.status.as_ref().unwrap().state).unwrap()
}

/// Every event until the server ends the stream with OK.
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

fn label(p: &stream_response::Payload) -> String {
    use stream_response::Payload::*;
    match p {
        Task(_) => "task".into(),
        Message(_) => "message".into(),
        ArtifactUpdate(_) => "artifact".into(),
        StatusUpdate(s) => TaskState::try_from(s.status.as_ref().unwrap().state)
            .unwrap()
            .as_str_name()
            .into(),
    }
}

/// Asserts the rich status: the code, and an A2A ErrorInfo with `reason`.
fn assert_a2a_error(status: &Status, code: Code, reason: &str) -> tonic_types::ErrorInfo {
    assert_eq!(status.code(), code, "{status:?}");
    let info = status
        .get_details_error_info()
        .unwrap_or_else(|| panic!("an ErrorInfo detail: {status:?}"));
    assert_eq!(info.domain, "a2a-protocol.org");
    assert_eq!(info.reason, reason);
    info
}
