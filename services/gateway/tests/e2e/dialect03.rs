//! The A2A 0.3 dialect on the JSON-RPC and HTTP+JSON bindings, beside 1.0 on the same
//! endpoints: every 0.3 method and path, its error codes, the `A2A-Version` dispatch, one task
//! used in both dialects, the combined card.

use reqwest::Method;
use serde_json::{Value, json};

use crate::harness::*;

/// A 0.3 message (`kind`, lower-case role, `kind`ed parts); `skill` routes it without a tenant.
fn message03(text: &str) -> Value {
    json!({"kind": "message", "messageId": uuid::Uuid::new_v4().to_string(), "role": "user",
           "parts": [{"kind": "text", "text": text}]})
}

/// A 0.3 message to the scenario agent, routed by its skill (0.3 has no tenant).
fn script03(script: Value) -> Value {
    json!({"kind": "message", "messageId": uuid::Uuid::new_v4().to_string(), "role": "user",
           "parts": [{"kind": "text", "text": "run"}, {"kind": "data", "data": script}],
           "metadata": {"skill": "scenario"}})
}

/// A JSON-RPC call with `version` as `A2A-Version` (none: no header, as 0.3 clients send).
async fn call(gw: &TestGateway, version: Option<&str>, method: &str, params: Value) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params});
    let mut req = gw.client.post(gw.url("/a2a/jsonrpc")).json(&body);
    if let Some(v) = version {
        req = req.header("a2a-version", v);
    }
    let resp = req.send().await.unwrap();
    assert_eq!(resp.status(), 200, "JSON-RPC answers with HTTP 200");
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["id"], 7, "{v}");
    v
}

/// The result of a 0.3 call (no version header) that must succeed.
async fn ok03(gw: &TestGateway, method: &str, params: Value) -> Value {
    let r = call(gw, None, method, params).await;
    assert!(r.get("error").is_none(), "{method} failed: {r}");
    r["result"].clone()
}

/// The error of a 0.3 call that must fail.
async fn err03(gw: &TestGateway, method: &str, params: Value) -> Value {
    let r = call(gw, None, method, params).await;
    assert!(r.get("result").is_none(), "{method} should fail: {r}");
    r["error"].clone()
}

async fn stream03(gw: &TestGateway, method: &str, params: Value) -> Vec<Value> {
    let body = json!({"jsonrpc": "2.0", "id": "s", "method": method, "params": params});
    let resp = gw
        .client
        .post(gw.url("/a2a/jsonrpc"))
        .json(&body)
        .send()
        .await
        .unwrap();
    let s = SseStream::new(resp);
    assert_eq!(s.content_type, "text/event-stream");
    s.collect()
        .await
        .into_iter()
        .map(|e| {
            assert_eq!(e.data["id"], "s");
            e.data["result"].clone()
        })
        .collect()
}

