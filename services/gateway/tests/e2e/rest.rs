//! The HTTP+JSON (REST) binding under `/a2a/rest`: every endpoint, the `/{tenant}` prefix, SSE,
//! and the `google.rpc.Status` error shape.

use reqwest::Method;
use reqwest::header::HeaderMap;
use serde_json::{Value, json};

use crate::harness::*;

mod errors;

const INFO: &str = "type.googleapis.com/google.rpc.ErrorInfo";

struct Reply {
    status: u16,
    headers: HeaderMap,
    body: Value,
}

impl Reply {
    fn content_type(&self) -> &str {
        self.headers
            .get("content-type")
            .map(|v| v.to_str().unwrap())
            .unwrap_or_default()
    }
}

fn request(gw: &TestGateway, method: Method, path: &str) -> reqwest::RequestBuilder {
    gw.client
        .request(method, gw.url(&format!("/a2a/rest{path}")))
        .header("a2a-version", "1.0")
}

async fn read(resp: reqwest::Response) -> Reply {
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    let text = resp.text().await.unwrap();
    let body = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text:?}"));
    Reply {
        status,
        headers,
        body,
    }
}

/// A request with an optional JSON body (`Content-Type: application/json`).
async fn call(gw: &TestGateway, method: Method, path: &str, body: Option<Value>) -> Reply {
    let mut req = request(gw, method, path);
    if let Some(body) = body {
        req = req
            .header("content-type", "application/json")
            .body(body.to_string());
    }
    read(req.send().await.unwrap()).await
}

/// The body of a call that must succeed with HTTP 200 and `application/json`.
async fn ok(gw: &TestGateway, method: Method, path: &str, body: Option<Value>) -> Value {
    let r = call(gw, method.clone(), path, body).await;
    assert_eq!(r.status, 200, "{method} {path}: {}", r.body);
    assert_eq!(r.content_type(), "application/json");
    r.body
}

/// Checks the `google.rpc.Status` shape of an error reply and returns `error`.
fn status_error(r: &Reply, http: u16, status: &str, reason: &str) -> Value {
    assert_eq!(r.status, http, "{}", r.body);
    assert_eq!(
        r.content_type(),
        "application/json",
        "errors are application/json"
    );
    let top: Vec<_> = r.body.as_object().unwrap().keys().cloned().collect();
    assert_eq!(top, ["error"], "{}", r.body);
    let e = &r.body["error"];
    let keys: Vec<_> = e.as_object().unwrap().keys().cloned().collect();
    assert_eq!(keys, ["code", "details", "message", "status"], "{e}");
    assert_eq!(e["code"], http, "error.code is the HTTP status: {e}");
    assert_eq!(e["status"], status, "{e}");
    assert!(!e["message"].as_str().unwrap().is_empty());
    let info = &e["details"][0];
    assert_eq!(info["@type"], INFO, "{e}");
    assert_eq!(info["reason"], reason, "{e}");
    assert_eq!(info["domain"], "a2a-protocol.org", "{e}");
    e.clone()
}

async fn stream(gw: &TestGateway, method: Method, path: &str, body: Option<Value>) -> SseStream {
    let mut req = request(gw, method, path);
    if let Some(body) = body {
        req = req
            .header("content-type", "application/json")
            .body(body.to_string());
    }
    let resp = req.send().await.unwrap();
    assert_eq!(resp.status(), 200);
    let s = SseStream::new(resp);
    assert!(s.content_type.starts_with("text/event-stream"));
    s
}

/// The kind of each event, with status updates as their state.
fn kinds(events: &[SseEvent]) -> Vec<String> {
    events
        .iter()
        .map(|e| match kind(&e.data) {
            ("statusUpdate", v) => v["status"]["state"].as_str().unwrap().to_owned(),
            (k, _) => k.to_owned(),
        })
        .collect()
}

/// A scenario task that stays WORKING until canceled.
async fn hanging_task(gw: &TestGateway) -> String {
    let body = json!({"message": script_message(json!({"end": "hang"})),
                      "configuration": {"returnImmediately": true}});
    let r = ok(gw, Method::POST, "/scenario/message:send", Some(body)).await;
    r["task"]["id"].as_str().unwrap().to_owned()
}

