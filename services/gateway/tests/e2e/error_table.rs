//! Every error path of the method table (`shared/a2a/method-table.md`, the 1.0.1 columns), as one
//! table: operation × error, each row run on the three bindings in both dialects (JSON-RPC 1.0
//! and 0.3 methods, HTTP+JSON 1.0 and `/v1/` paths, gRPC `lf.a2a.v1` and `a2a.v1`), each answer
//! checked for its binding's code (JSON-RPC code, HTTP status and `google.rpc.Status` status,
//! gRPC code) and the ErrorInfo reason. A cell a dialect lacks (0.3 has no VersionNotSupported, no
//! ListTasks; 0.3 gRPC's GetAgentCard never fails) is `None`.

use a2a_types::v1::a2a_service_client::A2aServiceClient as V1Client;
use a2a_types::v03_grpc::proto as p03;
use a2a_types::v03_grpc::proto::a2a_service_client::A2aServiceClient as V03Client;
use reqwest::Method;
use serde_json::{Value, json};
use tonic::transport::Channel;
use tonic::{Code, Request};
use tonic_types::StatusExt;

use crate::harness::TestGateway;

/// One error, as each binding writes it.
#[derive(Debug, Clone, Copy)]
struct Want {
    json_rpc: i64,
    http: u16,
    grpc: Code,
    /// `ErrorInfo.reason`; `None` where the binding's own layer answers (gRPC UNIMPLEMENTED).
    reason: &'static str,
}

const TASK_NOT_FOUND: Want = Want {
    json_rpc: -32001,
    http: 404,
    grpc: Code::NotFound,
    reason: "TASK_NOT_FOUND",
};
const NOT_CANCELABLE: Want = Want {
    json_rpc: -32002,
    http: 400,
    grpc: Code::FailedPrecondition,
    reason: "TASK_NOT_CANCELABLE",
};
const PUSH_NOT_SUPPORTED: Want = Want {
    json_rpc: -32003,
    http: 400,
    grpc: Code::FailedPrecondition,
    reason: "PUSH_NOTIFICATION_NOT_SUPPORTED",
};
const UNSUPPORTED: Want = Want {
    json_rpc: -32004,
    http: 400,
    grpc: Code::FailedPrecondition,
    reason: "UNSUPPORTED_OPERATION",
};
const CARD_NOT_CONFIGURED: Want = Want {
    json_rpc: -32007,
    http: 400,
    grpc: Code::FailedPrecondition,
    reason: "EXTENDED_AGENT_CARD_NOT_CONFIGURED",
};
const VERSION: Want = Want {
    json_rpc: -32009,
    http: 400,
    grpc: Code::FailedPrecondition,
    reason: "VERSION_NOT_SUPPORTED",
};
const INVALID_PARAMS: Want = Want {
    json_rpc: -32602,
    http: 400,
    grpc: Code::InvalidArgument,
    reason: "INVALID_PARAMS",
};
const METHOD_NOT_FOUND: Want = Want {
    json_rpc: -32601,
    http: 404,
    grpc: Code::Unimplemented,
    reason: "METHOD_NOT_FOUND",
};

/// A gRPC call of a row (the same operation on `lf.a2a.v1` and, where 0.3 has it, `a2a.v1`).
#[derive(Debug, Clone)]
enum Grpc {
    GetTask { id: String, history: i32 },
    CancelTask(String),
    GetPush { task: String, id: String },
    SendTo(String),
    ExtendedCard,
}

