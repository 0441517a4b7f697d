//! No poison input: NaN and ±Infinity (legal in a protobuf `Value`, which gRPC carries) are
//! refused on every binding and dialect before anything computes with them (the idempotency
//! fingerprint included), so no task holds what JSON readers cannot print; and a panic in a
//! request's handler or in a task's runner is answered cleanly, leaving no task stuck.

use std::time::Duration;

use a2a_types::v1::a2a_service_client::A2aServiceClient;
use a2a_types::v1::{
    CancelTaskRequest, Message, Part, Role, SendMessageRequest, part, send_message_response,
};
use a2a_types::v03_grpc::proto as v03;
use a2a_types::wkt::{Struct, Value};
use serde_json::json;
use tonic::transport::Channel;
use tonic::{Code, Request};
use tonic_types::StatusExt;

use crate::harness::{TestGateway, state};

async fn channel(gw: &TestGateway) -> Channel {
    Channel::from_shared(format!("http://{}", gw.addr))
        .unwrap()
        .connect()
        .await
        .unwrap()
}

fn nan_struct(key: &str, x: f64) -> Struct {
    [(key.to_owned(), Value::from(x))].into_iter().collect()
}

fn text_part(t: &str) -> Part {
    Part {
        content: Some(part::Content::Text(t.into())),
        ..Default::default()
    }
}