async fn echo_task(gw: &TestGateway) -> Value {
    let body = json!({"message": user_message("hello")});
    ok(gw, Method::POST, "/message:send", Some(body)).await["task"].clone()
}

#[tokio::test]
async fn send_and_get_with_and_without_a_tenant() {
    let gw = TestGateway::start().await;
    let task = echo_task(&gw).await;
    assert_eq!(state(&task), "TASK_STATE_COMPLETED");
    assert_eq!(task["artifacts"][0]["parts"][0]["text"], "hello");
    let id = task["id"].as_str().unwrap();

    let got = ok(&gw, Method::GET, &format!("/tasks/{id}"), None).await;
    assert_eq!(got["id"], id);
    assert!(!got["history"].as_array().unwrap().is_empty());
    let trimmed = ok(
        &gw,
        Method::GET,
        &format!("/tasks/{id}?historyLength=0"),
        None,
    )
    .await;
    assert!(trimmed.get("history").is_none(), "{trimmed}");

    // The tenant segment routes to the scenario agent.
    let body = json!({"message": script_message(json!({"chunks": 2}))});
    let r = ok(&gw, Method::POST, "/scenario/message:send", Some(body)).await;
    assert_eq!(state(&r["task"]), "TASK_STATE_COMPLETED");
    assert_eq!(
        r["task"]["artifacts"][0]["parts"].as_array().unwrap().len(),
        2
    );
    let sid = r["task"]["id"].as_str().unwrap();
    let got = ok(&gw, Method::GET, &format!("/scenario/tasks/{sid}"), None).await;
    assert_eq!(got["id"], sid);

    let body = json!({"message": script_message(json!({"end": "message"}))});
    let r = ok(&gw, Method::POST, "/scenario/message:send", Some(body)).await;
    assert!(r.get("message").is_some() && r.get("task").is_none(), "{r}");

    // A tenant with no agent is an invalid `tenant`.
    let body = json!({"message": user_message("x")});
    let r = call(&gw, Method::POST, "/nobody/message:send", Some(body)).await;
    let e = status_error(&r, 400, "INVALID_ARGUMENT", "INVALID_PARAMS");
    assert_eq!(e["details"][0]["metadata"]["field"], "tenant");
}