#[tokio::test]
async fn jsonrpc_0_3_send_get_cancel_and_streams() {
    let gw = TestGateway::start().await;
    let task = ok03(&gw, "message/send", json!({"message": message03("hello")})).await;
    assert_eq!(task["kind"], "task");
    assert_eq!(task["status"]["state"], "completed");
    let part = &task["artifacts"][0]["parts"][0];
    assert_eq!(part["kind"], "text", "{task}");
    assert!(task["history"][0]["role"] == "user", "{task}");

    let got = ok03(
        &gw,
        "tasks/get",
        json!({"id": task["id"], "historyLength": 0}),
    )
    .await;
    assert_eq!(got["id"], task["id"]);
    assert_eq!(got["kind"], "task");
    assert!(!got["history"].as_array().unwrap().is_empty(), "0 = all");

    // A message reply is a bare message.
    let m = ok03(
        &gw,
        "message/send",
        json!({"message": script03(json!({"end": "message"}))}),
    )
    .await;
    assert_eq!(m["kind"], "message");
    assert_eq!(m["role"], "agent");

    // message/stream: a task, then kinded events, the last status event `final`.
    let events = stream03(
        &gw,
        "message/stream",
        json!({"message": script03(json!({"chunks": 2}))}),
    )
    .await;
    let kinds: Vec<&str> = events.iter().map(|e| e["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds[0], "task", "{kinds:?}");
    assert!(kinds.contains(&"artifact-update"), "{kinds:?}");
    let last = events.last().unwrap();
    assert_eq!(last["kind"], "status-update");
    assert_eq!(last["status"]["state"], "completed");
    assert_eq!(last["final"], true);
    let finals = events.iter().filter(|e| e["final"] == true).count();
    assert_eq!(finals, 1, "only the last status event is final");

    // An input-required turn: the stream ends there, final; cancel over 0.3.
    let asked = ok03(
        &gw,
        "message/send",
        json!({"message": script03(json!({"end": "input-required"}))}),
    )
    .await;
    assert_eq!(asked["status"]["state"], "input-required");
    let canceled = ok03(&gw, "tasks/cancel", json!({"id": asked["id"]})).await;
    assert_eq!(canceled["status"]["state"], "canceled");
    let again = err03(&gw, "tasks/cancel", json!({"id": asked["id"]})).await;
    assert_eq!(again["code"], -32002);
    assert_eq!(again["data"]["reason"], "TASK_NOT_CANCELABLE");

    // tasks/resubscribe follows a running task to its end.
    let running = ok03(
        &gw,
        "message/send",
        json!({"message": script03(json!({"chunks": 3, "delayMs": 300})),
               "configuration": {"blocking": false}}),
    )
    .await;
    assert_eq!(running["kind"], "task");
    let events = stream03(&gw, "tasks/resubscribe", json!({"id": running["id"]})).await;
    assert_eq!(events[0]["kind"], "task");
    let last = events.last().unwrap();
    assert_eq!(last["final"], true, "{events:?}");
    assert_eq!(last["status"]["state"], "completed");
}

#[tokio::test]
async fn the_version_header_picks_the_dialect() {
    let gw = TestGateway::start().await;
    let send03 = json!({"message": message03("x")});
    let send10 = json!({"message": user_message("x")});
    // No header: the method name's dialect.
    assert_eq!(
        ok03(&gw, "message/send", send03.clone()).await["kind"],
        "task"
    );
    let r = call(&gw, None, "SendMessage", send10.clone()).await;
    assert_eq!(state(&r["result"]["task"]), "TASK_STATE_COMPLETED", "{r}");
    // An explicit 0.3 or 1.x.
    let r = call(&gw, Some("0.3"), "message/send", send03.clone()).await;
    assert_eq!(r["result"]["status"]["state"], "completed", "{r}");
    let r = call(&gw, Some("1.0"), "SendMessage", send10.clone()).await;
    assert!(r["result"]["task"].is_object(), "{r}");
    // A method of the other dialect is not found; the error speaks the requested dialect.
    let r = call(&gw, Some("1.0"), "message/send", send03.clone()).await;
    assert_eq!(r["error"]["code"], -32601, "{r}");
    assert_eq!(r["error"]["data"][0]["reason"], "METHOD_NOT_FOUND", "{r}");
    let r = call(&gw, Some("0.3"), "SendMessage", send10.clone()).await;
    assert_eq!(r["error"]["code"], -32601, "{r}");
    assert_eq!(r["error"]["data"]["reason"], "METHOD_NOT_FOUND", "{r}");
    // Unknown versions stay refused, before the params are read.
    for v in ["99.0", "0.2", "2.0"] {
        let r = call(&gw, Some(v), "message/send", json!({"message": {}})).await;
        assert_eq!(r["error"]["code"], -32009, "{v}: {r}");
        assert_eq!(r["error"]["data"]["reason"], "VERSION_NOT_SUPPORTED");
    }
    // A 0.3 name 0.3 never had.
    assert_eq!(err03(&gw, "tasks/list", json!({})).await["code"], -32601);
}

#[tokio::test]
async fn jsonrpc_0_3_errors() {
    let gw = TestGateway::start().await;
    let e = err03(&gw, "tasks/get", json!({"id": "nope"})).await;
    assert_eq!(e["code"], -32001);
    assert_eq!(e["data"]["reason"], "TASK_NOT_FOUND");
    assert_eq!(e["data"]["metadata"]["taskId"], "nope");
    assert!(e["data"].is_object(), "0.3 data is one object: {e}");
    for (params, what) in [
        (json!({}), "no message"),
        (
            json!({"message": {"messageId": "m", "role": "robot",
                            "parts": [{"kind": "text", "text": "x"}]}}),
            "bad role",
        ),
        (
            json!({"message": {"messageId": "m", "role": "user",
                            "parts": [{"text": "x"}]}}),
            "part without kind",
        ),
        (
            json!({"message": {"messageId": "m", "role": "user", "parts": []}}),
            "no parts",
        ),
        (json!([1]), "params not an object"),
    ] {
        let e = err03(&gw, "message/send", params).await;
        assert_eq!(e["code"], -32602, "{what}: {e}");
        assert_eq!(e["data"]["reason"], "INVALID_PARAMS", "{what}");
    }
    assert_eq!(err03(&gw, "tasks/get", json!({})).await["code"], -32602);
    assert_eq!(
        err03(&gw, "tasks/resubscribe", json!({"id": "nope"})).await["code"],
        -32001
    );
    // Subscribing to a finished task is an unsupported operation, as in 1.0.
    let done = ok03(&gw, "message/send", json!({"message": message03("x")})).await;
    let e = err03(&gw, "tasks/resubscribe", json!({"id": done["id"]})).await;
    assert_eq!(e["code"], -32004, "{e}");
    // So is a message to it.
    let mut m = message03("more");
    m["taskId"] = done["id"].clone();
    assert_eq!(
        err03(&gw, "message/send", json!({"message": m})).await["code"],
        -32004
    );
    // No extended card: 0.3's one error for it, AuthenticatedExtendedCardNotConfigured
    // (a2a-python 0.3 answers it when supportsAuthenticatedExtendedCard is false).
    assert_eq!(
        err03(&gw, "agent/getAuthenticatedExtendedCard", Value::Null).await["code"],
        -32007
    );
    // An unknown slash-shaped method is not found (-32601), whatever the version header and
    // the params; a malformed method is an invalid request (-32600).
    for version in [None, Some("0.3"), Some("1.0")] {
        for params in [json!({}), Value::Null, json!([])] {
            let r = call(&gw, version, "invalid/nonexistent/method", params.clone()).await;
            assert_eq!(r["error"]["code"], -32601, "{version:?} {params}: {r}");
        }
    }
    for method in [
        json!(3),
        json!(""),
        json!(null),
        json!(["tasks/get"]),
        json!({}),
    ] {
        let body = json!({"jsonrpc": "2.0", "id": 7, "method": method});
        let r: Value = gw
            .client
            .post(gw.url("/a2a/jsonrpc"))
            .json(&body)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(r["error"]["code"], -32600, "method {method}: {r}");
        assert_eq!(r["id"], 7, "{r}");
    }
}

#[tokio::test]
async fn jsonrpc_0_3_push_config_crud() {
    let gw = TestGateway::start().await;
    let task = ok03(&gw, "message/send", json!({"message": message03("x")})).await;
    let tid = task["id"].as_str().unwrap();
    let set = ok03(
        &gw,
        "tasks/pushNotificationConfig/set",
        json!({"taskId": tid, "pushNotificationConfig": {"url": "https://hooks.example.com/a",
               "token": "tok", "authentication": {"schemes": ["Bearer"], "credentials": "s"}}}),
    )
    .await;
    assert_eq!(set["taskId"], tid);
    assert_eq!(
        set["pushNotificationConfig"]["id"], tid,
        "0.3: the id defaults to the task's"
    );
    assert_eq!(
        set["pushNotificationConfig"]["authentication"]["schemes"],
        json!(["Bearer"])
    );
    ok03(
        &gw,
        "tasks/pushNotificationConfig/set",
        json!({"taskId": tid, "pushNotificationConfig": {"id": "second",
               "url": "https://hooks.example.com/b"}}),
    )
    .await;
    let got = ok03(&gw, "tasks/pushNotificationConfig/get", json!({"id": tid})).await;
    assert_eq!(
        got["pushNotificationConfig"]["url"],
        "https://hooks.example.com/a"
    );
    let got = ok03(
        &gw,
        "tasks/pushNotificationConfig/get",
        json!({"id": tid, "pushNotificationConfigId": "second"}),
    )
    .await;
    assert_eq!(
        got["pushNotificationConfig"]["url"],
        "https://hooks.example.com/b"
    );
    let list = ok03(&gw, "tasks/pushNotificationConfig/list", json!({"id": tid})).await;
    assert_eq!(list.as_array().unwrap().len(), 2, "a bare array: {list}");
    // The same configs over 1.0.
    let list10 = gw
        .ok("ListTaskPushNotificationConfigs", json!({"taskId": tid}))
        .await;
    assert_eq!(list10["configs"].as_array().unwrap().len(), 2);
    let deleted = ok03(
        &gw,
        "tasks/pushNotificationConfig/delete",
        json!({"id": tid, "pushNotificationConfigId": "second"}),
    )
    .await;
    assert_eq!(deleted, Value::Null);
    let list = ok03(&gw, "tasks/pushNotificationConfig/list", json!({"id": tid})).await;
    assert_eq!(list.as_array().unwrap().len(), 1);
    let e = err03(
        &gw,
        "tasks/pushNotificationConfig/get",
        json!({"id": tid, "pushNotificationConfigId": "second"}),
    )
    .await;
    assert_eq!(e["code"], -32001);
    let e = err03(
        &gw,
        "tasks/pushNotificationConfig/set",
        json!({"taskId": "nope", "pushNotificationConfig": {"url": "https://h.example.com"}}),
    )
    .await;
    assert_eq!(e["code"], -32001);
}

#[tokio::test]
async fn push_is_refused_in_0_3_where_it_is_off() {
    let gw = TestGateway::with_config("[card]\npush_notifications = false").await;
    let e = err03(
        &gw,
        "tasks/pushNotificationConfig/list",
        json!({"id": "any"}),
    )
    .await;
    assert_eq!(e["code"], -32003);
}

#[tokio::test]
async fn one_card_for_both_generations() {
    let gw = TestGateway::with_config(&format!(
        "{}[extended_card]\ndescription = \"more\"\n",
        crate::errors::KEY_AUTH
    ))
    .await;
    let card = gw.card().await;
    let base = format!("http://{}", gw.addr);
    assert_eq!(card["protocolVersion"], "0.3.0");
    assert_eq!(card["url"], format!("{base}/a2a/jsonrpc"));
    assert_eq!(card["preferredTransport"], "JSONRPC");
    let additional = card["additionalInterfaces"].as_array().unwrap();
    assert!(
        additional.contains(&json!({"url": format!("{base}/a2a/rest"), "transport": "HTTP+JSON"}))
    );
    assert_eq!(card["supportsAuthenticatedExtendedCard"], true);
    // 1.0 clients read the 1.0 interfaces, as before.
    let ifaces = card["supportedInterfaces"].as_array().unwrap();
    assert!(
        ifaces.iter().all(|i| i["protocolVersion"] == "1.0"),
        "{card}"
    );
    // The 0.2.x path serves the same document.
    let legacy = gw
        .client
        .get(gw.url("/.well-known/agent.json"))
        .send()
        .await
        .unwrap();
    assert_eq!(legacy.status(), 200);
    assert_eq!(legacy.json::<Value>().await.unwrap(), card);
    // The extended card over 0.3 is the combined card too, for a caller with credentials.
    let anonymous = gw
        .client
        .post(gw.url("/a2a/jsonrpc"))
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "agent/getAuthenticatedExtendedCard"}))
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous.status(), 401);
    let e: Value = anonymous.json().await.unwrap();
    assert_eq!(e["error"]["code"], -31401, "{e}");
    let ext: Value = gw
        .client
        .post(gw.url("/a2a/jsonrpc"))
        .header("x-api-key", "the-key")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "agent/getAuthenticatedExtendedCard"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let ext = &ext["result"];
    assert_eq!(ext["description"], "more");
    assert_eq!(ext["url"], card["url"]);
    assert_eq!(ext["protocolVersion"], "0.3.0");
}