/// One row: an operation and the error it must answer, and how each binding and dialect asks.
struct Row {
    what: &'static str,
    want: Want,
    /// 0.3's answer where it differs from 1.0's.
    want03: Option<Want>,
    /// `A2A-Version` of the 1.0 calls (`1.0`, or an unsupported one).
    version: &'static str,
    rpc: Option<(&'static str, Value)>,
    rpc03: Option<(&'static str, Value)>,
    rest: Option<(Method, String, Option<Value>)>,
    rest03: Option<(Method, String, Option<Value>)>,
    grpc: Option<Grpc>,
    grpc03: Option<Grpc>,
}

impl Row {
    fn new(what: &'static str, want: Want) -> Self {
        Self {
            what,
            want,
            want03: None,
            version: "1.0",
            rpc: None,
            rpc03: None,
            rest: None,
            rest03: None,
            grpc: None,
            grpc03: None,
        }
    }
}

fn message10(task: Option<&str>) -> Value {
    let mut m = json!({"messageId": uuid::Uuid::new_v4().to_string(), "role": "ROLE_USER",
                       "parts": [{"text": "x"}]});
    if let Some(t) = task {
        m["taskId"] = json!(t);
    }
    m
}

fn message03(task: Option<&str>) -> Value {
    let mut m = json!({"kind": "message", "messageId": uuid::Uuid::new_v4().to_string(),
                       "role": "user", "parts": [{"kind": "text", "text": "x"}]});
    if let Some(t) = task {
        m["taskId"] = json!(t);
    }
    m
}

fn proto03(task: Option<&str>) -> Value {
    let mut m = json!({"messageId": uuid::Uuid::new_v4().to_string(), "role": "ROLE_USER",
                       "content": [{"text": "x"}]});
    if let Some(t) = task {
        m["taskId"] = json!(t);
    }
    m
}

/// The rows of one gateway: `done` is a completed task of the anonymous caller.
fn rows(done: &str) -> Vec<Row> {
    let nope = "no-such-task";
    let mut rows = Vec::new();

    let mut r = Row::new("GetTask of an unknown task", TASK_NOT_FOUND);
    r.rpc = Some(("GetTask", json!({"id": nope})));
    r.rpc03 = Some(("tasks/get", json!({"id": nope})));
    r.rest = Some((Method::GET, format!("/tasks/{nope}"), None));
    r.rest03 = Some((Method::GET, format!("/v1/tasks/{nope}"), None));
    r.grpc = Some(Grpc::GetTask {
        id: nope.into(),
        history: 0,
    });
    r.grpc03 = r.grpc.clone();
    rows.push(r);

    let mut r = Row::new("CancelTask of an unknown task", TASK_NOT_FOUND);
    r.rpc = Some(("CancelTask", json!({"id": nope})));
    r.rpc03 = Some(("tasks/cancel", json!({"id": nope})));
    r.rest = Some((
        Method::POST,
        format!("/tasks/{nope}:cancel"),
        Some(json!({})),
    ));
    r.rest03 = Some((Method::POST, format!("/v1/tasks/{nope}:cancel"), None));
    r.grpc = Some(Grpc::CancelTask(nope.into()));
    r.grpc03 = r.grpc.clone();
    rows.push(r);

    let mut r = Row::new("a push config of an unknown task", TASK_NOT_FOUND);
    r.rpc = Some((
        "GetTaskPushNotificationConfig",
        json!({"taskId": nope, "id": "c"}),
    ));
    r.rpc03 = Some((
        "tasks/pushNotificationConfig/get",
        json!({"id": nope, "pushNotificationConfigId": "c"}),
    ));
    r.rest = Some((
        Method::GET,
        format!("/tasks/{nope}/pushNotificationConfigs/c"),
        None,
    ));
    r.rest03 = Some((
        Method::GET,
        format!("/v1/tasks/{nope}/pushNotificationConfigs/c"),
        None,
    ));
    r.grpc = Some(Grpc::GetPush {
        task: nope.into(),
        id: "c".into(),
    });
    r.grpc03 = r.grpc.clone();
    rows.push(r);

    let mut r = Row::new("a message to an unknown task", TASK_NOT_FOUND);
    r.rpc = Some(("SendMessage", json!({"message": message10(Some(nope))})));
    r.rpc03 = Some(("message/send", json!({"message": message03(Some(nope))})));
    r.rest = Some((
        Method::POST,
        "/message:send".into(),
        Some(json!({"message": message10(Some(nope))})),
    ));
    r.rest03 = Some((
        Method::POST,
        "/v1/message:send".into(),
        Some(json!({"message": proto03(Some(nope))})),
    ));
    r.grpc = Some(Grpc::SendTo(nope.into()));
    r.grpc03 = r.grpc.clone();
    rows.push(r);

    let mut r = Row::new("CancelTask of a completed task", NOT_CANCELABLE);
    r.rpc = Some(("CancelTask", json!({"id": done})));
    r.rpc03 = Some(("tasks/cancel", json!({"id": done})));
    r.rest = Some((
        Method::POST,
        format!("/tasks/{done}:cancel"),
        Some(json!({})),
    ));
    r.rest03 = Some((Method::POST, format!("/v1/tasks/{done}:cancel"), None));
    r.grpc = Some(Grpc::CancelTask(done.into()));
    r.grpc03 = r.grpc.clone();
    rows.push(r);

    let mut r = Row::new("a message to a completed task", UNSUPPORTED);
    r.rpc = Some(("SendMessage", json!({"message": message10(Some(done))})));
    r.rpc03 = Some(("message/send", json!({"message": message03(Some(done))})));
    r.rest = Some((
        Method::POST,
        "/message:send".into(),
        Some(json!({"message": message10(Some(done))})),
    ));
    r.rest03 = Some((
        Method::POST,
        "/v1/message:send".into(),
        Some(json!({"message": proto03(Some(done))})),
    ));
    r.grpc = Some(Grpc::SendTo(done.into()));
    r.grpc03 = r.grpc.clone();
    rows.push(r);

    let mut r = Row::new("GetTask with a negative historyLength", INVALID_PARAMS);
    r.rpc = Some(("GetTask", json!({"id": done, "historyLength": -1})));
    r.rpc03 = Some(("tasks/get", json!({"id": done, "historyLength": -1})));
    r.rest = Some((Method::GET, format!("/tasks/{done}?historyLength=-1"), None));
    r.rest03 = Some((
        Method::GET,
        format!("/v1/tasks/{done}?historyLength=-1"),
        None,
    ));
    r.grpc = Some(Grpc::GetTask {
        id: done.into(),
        history: -1,
    });
    r.grpc03 = r.grpc.clone();
    rows.push(r);

    let mut r = Row::new("SendMessage without a message", INVALID_PARAMS);
    r.rpc = Some(("SendMessage", json!({})));
    r.rpc03 = Some(("message/send", json!({})));
    r.rest = Some((Method::POST, "/message:send".into(), Some(json!({}))));
    r.rest03 = Some((Method::POST, "/v1/message:send".into(), Some(json!({}))));
    rows.push(r);

    // Without [auth], no extended card: 1.0 says the operation is unsupported (the capability
    // is false), 0.3 AuthenticatedExtendedCardNotConfigured; 0.3 gRPC answers the public card.
    let mut r = Row::new("the extended card without [auth]", UNSUPPORTED);
    r.want03 = Some(CARD_NOT_CONFIGURED);
    r.rpc = Some(("GetExtendedAgentCard", json!({})));
    r.rpc03 = Some(("agent/getAuthenticatedExtendedCard", Value::Null));
    r.rest = Some((Method::GET, "/extendedAgentCard".into(), None));
    r.rest03 = Some((Method::GET, "/v1/card".into(), None));
    r.grpc = Some(Grpc::ExtendedCard);
    rows.push(r);

    let mut r = Row::new("an unsupported A2A-Version", VERSION);
    r.version = "9.9";
    r.rpc = Some(("GetTask", json!({"id": done})));
    r.rest = Some((Method::GET, format!("/tasks/{done}"), None));
    r.grpc = Some(Grpc::GetTask {
        id: done.into(),
        history: 0,
    });
    rows.push(r);

    let mut r = Row::new("an unknown method", METHOD_NOT_FOUND);
    r.rpc = Some(("NoSuchMethod", json!({})));
    r.rpc03 = Some(("invalid/nonexistent/method", json!({})));
    r.rest = Some((Method::GET, "/no/such/path".into(), None));
    r.rest03 = Some((Method::GET, "/v1/no-such-path".into(), None));
    rows.push(r);

    rows
}

/// The push rows of a gateway with `[card] push_notifications = false`.
fn push_rows(done: &str) -> Vec<Row> {
    let mut r = Row::new("push configs when push is off", PUSH_NOT_SUPPORTED);
    r.rpc = Some((
        "GetTaskPushNotificationConfig",
        json!({"taskId": done, "id": "c"}),
    ));
    r.rpc03 = Some((
        "tasks/pushNotificationConfig/get",
        json!({"id": done, "pushNotificationConfigId": "c"}),
    ));
    r.rest = Some((
        Method::GET,
        format!("/tasks/{done}/pushNotificationConfigs/c"),
        None,
    ));
    r.rest03 = Some((
        Method::GET,
        format!("/v1/tasks/{done}/pushNotificationConfigs/c"),
        None,
    ));
    r.grpc = Some(Grpc::GetPush {
        task: done.into(),
        id: "c".into(),
    });
    r.grpc03 = r.grpc.clone();
    vec![r]
}

/// JSON-RPC: the code and the ErrorInfo reason (1.0: `data` is an array of `Any`; 0.3: one
/// object), always with HTTP 200.
async fn json_rpc(
    gw: &TestGateway,
    version: Option<&str>,
    method: &str,
    params: &Value,
) -> (i64, String) {
    let mut body = json!({"jsonrpc": "2.0", "id": 9, "method": method});
    if !params.is_null() {
        body["params"] = params.clone();
    }
    let mut req = gw.client.post(gw.url("/a2a/jsonrpc")).json(&body);
    if let Some(v) = version {
        req = req.header("a2a-version", v);
    }
    let resp = req.send().await.unwrap();
    assert_eq!(resp.status(), 200, "{method}");
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["id"], 9, "{v}");
    let e = &v["error"];
    let code = e["code"]
        .as_i64()
        .unwrap_or_else(|| panic!("{method}: {v}"));
    let reason = match &e["data"] {
        Value::Array(items) => items[0]["reason"].clone(),
        data => data["reason"].clone(),
    };
    (code, reason.as_str().unwrap_or_default().to_owned())
}

/// HTTP+JSON: the status, `error.status` and the ErrorInfo reason.
async fn rest(
    gw: &TestGateway,
    version: Option<&str>,
    method: &Method,
    path: &str,
    body: &Option<Value>,
) -> (u16, String, String) {
    let mut req = gw
        .client
        .request(method.clone(), gw.url(&format!("/a2a/rest{path}")));
    if let Some(v) = version {
        req = req.header("a2a-version", v);
    }
    if let Some(b) = body {
        req = req.json(b);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    let v: Value = resp.json().await.unwrap();
    let e = &v["error"];
    assert_eq!(e["code"], status, "{path}: {v}");
    (
        status,
        e["status"].as_str().unwrap_or_default().to_owned(),
        e["details"][0]["reason"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
    )
}

fn req<T>(m: T, version: Option<&str>) -> Request<T> {
    let mut r = Request::new(m);
    if let Some(v) = version {
        r.metadata_mut().insert("a2a-version", v.parse().unwrap());
    }
    r
}

fn v1<T: serde::de::DeserializeOwned>(v: Value) -> T {
    serde_json::from_value(v).unwrap()
}

async fn grpc_v1(ch: &Channel, version: &str, call: &Grpc) -> tonic::Status {
    let mut c = V1Client::new(ch.clone());
    let v = Some(version);
    let r = match call {
        Grpc::GetTask { id, history } => c
            .get_task(req(v1(json!({"id": id, "historyLength": history})), v))
            .await
            .map(|_| ()),
        Grpc::CancelTask(id) => c
            .cancel_task(req(v1(json!({"id": id})), v))
            .await
            .map(|_| ()),
        Grpc::GetPush { task, id } => c
            .get_task_push_notification_config(req(v1(json!({"taskId": task, "id": id})), v))
            .await
            .map(|_| ()),
        Grpc::SendTo(task) => c
            .send_message(req(v1(json!({"message": message10(Some(task))})), v))
            .await
            .map(|_| ()),
        Grpc::ExtendedCard => c
            .get_extended_agent_card(req(Default::default(), v))
            .await
            .map(|_| ()),
    };
    r.expect_err("an error")
}

async fn grpc_v03(ch: &Channel, call: &Grpc) -> tonic::Status {
    let mut c = V03Client::new(ch.clone());
    let r = match call {
        Grpc::GetTask { id, history } => c
            .get_task(req(
                p03::GetTaskRequest {
                    name: format!("tasks/{id}"),
                    history_length: *history,
                },
                None,
            ))
            .await
            .map(|_| ()),
        Grpc::CancelTask(id) => c
            .cancel_task(req(
                p03::CancelTaskRequest {
                    name: format!("tasks/{id}"),
                },
                None,
            ))
            .await
            .map(|_| ()),
        Grpc::GetPush { task, id } => c
            .get_task_push_notification_config(req(
                p03::GetTaskPushNotificationConfigRequest {
                    name: format!("tasks/{task}/pushNotificationConfigs/{id}"),
                },
                None,
            ))
            .await
            .map(|_| ()),
        Grpc::SendTo(task) => {
            let message = p03::Message {
                message_id: uuid::Uuid::new_v4().to_string(),
                task_id: task.clone(),
                role: p03::Role::User as i32,
                content: vec![p03::Part {
                    part: Some(p03::part::Part::Text("x".into())),
                    ..Default::default()
                }],
                ..Default::default()
            };
            c.send_message(req(
                p03::SendMessageRequest {
                    request: Some(message),
                    ..Default::default()
                },
                None,
            ))
            .await
            .map(|_| ())
        }
        Grpc::ExtendedCard => unreachable!("0.3 GetAgentCard answers the public card"),
    };
    r.expect_err("an error")
}

fn check_grpc(what: &str, status: &tonic::Status, want: Want) {
    assert_eq!(status.code(), want.grpc, "{what}: {status:?}");
    if want.grpc != Code::Unimplemented {
        let info = status
            .get_details_error_info()
            .unwrap_or_else(|| panic!("{what}: an ErrorInfo: {status:?}"));
        assert_eq!(info.reason, want.reason, "{what}");
        assert_eq!(info.domain, "a2a-protocol.org", "{what}");
    }
}

/// The gRPC status name `google.rpc.Status.status` carries in HTTP+JSON errors.
fn status_name(code: Code) -> &'static str {
    match code {
        Code::NotFound => "NOT_FOUND",
        Code::FailedPrecondition => "FAILED_PRECONDITION",
        Code::InvalidArgument => "INVALID_ARGUMENT",
        Code::Unimplemented => "UNIMPLEMENTED",
        other => panic!("{other:?}"),
    }
}

async fn run(gw: &TestGateway, rows: Vec<Row>) {
    let ch = Channel::from_shared(gw.url(""))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut checked = 0;
    for row in rows {
        let w = row.want;
        let w03 = row.want03.unwrap_or(w);
        let what = row.what;
        if let Some((method, params)) = &row.rpc {
            let got = json_rpc(gw, Some(row.version), method, params).await;
            assert_eq!(
                got,
                (w.json_rpc, w.reason.to_owned()),
                "{what}: JSON-RPC {method}"
            );
            checked += 1;
        }
        if let Some((method, params)) = &row.rpc03 {
            // 0.3 clients send no A2A-Version; `0.3` is the same dialect.
            for version in [None, Some("0.3")] {
                let got = json_rpc(gw, version, method, params).await;
                let want = (w03.json_rpc, w03.reason.to_owned());
                assert_eq!(got, want, "{what}: JSON-RPC {method} ({version:?})");
                checked += 1;
            }
        }
        if let Some((verb, path, body)) = &row.rest {
            let got = rest(gw, Some(row.version), verb, path, body).await;
            let http_status = status_name(w.grpc);
            // An unknown path is answered by the router: 404, reason METHOD_NOT_FOUND.
            let want = (w.http, http_status.to_owned(), w.reason.to_owned());
            if w.grpc == Code::Unimplemented {
                assert_eq!((got.0, &got.2), (w.http, &want.2), "{what}: {verb} {path}");
            } else {
                assert_eq!(got, want, "{what}: {verb} {path}");
            }
            checked += 1;
        }
        if let Some((verb, path, body)) = &row.rest03 {
            let got = rest(gw, None, verb, path, body).await;
            assert_eq!(got.0, w03.http, "{what}: 0.3 {verb} {path}: {got:?}");
            if w03.grpc != Code::Unimplemented {
                assert_eq!(got.1, status_name(w03.grpc), "{what}: 0.3 {verb} {path}");
            }
            assert_eq!(got.2, w03.reason, "{what}: 0.3 {verb} {path}");
            checked += 1;
        }
        if let Some(call) = &row.grpc {
            let status = grpc_v1(&ch, row.version, call).await;
            check_grpc(&format!("{what}: gRPC {call:?}"), &status, w);
            checked += 1;
        }
        if let Some(call) = &row.grpc03 {
            let status = grpc_v03(&ch, call).await;
            check_grpc(&format!("{what}: 0.3 gRPC {call:?}"), &status, w03);
            checked += 1;
        }
    }
    assert!(checked > 0);
}

#[tokio::test]
async fn every_error_on_every_binding_in_both_dialects() {
    let gw = TestGateway::with_config("[extended_card]\ndescription = \"never served\"\n").await;
    let done = gw.send_text("done").await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    run(&gw, rows(&done)).await;

    let gw = TestGateway::with_config("[card]\npush_notifications = false\n").await;
    let done = gw.send_text("done").await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    run(&gw, push_rows(&done)).await;

    // gRPC's own answer to a method no service has: UNIMPLEMENTED, on both packages.
    let ch = Channel::from_shared(gw.url(""))
        .unwrap()
        .connect()
        .await
        .unwrap();
    for path in [
        "/lf.a2a.v1.A2AService/NoSuchRpc",
        "/a2a.v1.A2AService/NoSuchRpc",
    ] {
        let mut grpc = tonic::client::Grpc::new(ch.clone());
        grpc.ready().await.unwrap();
        let codec = tonic_prost::ProstCodec::<(), ()>::default();
        let status = grpc
            .unary(
                Request::new(()),
                path.parse::<http::uri::PathAndQuery>().unwrap(),
                codec,
            )
            .await
            .unwrap_err();
        assert_eq!(status.code(), Code::Unimplemented, "{path}");
    }
}
