//! JSON-RPC envelope errors, version negotiation, extensions and limits.

use serde_json::{Value, json};

use crate::harness::*;

async fn raw_error(gw: &TestGateway, body: &str) -> Value {
    let resp = gw.post_raw(body.to_owned()).await;
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-type"], "application/json");
    resp.json().await.unwrap()
}

#[tokio::test]
async fn envelope_errors_use_the_json_rpc_codes() {
    let gw = TestGateway::start().await;
    let r = raw_error(&gw, "{not json").await;
    assert_eq!(r["error"]["code"], -32700);
    assert_eq!(r["id"], Value::Null);
    assert_eq!(r["jsonrpc"], "2.0");
    let keys: Vec<_> = r["error"].as_object().unwrap().keys().cloned().collect();
    assert_eq!(
        keys,
        ["code", "data", "message"],
        "error has only code, message, data"
    );

    for body in [
        r#"[{"jsonrpc":"2.0","id":1,"method":"GetTask"}]"#,
        r#"{"jsonrpc":"1.0","id":1,"method":"GetTask","params":{"id":"x"}}"#,
        r#"{"id":1,"method":"GetTask","params":{"id":"x"}}"#,
        r#"{"jsonrpc":"2.0","id":{"a":1},"method":"GetTask"}"#,
        r#"{"jsonrpc":"2.0","id":1}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":7}"#,
    ] {
        assert_eq!(
            raw_error(&gw, body).await["error"]["code"],
            -32600,
            "{body}"
        );
    }

    let r = raw_error(
        &gw,
        r#"{"jsonrpc":"2.0","id":"x-1","method":"message/send","params":{}}"#,
    )
    .await;
    assert_eq!(r["error"]["code"], -32601);
    assert_eq!(r["id"], "x-1", "the id is echoed");
}

/// Once the envelope parsed, every error carries the request's id, whatever went wrong and
/// wherever it was found; only a parse error or an unusable id gets `null`.
#[tokio::test]
async fn errors_carry_the_request_id() {
    let gw = TestGateway::with_config(
        r#"
[auth.schemes.key]
scheme = { apiKeySecurityScheme = { location = "header", name = "X-API-Key" } }
keys = [{ id = "k", key = "the-key" }]
"#,
    )
    .await;
    let post = |body: String, headers: &[(&str, &str)]| {
        let mut req = gw
            .client
            .post(gw.url("/a2a/jsonrpc"))
            .header("content-type", "application/json")
            .body(body);
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        async move { req.send().await.unwrap().json::<Value>().await.unwrap() }
    };
    let key = ("x-api-key", "the-key");
    let v1 = ("a2a-version", "1.0");
    let bad_role = json!({"message": {"messageId": "m", "role": "ROLE_ROBOT", "parts": []}});
    for id in [json!("req-7"), json!(42)] {
        let body = |method: &str, params: Value| {
            json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string()
        };
        let cases = [
            (
                "invalid params (decoding)",
                body("SendMessage", bad_role.clone()),
                vec![key, v1],
                -32602,
            ),
            (
                "invalid params (missing)",
                body("GetTask", json!({})),
                vec![key, v1],
                -32602,
            ),
            (
                "method not found",
                body("tasks/get", json!({})),
                vec![key, v1],
                -32601,
            ),
            (
                "version not supported",
                body("GetTask", json!({"id": "x"})),
                vec![key, ("a2a-version", "9.0")],
                -32009,
            ),
            (
                "task not found",
                body("GetTask", json!({"id": "x"})),
                vec![key, v1],
                -32001,
            ),
            (
                "no credentials",
                body("GetTask", json!({"id": "x"})),
                vec![v1],
                -31401,
            ),
            (
                "bad credentials",
                body("GetTask", json!({"id": "x"})),
                vec![("x-api-key", "nope"), v1],
                -31401,
            ),
            (
                "invalid request (jsonrpc)",
                json!({"jsonrpc": "1.0", "id": id, "method": "GetTask"}).to_string(),
                vec![key, v1],
                -32600,
            ),
            (
                "invalid request (method)",
                json!({"jsonrpc": "2.0", "id": id, "method": 7}).to_string(),
                vec![key, v1],
                -32600,
            ),
        ];
        for (what, body, headers, code) in cases {
            let r = post(body, &headers).await;
            assert_eq!(r["error"]["code"], code, "{what}: {r}");
            assert_eq!(r["id"], id, "{what}: the request's id: {r}");
        }
    }
    let r = post("{oops".into(), &[key, v1]).await;
    assert_eq!(
        (r["error"]["code"].clone(), r["id"].clone()),
        (json!(-32700), Value::Null)
    );
    let r = post(
        r#"{"jsonrpc":"2.0","id":[1],"method":"GetTask"}"#.into(),
        &[key, v1],
    )
    .await;
    assert_eq!(
        (r["error"]["code"].clone(), r["id"].clone()),
        (json!(-32600), Value::Null)
    );
}