#[tokio::test]
async fn streaming_in_order_then_close() {
    let gw = TestGateway::start().await;
    let body = json!({"message": script_message(json!({"chunks": 5, "delayMs": 5}))});
    let events = stream(&gw, Method::POST, "/scenario/message:stream", Some(body))
        .await
        .collect()
        .await;
    assert_eq!(
        kinds(&events),
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
    assert!(
        events
            .iter()
            .all(|e| e.data.get("jsonrpc").is_none() && e.event.is_none()),
        "bare StreamResponse objects"
    );
    let ids: Vec<u64> = events
        .iter()
        .map(|e| e.id.as_ref().unwrap().parse().unwrap())
        .collect();
    assert_eq!(ids, (1..=8).collect::<Vec<_>>(), "id: is the event's seq");

    // A direct Message reply is a single event without an id.
    let body = json!({"message": script_message(json!({"end": "message"}))});
    let events = stream(&gw, Method::POST, "/scenario/message:stream", Some(body))
        .await
        .collect()
        .await;
    assert_eq!(kinds(&events), ["message"]);
    assert_eq!(events[0].id, None);

    // An error before the stream starts is a plain HTTP error.
    let r = call(&gw, Method::POST, "/message:stream", Some(json!({}))).await;
    let e = status_error(&r, 400, "INVALID_ARGUMENT", "INVALID_PARAMS");
    assert_eq!(e["details"][0]["metadata"]["field"], "message");
}

#[tokio::test]
async fn subscribe_by_get_and_post_then_cancel_with_an_empty_body() {
    let gw = TestGateway::start().await;
    let id = hanging_task(&gw).await;
    let mut by_get = stream(&gw, Method::GET, &format!("/tasks/{id}:subscribe"), None).await;
    let mut by_post = stream(
        &gw,
        Method::POST,
        &format!("/scenario/tasks/{id}:subscribe"),
        None,
    )
    .await;
    for s in [&mut by_get, &mut by_post] {
        let first = s.next().await.unwrap();
        let (k, task) = kind(&first.data);
        assert_eq!(k, "task");
        assert_eq!(task["id"], id.as_str());
        // returnImmediately answered right after creation: the runner may not have recorded
        // WORKING yet when the subscription reads the snapshot.
        let st = state(task);
        assert!(
            st == "TASK_STATE_SUBMITTED" || st == "TASK_STATE_WORKING",
            "{st}"
        );
    }

    let resp = request(&gw, Method::POST, &format!("/tasks/{id}:cancel"))
        .send()
        .await
        .unwrap();
    let canceled = read(resp).await;
    assert_eq!(canceled.status, 200, "{}", canceled.body);
    assert_eq!(state(&canceled.body), "TASK_STATE_CANCELED");

    for s in [by_get, by_post] {
        let rest = s.collect().await;
        assert_eq!(kinds(&rest).last().unwrap(), "TASK_STATE_CANCELED");
    }

    // A terminal task has nothing to follow: a plain HTTP error, not a stream.
    let r = call(&gw, Method::GET, &format!("/tasks/{id}:subscribe"), None).await;
    status_error(&r, 400, "FAILED_PRECONDITION", "UNSUPPORTED_OPERATION");
    let r = call(&gw, Method::POST, "/tasks/missing:subscribe", None).await;
    status_error(&r, 404, "NOT_FOUND", "TASK_NOT_FOUND");
}

#[tokio::test]
async fn cancel_accepts_every_body_form() {
    let gw = TestGateway::start().await;
    for body in [
        None,
        Some("{}"),
        Some("null"),
        Some(r#"{"metadata":{"why":"test"}}"#),
        Some(r#"{"id":"ignored-the-path-wins"}"#),
    ] {
        let id = hanging_task(&gw).await;
        let mut req = request(&gw, Method::POST, &format!("/tasks/{id}:cancel"));
        if let Some(b) = body {
            req = req.header("content-type", "application/json").body(b);
        }
        let r = read(req.send().await.unwrap()).await;
        assert_eq!(r.status, 200, "{body:?}: {}", r.body);
        assert_eq!(r.body["id"], id.as_str());
        assert_eq!(state(&r.body), "TASK_STATE_CANCELED", "{body:?}");
    }
    let done = echo_task(&gw).await;
    let id = done["id"].as_str().unwrap();
    let r = call(&gw, Method::POST, &format!("/tasks/{id}:cancel"), None).await;
    let e = status_error(&r, 400, "FAILED_PRECONDITION", "TASK_NOT_CANCELABLE");
    assert_eq!(
        e["details"][0]["metadata"],
        json!({"taskId": id, "state": "TASK_STATE_COMPLETED"})
    );
    let r = call(&gw, Method::POST, "/tasks/missing:cancel", None).await;
    status_error(&r, 404, "NOT_FOUND", "TASK_NOT_FOUND");
}

#[tokio::test]
async fn push_config_crud() {
    let gw = TestGateway::start().await;
    let tid = echo_task(&gw).await["id"].as_str().unwrap().to_owned();
    let base = format!("/tasks/{tid}/pushNotificationConfigs");

    let body = json!({"taskId": "another-task", "url": "https://hooks.example.com/a2a",
                      "token": "tok", "authentication": {"scheme": "Bearer", "credentials": "s"}});
    let created = ok(&gw, Method::POST, &base, Some(body)).await;
    assert_eq!(created["taskId"], tid.as_str(), "the path's taskId wins");
    assert_eq!(created["authentication"]["scheme"], "Bearer");
    let cid = created["id"].as_str().unwrap().to_owned();
    let body = json!({"id": "my-id", "url": "https://hooks.example.com/2"});
    let mine = ok(&gw, Method::POST, &format!("/scenario{base}"), Some(body)).await;
    assert_eq!(mine["id"], "my-id");

    let got = ok(&gw, Method::GET, &format!("{base}/{cid}"), None).await;
    assert_eq!(got, created);

    let page = ok(&gw, Method::GET, &format!("{base}?pageSize=1"), None).await;
    assert_eq!(page["configs"].as_array().unwrap().len(), 1);
    let next = page["nextPageToken"].as_str().unwrap();
    assert!(!next.is_empty());
    let page2 = ok(
        &gw,
        Method::GET,
        &format!("/scenario{base}?pageSize=1&pageToken={next}"),
        None,
    )
    .await;
    assert_eq!(page2["configs"][0]["id"], "my-id");

    let deleted = ok(&gw, Method::DELETE, &format!("{base}/{cid}"), None).await;
    assert_eq!(deleted, json!({}));
    let r = call(&gw, Method::GET, &format!("{base}/{cid}"), None).await;
    status_error(&r, 404, "NOT_FOUND", "TASK_NOT_FOUND");
    let all = ok(&gw, Method::GET, &base, None).await;
    assert_eq!(all["configs"].as_array().unwrap().len(), 1);

    // Validation names the field; bad query parameters too.
    let r = call(&gw, Method::POST, &base, Some(json!({"url": "ftp://x"}))).await;
    let e = status_error(&r, 400, "INVALID_ARGUMENT", "INVALID_PARAMS");
    assert_eq!(e["details"][0]["metadata"]["field"], "url");
    assert_eq!(
        e["details"][1]["@type"],
        "type.googleapis.com/google.rpc.BadRequest"
    );
    assert_eq!(e["details"][1]["fieldViolations"][0]["field"], "url");
    let r = call(&gw, Method::GET, &format!("{base}?pageSize=many"), None).await;
    let e = status_error(&r, 400, "INVALID_ARGUMENT", "INVALID_PARAMS");
    assert_eq!(e["details"][0]["metadata"]["field"], "pageSize");
    let r = call(
        &gw,
        Method::GET,
        "/tasks/nope/pushNotificationConfigs",
        None,
    )
    .await;
    status_error(&r, 404, "NOT_FOUND", "TASK_NOT_FOUND");

    let gw = TestGateway::with_config("[card]\npush_notifications = false").await;
    let r = call(&gw, Method::GET, &base, None).await;
    status_error(
        &r,
        400,
        "FAILED_PRECONDITION",
        "PUSH_NOTIFICATION_NOT_SUPPORTED",
    );
}

#[tokio::test]
async fn list_with_every_filter_and_paging() {
    let gw = TestGateway::start().await;
    let mut m = user_message("x");
    m["contextId"] = json!("ctx-a");
    ok(
        &gw,
        Method::POST,
        "/message:send",
        Some(json!({"message": m})),
    )
    .await;
    for _ in 0..3 {
        echo_task(&gw).await;
    }
    let body = json!({"message": script_message(json!({"end": "input-required"}))});
    let waiting = ok(&gw, Method::POST, "/scenario/message:send", Some(body)).await["task"].clone();

    let all = ok(&gw, Method::GET, "/tasks", None).await;
    assert_eq!(all["totalSize"], 5);
    assert_eq!(all["pageSize"], 50);
    assert_eq!(all["nextPageToken"], "");
    assert!(all["tasks"][0].get("artifacts").is_none());

    // Paging: 2 + 2 + 1, each task once, newest first.
    let mut seen = Vec::new();
    let mut path = "/scenario/tasks?pageSize=2".to_owned();
    loop {
        let page = ok(&gw, Method::GET, &path, None).await;
        assert_eq!(page["pageSize"], 2);
        seen.extend(
            page["tasks"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t["id"].clone()),
        );
        let token = page["nextPageToken"].as_str().unwrap();
        if token.is_empty() {
            break;
        }
        path = format!("/tasks?pageSize=2&pageToken={token}");
    }
    assert_eq!(seen.len(), 5);
    assert_eq!(seen[0], waiting["id"]);

    let by_ctx = ok(&gw, Method::GET, "/tasks?contextId=ctx-a", None).await;
    assert_eq!(by_ctx["totalSize"], 1);
    for status in ["TASK_STATE_INPUT_REQUIRED", "6"] {
        let r = ok(&gw, Method::GET, &format!("/tasks?status={status}"), None).await;
        assert_eq!(r["totalSize"], 1, "{status}");
        assert_eq!(r["tasks"][0]["id"], waiting["id"]);
    }
    let future = ok(
        &gw,
        Method::GET,
        "/tasks?statusTimestampAfter=2999-01-01T00%3A00%3A00Z",
        None,
    )
    .await;
    assert_eq!(future["totalSize"], 0);
    assert_eq!(future["tasks"], json!([]));
    let past = ok(
        &gw,
        Method::GET,
        "/tasks?statusTimestampAfter=2000-01-01T00:00:00.000Z",
        None,
    )
    .await;
    assert_eq!(past["totalSize"], 5);
    let full = ok(
        &gw,
        Method::GET,
        "/tasks?includeArtifacts=true&historyLength=0&status=TASK_STATE_COMPLETED",
        None,
    )
    .await;
    assert_eq!(full["totalSize"], 4);
    for t in full["tasks"].as_array().unwrap() {
        assert!(t.get("history").is_none());
        assert!(t.get("artifacts").is_some());
    }
    let r = ok(&gw, Method::GET, "/tasks?includeArtifacts=false", None).await;
    assert!(r["tasks"][0].get("artifacts").is_none());

    for (query, field) in [
        ("status=TASK_STATE_SLEEPING", "status"),
        ("status=42", "status"),
        ("includeArtifacts=yes", "includeArtifacts"),
        ("pageSize=0", "pageSize"),
        ("pageSize=ten", "pageSize"),
        ("pageToken=garbage", "pageToken"),
        ("historyLength=-1", "historyLength"),
        ("statusTimestampAfter=yesterday", "statusTimestampAfter"),
    ] {
        let r = call(&gw, Method::GET, &format!("/tasks?{query}"), None).await;
        let e = status_error(&r, 400, "INVALID_ARGUMENT", "INVALID_PARAMS");
        assert_eq!(e["details"][0]["metadata"]["field"], field, "{query}");
        assert_eq!(
            e["details"][1]["fieldViolations"][0]["field"], field,
            "{query}"
        );
    }
}

#[tokio::test]
async fn extended_agent_card() {
    let gw = TestGateway::start().await;
    let r = call(&gw, Method::GET, "/extendedAgentCard", None).await;
    status_error(&r, 400, "FAILED_PRECONDITION", "UNSUPPORTED_OPERATION");

    let auth = crate::errors::KEY_AUTH;
    let keyed = |gw: &TestGateway, path: &str| {
        gw.client
            .get(gw.url(&format!("/a2a/rest{path}")))
            .header("a2a-version", "1.0")
            .header("x-api-key", "the-key")
            .send()
    };
    let gw = TestGateway::with_config(&format!("{auth}[card]\nextended_agent_card = true")).await;
    let r = keyed(&gw, "/extendedAgentCard").await.unwrap();
    assert_eq!(r.status(), 400);
    let body: serde_json::Value = r.json().await.unwrap();
    assert_eq!(
        body["error"]["details"][0]["reason"],
        "EXTENDED_AGENT_CARD_NOT_CONFIGURED"
    );

    // Without [auth], a configured extended card is not served.
    let gw = TestGateway::with_config("[extended_card]\ndescription = \"the extended card\"").await;
    let r = call(&gw, Method::GET, "/extendedAgentCard", None).await;
    status_error(&r, 400, "FAILED_PRECONDITION", "UNSUPPORTED_OPERATION");

    let gw = TestGateway::with_config(&format!(
        "{auth}[extended_card]\ndescription = \"the extended card\""
    ))
    .await;
    let r = call(&gw, Method::GET, "/extendedAgentCard", None).await;
    assert_eq!(r.status, 401, "{}", r.body);
    for path in ["/extendedAgentCard", "/scenario/extendedAgentCard"] {
        let r = keyed(&gw, path).await.unwrap();
        assert_eq!(r.status(), 200, "{path}");
        assert_eq!(r.headers()["vary"], "A2A-Version");
        let card: serde_json::Value = r.json().await.unwrap();
        assert_eq!(card["description"], "the extended card");
        assert!(
            card.get("protocolVersion").is_none(),
            "the 1.0 card: {card}"
        );
    }
}