fn send(parts: Vec<Part>, metadata: Option<Struct>) -> SendMessageRequest {
    SendMessageRequest {
        message: Some(Message {
            message_id: uuid::Uuid::new_v4().to_string(),
            role: Role::User as i32,
            parts,
            metadata,
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// INVALID_ARGUMENT with a BadRequest naming `field`.
fn assert_refused(status: &tonic::Status, field: &str) {
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    let bad = status
        .get_details_bad_request()
        .unwrap_or_else(|| panic!("a BadRequest detail: {status:?}"));
    assert_eq!(bad.field_violations[0].field, field, "{status:?}");
    assert!(
        bad.field_violations[0].description.contains("NaN"),
        "{status:?}"
    );
}

#[tokio::test]
async fn non_finite_numbers_are_refused_over_grpc_1_0() {
    let gw = TestGateway::start().await;
    let mut client = A2aServiceClient::new(channel(&gw).await);
    let cases = [
        (
            send(vec![text_part("hi")], Some(nan_struct("x", f64::NAN))),
            "message.metadata.x",
        ),
        (
            send(
                vec![
                    text_part("hi"),
                    Part {
                        content: Some(part::Content::Data(
                            vec![Value::from(1.0), Value::from(f64::INFINITY)].into(),
                        )),
                        ..Default::default()
                    },
                ],
                None,
            ),
            "message.parts[1].data[1]",
        ),
        (
            send(
                vec![Part {
                    metadata: Some(nan_struct("p", f64::NEG_INFINITY)),
                    ..text_part("hi")
                }],
                None,
            ),
            "message.parts[0].metadata.p",
        ),
        (
            SendMessageRequest {
                metadata: Some(nan_struct("m", f64::NAN)),
                ..send(vec![text_part("hi")], None)
            },
            "metadata.m",
        ),
    ];
    for (req, field) in cases {
        // Unkeyed, keyed (the fingerprint once panicked on it), and streaming.
        let err = client
            .send_message(Request::new(req.clone()))
            .await
            .unwrap_err();
        assert_refused(&err, field);
        let mut keyed = Request::new(req.clone());
        keyed
            .metadata_mut()
            .insert("idempotency-key", "poison-1".parse().unwrap());
        let err = client.send_message(keyed).await.unwrap_err();
        assert_refused(&err, field);
        let err = client
            .send_streaming_message(Request::new(req))
            .await
            .unwrap_err();
        assert_refused(&err, field);
    }
    let err = client
        .cancel_task(Request::new(CancelTaskRequest {
            id: "t".into(),
            metadata: Some(nan_struct("c", f64::NAN)),
            ..Default::default()
        }))
        .await
        .unwrap_err();
    assert_refused(&err, "metadata.c");
    assert_eq!(gw.task_count().await, 0, "nothing was stored");
    // The gateway still answers, and a finite send goes through.
    let ok = client
        .send_message(Request::new(send(
            vec![text_part("hi")],
            Some(nan_struct("x", 1.5)),
        )))
        .await
        .unwrap()
        .into_inner();
    assert!(matches!(
        ok.payload,
        Some(send_message_response::Payload::Task(_))
    ));
    gw.stop().await;
}

#[tokio::test]
async fn non_finite_numbers_are_refused_over_grpc_0_3() {
    let gw = TestGateway::start().await;
    let mut client = v03::a2a_service_client::A2aServiceClient::new(channel(&gw).await);
    let object = |k: &str, x: f64| nan_struct(k, x);
    let message = |parts: Vec<v03::part::Part>, metadata: Option<Struct>| v03::Message {
        message_id: uuid::Uuid::new_v4().to_string(),
        role: v03::Role::User as i32,
        content: parts
            .into_iter()
            .map(|p| v03::Part {
                part: Some(p),
                metadata: None,
            })
            .collect(),
        metadata,
        ..Default::default()
    };
    let cases = [
        (
            v03::SendMessageRequest {
                request: Some(message(
                    vec![v03::part::Part::Text("hi".into())],
                    Some(object("x", f64::NAN)),
                )),
                ..Default::default()
            },
            "message.metadata.x",
        ),
        (
            v03::SendMessageRequest {
                request: Some(message(
                    vec![
                        v03::part::Part::Text("hi".into()),
                        v03::part::Part::Data(v03::DataPart {
                            data: Some(object("d", f64::INFINITY)),
                        }),
                    ],
                    None,
                )),
                // The review's trigger: with an inline push config.
                configuration: Some(v03::SendMessageConfiguration {
                    push_notification: Some(v03::PushNotificationConfig {
                        url: "https://hooks.example.com/a2a".into(),
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
                ..Default::default()
            },
            "message.parts[1].data.d",
        ),
    ];
    for (req, field) in cases {
        let err = client
            .send_message(Request::new(req.clone()))
            .await
            .unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");
        assert!(err.message().contains(field), "{field}: {err:?}");
        let mut keyed = Request::new(req);
        keyed
            .metadata_mut()
            .insert("idempotency-key", "poison-03".parse().unwrap());
        let err = client.send_message(keyed).await.unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");
    }
    assert_eq!(gw.task_count().await, 0, "nothing was stored");
    gw.stop().await;
}

/// JSON cannot say NaN or Infinity; what comes closest (`NaN`, `1e999`) is refused as a
/// malformed request on JSON-RPC and HTTP+JSON, and nothing is stored.
#[tokio::test]
async fn json_bindings_cannot_carry_non_finite_numbers() {
    let gw = TestGateway::start().await;
    for number in ["NaN", "Infinity", "1e999", "-1e999"] {
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{{"message":{{"messageId":"m","role":"ROLE_USER","parts":[{{"text":"hi"}}],"metadata":{{"x":{number}}}}}}}}}"#
        );
        let resp: serde_json::Value = gw.post_raw(body).await.json().await.unwrap();
        let code = resp["error"]["code"].as_i64().unwrap_or(0);
        assert!(matches!(code, -32700 | -32602), "{number}: {resp}");
        let rest = gw
            .client
            .post(gw.url("/a2a/rest/message:send"))
            .header("content-type", "application/json")
            .body(format!(
                r#"{{"message":{{"messageId":"m","role":"ROLE_USER","parts":[{{"data":{number}}}]}}}}"#
            ))
            .send()
            .await
            .unwrap();
        assert_eq!(rest.status(), 400, "{number}");
    }
    assert_eq!(gw.task_count().await, 0);
    gw.stop().await;
}

fn panic_metadata(place: &str) -> Struct {
    [("a2a-test-panic".to_owned(), Value::from(place))]
        .into_iter()
        .collect()
}

/// A panic in a handler is an internal error in each binding's format; the gateway serves on.
#[tokio::test]
async fn a_panic_in_a_handler_is_a_clean_internal_error() {
    let gw = TestGateway::start().await;
    let mut client = A2aServiceClient::new(channel(&gw).await);
    let err = client
        .send_message(Request::new(send(
            vec![text_part("hi")],
            Some(panic_metadata("request")),
        )))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Internal, "{err:?}");
    assert!(!err.message().contains("test panic"), "not echoed: {err:?}");
    let rpc = gw
        .rpc(
            "SendMessage",
            json!({"message": {"messageId": "m", "role": "ROLE_USER",
                "parts": [{"text": "hi"}], "metadata": {"a2a-test-panic": "request"}}}),
        )
        .await;
    assert_eq!(rpc["error"]["code"], -32603, "{rpc}");
    let rest = gw
        .client
        .post(gw.url("/a2a/rest/message:send"))
        .json(&json!({"message": {"messageId": "m", "role": "ROLE_USER",
            "parts": [{"text": "hi"}], "metadata": {"a2a-test-panic": "request"}}}))
        .send()
        .await
        .unwrap();
    assert_eq!(rest.status(), 500);
    let body: serde_json::Value = rest.json().await.unwrap();
    assert_eq!(body["error"]["status"], "INTERNAL", "{body}");
    // The same HTTP/2 connection still serves.
    let ok = client
        .send_message(Request::new(send(vec![text_part("hi")], None)))
        .await;
    assert!(ok.is_ok(), "{ok:?}");
    gw.stop().await;
}

/// A panic in a task's runner fails the task (never left WORKING, claimed for good): it is
/// readable, FAILED, and the next task runs.
#[tokio::test]
async fn a_panic_in_a_task_runner_fails_the_task() {
    let gw = TestGateway::start().await;
    let sent = gw
        .ok(
            "SendMessage",
            json!({"tenant": "scenario", "message": {"messageId": "m", "role": "ROLE_USER",
                "parts": [{"data": {"chunks": 3, "delayMs": 50}}],
                "metadata": {"a2a-test-panic": "turn"}},
                "configuration": {"returnImmediately": true}}),
        )
        .await;
    let id = sent["task"]["id"].as_str().unwrap().to_owned();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let task = loop {
        let got = gw.ok("GetTask", json!({"id": id})).await;
        if state(&got) == "TASK_STATE_FAILED" || tokio::time::Instant::now() > deadline {
            break got;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(state(&task), "TASK_STATE_FAILED", "{task}");
    let said = task["status"]["message"]["parts"][0]["text"]
        .as_str()
        .unwrap_or("");
    assert!(said.contains("internal error"), "{task}");
    assert!(!said.contains("test panic"), "{task}");
    let next = gw.send_text("still here").await;
    assert_eq!(state(&next), "TASK_STATE_COMPLETED", "{next}");
    gw.stop().await;
}

/// A real gRPC upstream whose answers carry NaN in an artifact's data part (what a buggy or
/// hostile agent can send: protobuf carries it).
struct NanUpstream;

#[tonic::async_trait]
impl a2a_types::v1::a2a_service_server::A2aService for NanUpstream {
    async fn send_message(
        &self,
        _: Request<SendMessageRequest>,
    ) -> Result<tonic::Response<a2a_types::v1::SendMessageResponse>, tonic::Status> {
        use a2a_types::v1::{Artifact, Task, TaskState, TaskStatus};
        let task = Task {
            id: "up-1".into(),
            context_id: "ctx-1".into(),
            status: Some(TaskStatus {
                state: TaskState::Completed as i32,
                ..Default::default()
            }),
            artifacts: vec![Artifact {
                artifact_id: "a".into(),
                parts: vec![Part {
                    content: Some(part::Content::Data(Value::from(nan_struct("x", f64::NAN)))),
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        };
        Ok(tonic::Response::new(a2a_types::v1::SendMessageResponse {
            payload: Some(send_message_response::Payload::Task(task)),
        }))
    }
    type SendStreamingMessageStream =
        futures::stream::BoxStream<'static, Result<a2a_types::v1::StreamResponse, tonic::Status>>;
    async fn send_streaming_message(
        &self,
        _: Request<SendMessageRequest>,
    ) -> Result<tonic::Response<Self::SendStreamingMessageStream>, tonic::Status> {
        Err(tonic::Status::unimplemented("no streaming"))
    }
    async fn get_task(
        &self,
        r: Request<a2a_types::v1::GetTaskRequest>,
    ) -> Result<tonic::Response<a2a_types::v1::Task>, tonic::Status> {
        Err(a2a_types::A2aError::task_not_found(&r.into_inner().id).into())
    }
    async fn list_tasks(
        &self,
        _: Request<a2a_types::v1::ListTasksRequest>,
    ) -> Result<tonic::Response<a2a_types::v1::ListTasksResponse>, tonic::Status> {
        Err(tonic::Status::unimplemented(""))
    }
    async fn cancel_task(
        &self,
        _: Request<CancelTaskRequest>,
    ) -> Result<tonic::Response<a2a_types::v1::Task>, tonic::Status> {
        Err(tonic::Status::unimplemented(""))
    }
    type SubscribeToTaskStream =
        futures::stream::BoxStream<'static, Result<a2a_types::v1::StreamResponse, tonic::Status>>;
    async fn subscribe_to_task(
        &self,
        _: Request<a2a_types::v1::SubscribeToTaskRequest>,
    ) -> Result<tonic::Response<Self::SubscribeToTaskStream>, tonic::Status> {
        Err(tonic::Status::unimplemented(""))
    }
    async fn create_task_push_notification_config(
        &self,
        _: Request<a2a_types::v1::TaskPushNotificationConfig>,
    ) -> Result<tonic::Response<a2a_types::v1::TaskPushNotificationConfig>, tonic::Status> {
        Err(tonic::Status::unimplemented(""))
    }
    async fn get_task_push_notification_config(
        &self,
        _: Request<a2a_types::v1::GetTaskPushNotificationConfigRequest>,
    ) -> Result<tonic::Response<a2a_types::v1::TaskPushNotificationConfig>, tonic::Status> {
        Err(tonic::Status::unimplemented(""))
    }
    async fn list_task_push_notification_configs(
        &self,
        _: Request<a2a_types::v1::ListTaskPushNotificationConfigsRequest>,
    ) -> Result<
        tonic::Response<a2a_types::v1::ListTaskPushNotificationConfigsResponse>,
        tonic::Status,
    > {
        Err(tonic::Status::unimplemented(""))
    }
    async fn get_extended_agent_card(
        &self,
        _: Request<a2a_types::v1::GetExtendedAgentCardRequest>,
    ) -> Result<tonic::Response<a2a_types::v1::AgentCard>, tonic::Status> {
        Err(tonic::Status::unimplemented(""))
    }
    async fn delete_task_push_notification_config(
        &self,
        _: Request<a2a_types::v1::DeleteTaskPushNotificationConfigRequest>,
    ) -> Result<tonic::Response<pbjson_types::Empty>, tonic::Status> {
        Err(tonic::Status::unimplemented(""))
    }
}

/// An upstream's NaN never reaches the ledger: the turn fails saying where, and the task is
/// FAILED and readable on every binding (before, it was stored and JSON readers got -32603).
#[tokio::test]
async fn an_upstream_event_with_nan_fails_the_turn_and_the_task_stays_readable() {
    let grpc = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let grpc_addr = grpc.local_addr().unwrap();
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(a2a_types::v1::a2a_service_server::A2aServiceServer::new(
                NanUpstream,
            ))
            .serve_with_incoming(tonic::transport::server::TcpIncoming::from(grpc)),
    );
    let card_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let card_url = format!("http://{}", card_listener.local_addr().unwrap());
    let card = json!({
        "name": "nan", "description": "sends NaN", "version": "1",
        "supportedInterfaces": [{"url": format!("http://{grpc_addr}"),
            "protocolBinding": "GRPC", "protocolVersion": "1.0"}],
        "capabilities": {}, "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"], "skills": [],
    });
    let app = axum::Router::new().route(
        "/.well-known/agent-card.json",
        axum::routing::get(move || {
            let card = card.clone();
            async move { axum::Json(card) }
        }),
    );
    tokio::spawn(async move { axum::serve(card_listener, app).await });
    let gw = TestGateway::with_config(&format!(
        "[[agents]]\nname = \"up\"\ncard_url = \"{card_url}\"\nbindings = [\"GRPC\"]\n\
         health_interval_secs = 1\n"
    ))
    .await;
    let resp = gw
        .rpc(
            "SendMessage",
            json!({"tenant": "up", "message": {"messageId": "m", "role": "ROLE_USER",
                "parts": [{"text": "hi"}]}}),
        )
        .await;
    // Either the caller is told at once (the task did not exist yet), or the task is FAILED,
    // saying where the NaN was; in both cases every task is readable.
    let text = resp.to_string();
    assert!(text.contains("artifact.parts[0].data.x"), "{resp}");
    if let Some(task) = resp["result"].get("task") {
        assert_eq!(state(task), "TASK_STATE_FAILED", "{resp}");
        let id = task["id"].as_str().unwrap();
        let got = gw.ok("GetTask", json!({"id": id})).await;
        assert_eq!(state(&got), "TASK_STATE_FAILED", "{got}");
        let rest = gw
            .client
            .get(gw.url(&format!("/a2a/rest/tasks/{id}")))
            .send()
            .await
            .unwrap();
        assert_eq!(rest.status(), 200);
    }
    let listed = gw.ok("ListTasks", json!({})).await;
    assert!(listed["tasks"].is_array(), "{listed}");
    gw.stop().await;
}