/// A body that is not JSON is ContentTypeNotSupported at the transport level: -32005 with
/// HTTP 200 and a null id (the envelope is not read).
#[tokio::test]
async fn a_body_that_is_not_json_is_content_type_not_supported() {
    let gw = TestGateway::start().await;
    let body = json!({"jsonrpc": "2.0", "id": 3, "method": "SendMessage",
                      "params": {"message": user_message("x")}});
    for ct in ["text/plain", "application/x-www-form-urlencoded"] {
        let resp = gw
            .client
            .post(gw.url("/a2a/jsonrpc"))
            .header("content-type", ct)
            .body(body.to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200, "{ct}");
        let r: Value = resp.json().await.unwrap();
        assert_eq!(r["error"]["code"], -32005, "{ct}: {r}");
        assert_eq!(r["id"], Value::Null, "{ct}");
        assert_eq!(
            r["error"]["data"][0]["reason"],
            "CONTENT_TYPE_NOT_SUPPORTED"
        );
        assert_eq!(r["error"]["data"][0]["metadata"]["mediaType"], ct);
    }
    for ct in [
        "application/json",
        "application/json; charset=utf-8",
        "application/a2a+json",
    ] {
        let r: Value = gw
            .client
            .post(gw.url("/a2a/jsonrpc"))
            .header("content-type", ct)
            .body(body.to_string())
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert!(r.get("result").is_some(), "{ct}: {r}");
    }
}