/// A 1.0 client (`A2A-Version: 1.x`) gets the strict 1.0 card; a request without the header
/// (0.3 by the spec's default), with `0.3`, or at the 0.2 path gets the combined card. Each
/// shape has its own ETag, both say `Vary: A2A-Version`, and a conditional request is answered
/// against the shape asked for.
#[tokio::test]
async fn the_card_shape_follows_a2a_version() {
    let gw = TestGateway::start().await;
    let get = |path: &'static str, version: Option<&'static str>, etag: Option<String>| {
        let mut req = gw.client.get(gw.url(path));
        if let Some(v) = version {
            req = req.header("a2a-version", v);
        }
        if let Some(e) = etag {
            req = req.header("if-none-match", e);
        }
        req.send()
    };
    let strict = get("/.well-known/agent-card.json", Some("1.0"), None)
        .await
        .unwrap();
    assert_eq!(strict.headers()["vary"], "A2A-Version");
    let strict_etag = strict.headers()["etag"].to_str().unwrap().to_owned();
    let strict: Value = strict.json().await.unwrap();
    let combined = get("/.well-known/agent-card.json", None, None)
        .await
        .unwrap();
    assert_eq!(combined.headers()["vary"], "A2A-Version");
    let combined_etag = combined.headers()["etag"].to_str().unwrap().to_owned();
    let combined: Value = combined.json().await.unwrap();
    assert_ne!(strict_etag, combined_etag);
    for member in [
        "url",
        "preferredTransport",
        "additionalInterfaces",
        "protocolVersion",
        "supportsAuthenticatedExtendedCard",
    ] {
        assert!(strict.get(member).is_none(), "{member} in the 1.0 card");
        assert!(combined.get(member).is_some(), "{member} in the 0.3 card");
    }
    // Without [auth], no extended card is declared to either generation.
    assert_eq!(strict["capabilities"]["extendedAgentCard"], false);
    assert_eq!(combined["supportsAuthenticatedExtendedCard"], false);
    // The 1.0 members are the same card.
    for (key, value) in strict.as_object().unwrap() {
        if key != "signatures" {
            assert_eq!(&combined[key], value, "{key}");
        }
    }
    for version in ["1", "1.0.1", "1.9"] {
        let r = get("/.well-known/agent-card.json", Some(version), None)
            .await
            .unwrap();
        assert_eq!(
            r.headers()["etag"].to_str().unwrap(),
            strict_etag,
            "{version}"
        );
    }
    for version in ["0.3", "0.3.0", "", "9.9"] {
        let r = get("/.well-known/agent-card.json", Some(version), None)
            .await
            .unwrap();
        assert_eq!(
            r.headers()["etag"].to_str().unwrap(),
            combined_etag,
            "{version:?}"
        );
    }
    // The 0.2 path: always the combined card (nothing to vary on).
    let legacy = get("/.well-known/agent.json", Some("1.0"), None)
        .await
        .unwrap();
    assert!(legacy.headers().get("vary").is_none());
    assert_eq!(legacy.headers()["etag"].to_str().unwrap(), combined_etag);
    // Revalidation is per shape: one shape's ETag does not validate the other.
    let r = get(
        "/.well-known/agent-card.json",
        Some("1.0"),
        Some(strict_etag.clone()),
    );
    assert_eq!(r.await.unwrap().status(), 304);
    let r = get(
        "/.well-known/agent-card.json",
        None,
        Some(strict_etag.clone()),
    );
    assert_eq!(r.await.unwrap().status(), 200);
    let r = get(
        "/.well-known/agent-card.json",
        None,
        Some(combined_etag.clone()),
    );
    assert_eq!(r.await.unwrap().status(), 304);
}

/// `[extended_card]` without `[auth]`: no caller is authenticated, so the card does not declare
/// it and the 0.3 method (and `/v1/card`) refuse a caller with no credentials.
#[tokio::test]
async fn no_extended_card_without_auth_in_0_3() {
    let gw = TestGateway::with_config("[extended_card]\ndescription = \"more\"\n").await;
    assert_eq!(gw.card().await["supportsAuthenticatedExtendedCard"], false);
    let e = err03(&gw, "agent/getAuthenticatedExtendedCard", Value::Null).await;
    assert_eq!(e["code"], -32007, "{e}");
    assert_eq!(
        e["data"]["reason"], "EXTENDED_AGENT_CARD_NOT_CONFIGURED",
        "{e}"
    );
    let (status, body) = rest03(&gw, Method::GET, "/v1/card", None).await;
    assert_eq!(status, 400, "{body}");
}

#[tokio::test]
async fn one_task_in_both_dialects() {
    let gw = TestGateway::start().await;
    // Created over 0.3, read and continued over 1.0, read again over 0.3.
    let t = ok03(
        &gw,
        "message/send",
        json!({"message": script03(json!({"end": "input-required"}))}),
    )
    .await;
    let id = t["id"].as_str().unwrap().to_owned();
    let got = gw.ok("GetTask", json!({"id": id})).await;
    assert_eq!(state(&got), "TASK_STATE_INPUT_REQUIRED");
    assert_eq!(got["contextId"], t["contextId"]);
    let mut next = script_message(json!({}));
    next["taskId"] = json!(id);
    let r = gw.ok("SendMessage", json!({"message": next})).await;
    assert_eq!(r["task"]["id"], json!(id));
    let listed = gw.ok("ListTasks", json!({})).await;
    assert!(
        listed["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .any(|x| x["id"] == id)
    );
    let again = ok03(&gw, "tasks/get", json!({"id": id})).await;
    assert_eq!(again["status"]["state"], "completed", "{again}");
    let users = again["history"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .count();
    assert_eq!(users, 2, "both turns' messages: {again}");

    // Created over 0.3, canceled over 1.0; and the reverse.
    for (create03, cancel03) in [(true, false), (false, true)] {
        let id = if create03 {
            ok03(
                &gw,
                "message/send",
                json!({"message": script03(json!({"end": "input-required"}))}),
            )
            .await["id"]
                .clone()
        } else {
            gw.scenario(json!({"end": "input-required"}), json!({}))
                .await["task"]["id"]
                .clone()
        };
        if cancel03 {
            let c = ok03(&gw, "tasks/cancel", json!({"id": id})).await;
            assert_eq!(c["status"]["state"], "canceled");
        } else {
            let c = gw.ok("CancelTask", json!({"id": id})).await;
            assert_eq!(state(&c), "TASK_STATE_CANCELED");
        }
        let seen10 = gw.ok("GetTask", json!({"id": id})).await;
        assert_eq!(state(&seen10), "TASK_STATE_CANCELED");
        let seen03 = ok03(&gw, "tasks/get", json!({"id": id})).await;
        assert_eq!(seen03["status"]["state"], "canceled");
    }

    // Created over 1.0, followed over 0.3 (JSON-RPC and HTTP+JSON).
    let t = gw
        .scenario(
            json!({"chunks": 3, "delayMs": 300}),
            json!({"returnImmediately": true}),
        )
        .await["task"]
        .clone();
    let events = stream03(&gw, "tasks/resubscribe", json!({"id": t["id"]})).await;
    assert_eq!(events.last().unwrap()["status"]["state"], "completed");
    let got = rest03(
        &gw,
        Method::GET,
        &format!("/v1/tasks/{}", t["id"].as_str().unwrap()),
        None,
    )
    .await;
    assert_eq!(got.0, 200);
    assert_eq!(got.1["status"]["state"], "TASK_STATE_COMPLETED");
    assert_eq!(got.1["artifacts"].as_array().unwrap().len(), 1);
}

/// An HTTP+JSON request under `/a2a/rest` without a version header: (status, body).
async fn rest03(gw: &TestGateway, method: Method, path: &str, body: Option<Value>) -> (u16, Value) {
    let mut req = gw
        .client
        .request(method, gw.url(&format!("/a2a/rest{path}")));
    if let Some(b) = body {
        req = req.json(&b);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    let text = resp.text().await.unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text:?}")),
    )
}

/// A 0.3 ProtoJSON message to the scenario agent.
fn proto03(script: Value) -> Value {
    json!({"messageId": uuid::Uuid::new_v4().to_string(), "role": "ROLE_USER",
           "content": [{"text": "run"}, {"data": {"data": script}}],
           "metadata": {"skill": "scenario"}})
}

#[tokio::test]
async fn rest_0_3_paths() {
    let gw = TestGateway::start().await;
    let (status, r) = rest03(
        &gw,
        Method::POST,
        "/v1/message:send",
        Some(json!({"message": proto03(json!({"chunks": 1})),
                    "configuration": {"blocking": true}})),
    )
    .await;
    assert_eq!(status, 200, "{r}");
    let task = &r["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED");
    assert!(task["history"][0]["content"].is_array(), "{task}");
    assert!(
        task["artifacts"][0]["parts"][0]["text"].is_string(),
        "{task}"
    );
    let id = task["id"].as_str().unwrap().to_owned();

    let (status, got) = rest03(
        &gw,
        Method::GET,
        &format!("/v1/tasks/{id}?historyLength=1"),
        None,
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(got["history"].as_array().unwrap().len(), 1);

    // Stream: 0.3 StreamResponses, the last status update final.
    let resp = gw
        .client
        .post(gw.url("/a2a/rest/v1/message:stream"))
        .json(&json!({"message": proto03(json!({"chunks": 2}))}))
        .send()
        .await
        .unwrap();
    let events: Vec<Value> = SseStream::new(resp)
        .collect()
        .await
        .into_iter()
        .map(|e| e.data)
        .collect();
    assert!(events[0].get("task").is_some(), "{events:?}");
    let last = &events.last().unwrap()["statusUpdate"];
    assert_eq!(last["final"], true, "{events:?}");
    assert_eq!(last["status"]["state"], "TASK_STATE_COMPLETED");

    // Cancel (CANCELLED, the 0.3 spelling) and subscribe.
    let (_, r) = rest03(
        &gw,
        Method::POST,
        "/v1/message:send",
        Some(json!({"message": proto03(json!({"end": "input-required"})),
                    "configuration": {"blocking": true}})),
    )
    .await;
    let asked = r["task"]["id"].as_str().unwrap().to_owned();
    let (status, c) = rest03(
        &gw,
        Method::POST,
        &format!("/v1/tasks/{asked}:cancel"),
        Some(json!({"name": format!("tasks/{asked}")})),
    )
    .await;
    assert_eq!(status, 200, "{c}");
    assert_eq!(c["status"]["state"], "TASK_STATE_CANCELLED");
    let (status, e) = rest03(
        &gw,
        Method::POST,
        &format!("/v1/tasks/{asked}:cancel"),
        None,
    )
    .await;
    assert_eq!(status, 400);
    assert_eq!(e["error"]["details"][0]["reason"], "TASK_NOT_CANCELABLE");

    // Without `blocking` a 0.3 configuration asks for an immediate answer (a proto3 bool).
    let (_, r) = rest03(
        &gw,
        Method::POST,
        "/v1/message:send",
        Some(
            json!({"message": proto03(json!({"chunks": 3, "delayMs": 300})),
                    "configuration": {}}),
        ),
    )
    .await;
    let running = r["task"]["id"].as_str().unwrap().to_owned();
    assert_ne!(r["task"]["status"]["state"], "TASK_STATE_COMPLETED");
    let resp = gw
        .client
        .get(gw.url(&format!("/a2a/rest/v1/tasks/{running}:subscribe")))
        .send()
        .await
        .unwrap();
    let events: Vec<Value> = SseStream::new(resp)
        .collect()
        .await
        .into_iter()
        .map(|e| e.data)
        .collect();
    assert_eq!(
        events.last().unwrap()["statusUpdate"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );

    // Push configs: the SDK's CreateTaskPushNotificationConfigRequest body.
    let (status, cfg) = rest03(
        &gw,
        Method::POST,
        &format!("/v1/tasks/{id}/pushNotificationConfigs"),
        Some(json!({"parent": format!("tasks/{id}"), "configId": "c1",
                    "config": {"pushNotificationConfig": {"url": "https://hooks.example.com/x"}}})),
    )
    .await;
    assert_eq!(status, 200, "{cfg}");
    assert_eq!(
        cfg["name"],
        format!("tasks/{id}/pushNotificationConfigs/c1")
    );
    let path = format!("/v1/tasks/{id}/pushNotificationConfigs/c1");
    let (status, got) = rest03(&gw, Method::GET, &path, None).await;
    assert_eq!(status, 200);
    assert_eq!(
        got["pushNotificationConfig"]["url"],
        "https://hooks.example.com/x"
    );
    let (_, list) = rest03(
        &gw,
        Method::GET,
        &format!("/v1/tasks/{id}/pushNotificationConfigs"),
        None,
    )
    .await;
    assert_eq!(list["configs"].as_array().unwrap().len(), 1);
    let (status, _) = rest03(&gw, Method::DELETE, &path, None).await;
    assert_eq!(status, 200);
    let (status, _) = rest03(&gw, Method::GET, &path, None).await;
    assert_eq!(status, 404);

    // Errors: an unknown task, a bad body, a path 0.3 lacks, a wrong verb.
    assert_eq!(
        rest03(&gw, Method::GET, "/v1/tasks/nope", None).await.0,
        404
    );
    let (status, e) = rest03(
        &gw,
        Method::POST,
        "/v1/message:send",
        Some(json!({"message": {"content": [{"what": 1}]}})),
    )
    .await;
    assert_eq!(status, 400, "{e}");
    assert_eq!(rest03(&gw, Method::GET, "/v1/nope", None).await.0, 404);
    let resp = gw
        .client
        .get(gw.url("/a2a/rest/v1/message:send"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 405);
    // The extended card is not configured here.
    assert_eq!(rest03(&gw, Method::GET, "/v1/card", None).await.0, 400);
}

#[tokio::test]
async fn rest_v1_paths_are_1_0_under_a_1_0_header() {
    let keyed = TestGateway::with_config(&format!(
        "{}[extended_card]\ndescription = \"more\"\n",
        crate::errors::KEY_AUTH
    ))
    .await;
    let card = |version: Option<&'static str>, path: &'static str| {
        let mut req = keyed
            .client
            .get(keyed.url(path))
            .header("x-api-key", "the-key");
        if let Some(v) = version {
            req = req.header("a2a-version", v);
        }
        req.send()
    };
    let r = card(None, "/a2a/rest/v1/card").await.unwrap();
    assert_eq!(r.status(), 200);
    let v03: Value = r.json().await.unwrap();
    assert_eq!(v03["description"], "more");
    assert_eq!(
        v03["protocolVersion"], "0.3.0",
        "the 0.3 card on the 0.3 path"
    );
    // Read as 1.0, `/v1/extendedAgentCard` is tenant `v1`'s extended card: the 1.0 card.
    let r = card(Some("1.0"), "/a2a/rest/v1/extendedAgentCard")
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let v1: Value = r.json().await.unwrap();
    assert_eq!(v1["description"], "more");
    assert!(v1.get("protocolVersion").is_none(), "{v1}");

    let gw = TestGateway::start().await;
    // With `A2A-Version: 1.0` the same path is tenant `v1` of the 1.0 binding.
    let send = |version: &'static str| {
        gw.client
            .post(gw.url("/a2a/rest/v1/message:send"))
            .header("a2a-version", version)
            .json(&json!({"message": proto03(json!({"chunks": 1}))}))
            .send()
    };
    let as10 = send("1.0").await.unwrap();
    let status10 = as10.status().as_u16();
    let body10: Value = as10.json().await.unwrap();
    // 1.0 knows no `content`: the message has no parts.
    assert_eq!(status10, 400, "{body10}");
    assert_eq!(
        body10["error"]["details"][0]["metadata"]["field"], "message.parts",
        "{body10}"
    );
    // With 0.3 (or none) it is the 0.3 send.
    let as03 = send("0.3").await.unwrap();
    assert_eq!(as03.status(), 200);
    let body03: Value = as03.json().await.unwrap();
    assert_eq!(
        body03["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{body03}"
    );
    // A 1.0 path asked for in 0.3 is not found.
    let resp = gw
        .client
        .get(gw.url("/a2a/rest/extendedAgentCard"))
        .header("a2a-version", "0.3")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 404);
    let resp = gw
        .client
        .get(gw.url("/a2a/rest/v1/card"))
        .header("a2a-version", "9.9")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 400);
}

/// Receivers run on 127.0.0.1 (internal, so allowed explicitly); short backoff for retries.
const EMBEDDED_PUSH: &str = r#"
[push]
allowed_hosts = ["127.0.0.1"]
backoff_base_ms = 50
backoff_max_ms = 200
"#;

#[tokio::test]
async fn a_0_3_webhook_gets_the_0_3_task_and_a_1_0_one_the_event() {
    use a2a_testing::receiver::{Receiver, describe};
    use std::time::Duration;

    let gw = TestGateway::embedded(EMBEDDED_PUSH).await;
    let (r03, r10) = (Receiver::start().await, Receiver::start().await);
    // A task waiting for input, with a webhook registered by a 0.3 client and one by a 1.0 client.
    let t = ok03(
        &gw,
        "message/send",
        json!({"message": script03(json!({"end": "input-required"})),
               "configuration": {"pushNotificationConfig": {"url": r03.url("/hook"),
                   "token": "tok-03", "authentication": {"schemes": ["Bearer"], "credentials": "s3"}}}}),
    )
    .await;
    let id = t["id"].as_str().unwrap().to_owned();
    gw.ok(
        "CreateTaskPushNotificationConfig",
        json!({"taskId": id, "id": "v10", "url": r10.url("/hook"), "token": "tok-10"}),
    )
    .await;
    // The next turn, from 1.0, completes the task: both webhooks hear of it.
    let mut next = script_message(json!({"chunks": 1}));
    next["taskId"] = json!(id);
    gw.ok("SendMessage", json!({"message": next})).await;
    r03.wait_for(Duration::from_secs(20), |r| {
        r.iter().any(|x| x.json["status"]["state"] == "completed")
    })
    .await;
    r10.wait_for(Duration::from_secs(20), |r| {
        r.iter()
            .any(|x| describe(&x.json) == "status TASK_STATE_COMPLETED")
    })
    .await;
    let v03 = r03.requests();
    for r in &v03 {
        // The 0.3 payload: the Task itself, in the 0.3 shape.
        assert_eq!(r.json["kind"], "task", "{}", r.json);
        assert_eq!(r.json["id"], json!(id));
        let h = |name: &str| r.headers.get(name).map(|v| v.to_str().unwrap().to_owned());
        assert_eq!(h("x-a2a-notification-token").as_deref(), Some("tok-03"));
        assert_eq!(h("authorization").as_deref(), Some("Bearer s3"));
    }
    let states: Vec<&str> = v03
        .iter()
        .map(|r| r.json["status"]["state"].as_str().unwrap())
        .collect();
    assert_eq!(states.first(), Some(&"submitted"), "{states:?}");
    assert!(states.contains(&"input-required"), "{states:?}");
    assert_eq!(states.last(), Some(&"completed"), "{states:?}");
    let last = &v03.last().unwrap().json;
    assert_eq!(last["artifacts"][0]["parts"][0]["kind"], "text", "{last}");
    assert_eq!(last["history"][0]["role"], "user");
    // The 1.0 payloads: StreamResponses, of the events after the config came.
    let v10 = r10.requests();
    let seen: Vec<String> = v10.iter().map(|r| describe(&r.json)).collect();
    assert_eq!(
        seen.first().map(String::as_str),
        Some("status TASK_STATE_WORKING"),
        "{seen:?}"
    );
    assert_eq!(
        seen.last().map(String::as_str),
        Some("status TASK_STATE_COMPLETED")
    );
    for r in &v10 {
        assert!(r.json.get("kind").is_none(), "{}", r.json);
        assert_eq!(r.headers["x-a2a-notification-token"], "tok-10");
    }
}

/// Authentication and owner isolation apply to 0.3 requests as to 1.0 ones: no key is 401 with
/// the 0.3 error body; another owner's task is a missing task, in either dialect.
#[tokio::test]
async fn auth_and_owner_isolation_apply_in_0_3() {
    let gw = TestGateway::with_config(
        r#"
[auth.schemes.key]
scheme = { apiKeySecurityScheme = { location = "header", name = "X-API-Key" } }
keys = [{ id = "alice", key = "alice-key" }, { id = "bob", key = "bob-key" }]
"#,
    )
    .await;
    let as_ = |key: Option<&'static str>, method: &'static str, params: Value| {
        let body = json!({"jsonrpc": "2.0", "id": 9, "method": method, "params": params});
        let mut req = gw.client.post(gw.url("/a2a/jsonrpc")).json(&body);
        if let Some(k) = key {
            req = req.header("x-api-key", k);
        }
        async move {
            let resp = req.send().await.unwrap();
            let status = resp.status().as_u16();
            (status, resp.json::<Value>().await.unwrap())
        }
    };
    let (status, r) = as_(None, "tasks/get", json!({"id": "x"})).await;
    assert_eq!(status, 401, "{r}");
    assert_eq!(r["error"]["data"]["reason"], "UNAUTHENTICATED", "{r}");
    let (_, r) = as_(
        Some("alice-key"),
        "message/send",
        json!({"message": message03("mine")}),
    )
    .await;
    let id = r["result"]["id"].clone();
    assert_eq!(r["result"]["kind"], "task", "{r}");
    let (_, r) = as_(Some("bob-key"), "tasks/get", json!({"id": id})).await;
    assert_eq!(r["error"]["code"], -32001, "{r}");
    let (_, r) = as_(Some("bob-key"), "GetTask", json!({"id": id})).await;
    assert_eq!(r["error"]["code"], -32001, "{r}");
    let (_, r) = as_(Some("alice-key"), "GetTask", json!({"id": id})).await;
    assert_eq!(state(&r["result"]), "TASK_STATE_COMPLETED", "{r}");
    // HTTP+JSON 0.3 too.
    let resp = gw
        .client
        .get(gw.url(&format!("/a2a/rest/v1/tasks/{}", id.as_str().unwrap())))
        .header("x-api-key", "bob-key")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 404);
    let resp = gw
        .client
        .get(gw.url("/a2a/rest/v1/card"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 401);
}