#[tokio::test]
async fn invalid_params_name_the_field() {
    let gw = TestGateway::start().await;
    for (params, field) in [
        (json!({}), "message"),
        (
            json!({"message": {"role": "ROLE_USER", "parts": [{"text": "x"}]}}),
            "message.messageId",
        ),
        (
            json!({"message": {"messageId": "m", "parts": [{"text": "x"}]}}),
            "message.role",
        ),
        (
            json!({"message": {"messageId": "m", "role": "ROLE_USER", "parts": []}}),
            "message.parts",
        ),
        (
            json!({"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{}]}}),
            "message.parts[0]",
        ),
        (
            json!({"message": {"messageId": "m", "role": "ROLE_WIZARD", "parts": [{"text": "x"}]}}),
            "message.role",
        ),
        (
            json!({"message": user_message("x"), "configuration": {"historyLength": -2}}),
            "configuration.historyLength",
        ),
        (
            json!({"message": user_message("x"), "configuration": {"taskPushNotificationConfig": {"url": "not a url"}}}),
            "configuration.taskPushNotificationConfig.url",
        ),
        (
            json!({"message": user_message("x"), "tenant": "nobody"}),
            "tenant",
        ),
    ] {
        let r = gw.rpc("SendMessage", params.clone()).await;
        assert_eq!(r["error"]["code"], -32602, "{params}: {r}");
        assert_eq!(
            r["error"]["data"][0]["metadata"]["field"], field,
            "{params}: {r}"
        );
        assert_eq!(
            r["error"]["data"][1]["@type"],
            "type.googleapis.com/google.rpc.BadRequest"
        );
    }
    let r = gw.rpc("GetTask", json!({})).await;
    assert_eq!(r["error"]["data"][0]["metadata"]["field"], "id");
    let r = gw.rpc("GetTask", json!("just a string")).await;
    assert_eq!(r["error"]["code"], -32602);
    let r = raw_error(&gw, r#"{"jsonrpc":"2.0","id":1,"method":"GetTask"}"#).await;
    assert_eq!(r["error"]["code"], -32602, "missing params");
}

#[tokio::test]
async fn a2a_errors_carry_error_info() {
    let gw = TestGateway::start().await;
    let r = gw.rpc("GetTask", json!({"id": "missing"})).await;
    assert_eq!(r["error"]["code"], -32001);
    let info = &r["error"]["data"][0];
    assert_eq!(info["@type"], "type.googleapis.com/google.rpc.ErrorInfo");
    assert_eq!(info["reason"], "TASK_NOT_FOUND");
    assert_eq!(info["domain"], "a2a-protocol.org");
    assert_eq!(info["metadata"]["taskId"], "missing");
}

#[tokio::test]
async fn version_negotiation() {
    let gw = TestGateway::start().await;
    let call = |version: Option<&'static str>| {
        let mut req = gw
            .client
            .post(gw.url("/a2a/jsonrpc"))
            .body(r#"{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{}}"#);
        if let Some(v) = version {
            req = req.header("A2A-Version", v);
        }
        async move { req.send().await.unwrap().json::<Value>().await.unwrap() }
    };
    assert!(call(Some("1.0")).await.get("result").is_some());
    assert!(
        call(Some("1.0.1")).await.get("result").is_some(),
        "patch versions are ignored"
    );
    assert!(
        call(None).await.get("result").is_some(),
        "a missing header is served as 1.0"
    );
    for v in ["99.0", "0.2", "2.0"] {
        let r = call(Some(v)).await;
        assert_eq!(r["error"]["code"], -32009, "{v}");
        assert_eq!(r["error"]["data"][0]["reason"], "VERSION_NOT_SUPPORTED");
    }
    // 0.3 is served, with its own methods: a 1.0 method asked for in 0.3 is not found
    // (dialect03.rs covers the 0.3 side).
    for v in ["0.3", "0.3.0"] {
        let r = call(Some(v)).await;
        assert_eq!(r["error"]["code"], -32601, "{v}: {r}");
        assert_eq!(r["error"]["data"]["reason"], "METHOD_NOT_FOUND", "{v}: {r}");
    }
    // Version before params: a request without messageId still gets -32009.
    let r = gw
        .client
        .post(gw.url("/a2a/jsonrpc?A2A-Version=99.0"))
        .body(r#"{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{}}}"#)
        .send()
        .await
        .unwrap()
        .json::<Value>()
        .await
        .unwrap();
    assert_eq!(r["error"]["code"], -32009);
}

#[tokio::test]
async fn extensions_are_echoed_and_required_ones_enforced() {
    let gw = TestGateway::with_config(
        r#"
        [[extensions]]
        uri = "urn:example:required"
        required = true
        [[extensions]]
        uri = "urn:example:optional"
        "#,
    )
    .await;
    let r = gw.rpc("ListTasks", json!({})).await;
    assert_eq!(r["error"]["code"], -32008);
    assert_eq!(
        r["error"]["data"][0]["metadata"]["extension"],
        "urn:example:required"
    );

    let resp = gw
        .client
        .post(gw.url("/a2a/jsonrpc"))
        .header("A2A-Version", "1.0")
        .header(
            "A2A-Extensions",
            "urn:example:required, urn:example:optional, urn:unknown",
        )
        .body(r#"{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{}}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(
        resp.headers()["a2a-extensions"],
        "urn:example:required, urn:example:optional",
        "activated and supported extensions are echoed; unknown ones ignored"
    );
    assert!(resp.json::<Value>().await.unwrap().get("result").is_some());
}

#[tokio::test]
async fn oversized_bodies_are_refused_clearly() {
    let gw = TestGateway::with_config("[limits]\nmax_body_bytes = 4096").await;
    let big = "x".repeat(10_000);
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
                      "params": {"message": user_message(&big)}});
    let resp = gw.post_raw(body.to_string()).await;
    assert_eq!(resp.status(), 413);
    let r: Value = resp.json().await.unwrap();
    assert_eq!(r["error"]["code"], -32600);
    assert!(r["error"]["message"].as_str().unwrap().contains("4096"));
}

/// An API key scheme (`X-API-Key: the-key`).
pub const KEY_AUTH: &str = r#"
[auth.schemes.key]
scheme = { apiKeySecurityScheme = { location = "header", name = "X-API-Key" } }
keys = [{ id = "k", key = "the-key" }]
"#;

/// A JSON-RPC 1.0 call without params, with the key of [`KEY_AUTH`].
async fn keyed_rpc(gw: &TestGateway, method: &str) -> Value {
    gw.client
        .post(gw.url("/a2a/jsonrpc"))
        .header("a2a-version", "1.0")
        .header("x-api-key", "the-key")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": method}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

async fn keyed_err_code(gw: &TestGateway, method: &str) -> i64 {
    let r = keyed_rpc(gw, method).await;
    r["error"]["code"].as_i64().unwrap_or_else(|| panic!("{r}"))
}

#[tokio::test]
async fn extended_card_gating() {
    let gw = TestGateway::start().await;
    assert_eq!(gw.err_code("GetExtendedAgentCard", json!({})).await, -32004);

    // Declared (to callers who authenticate) but not configured.
    let gw =
        TestGateway::with_config(&format!("{KEY_AUTH}[card]\nextended_agent_card = true")).await;
    assert_eq!(keyed_err_code(&gw, "GetExtendedAgentCard").await, -32007);

    // Configured, but without [auth] there is no authenticated caller: neither declared nor
    // served (the 1.0 answer to a capability that is false, UnsupportedOperation).
    let gw = TestGateway::with_config("[card]\nextended_agent_card = true").await;
    assert_eq!(gw.card().await["capabilities"]["extendedAgentCard"], false);
    assert_eq!(gw.err_code("GetExtendedAgentCard", json!({})).await, -32004);
    let gw = TestGateway::with_config("[extended_card]\ndescription = \"x\"").await;
    assert_eq!(gw.card().await["capabilities"]["extendedAgentCard"], false);
    assert_eq!(gw.err_code("GetExtendedAgentCard", json!({})).await, -32004);

    let gw = TestGateway::with_config(&format!(
        r#"{KEY_AUTH}
        [extended_card]
        description = "the extended card"
        [[extended_card.skills]]
        id = "private"
        name = "Private"
        description = "only in the extended card"
        tags = ["private"]
        "#
    ))
    .await;
    assert_eq!(gw.card().await["capabilities"]["extendedAgentCard"], true);
    let anonymous = gw
        .post_raw(json!({"jsonrpc": "2.0", "id": 1, "method": "GetExtendedAgentCard"}).to_string())
        .await;
    assert_eq!(anonymous.status(), 401);
    let anonymous: Value = anonymous.json().await.unwrap();
    assert_eq!(anonymous["error"]["code"], -31401, "{anonymous}");
    let card = keyed_rpc(&gw, "GetExtendedAgentCard").await["result"].clone();
    assert_eq!(card["description"], "the extended card");
    assert!(
        card["skills"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["id"] == "private")
    );
}

#[tokio::test]
async fn health_endpoints() {
    let gw = TestGateway::start().await;
    for path in ["/healthz", "/readyz"] {
        let resp = gw.client.get(gw.url(path)).send().await.unwrap();
        assert_eq!(resp.status(), 200, "{path}");
    }
}
