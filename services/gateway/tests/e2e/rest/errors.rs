//! REST errors and transport rules: the `google.rpc.Status` body, 404/405/413, content types,
//! `A2A-Version` and `A2A-Extensions`.

use reqwest::Method;
use serde_json::json;

use super::*;

#[tokio::test]
async fn content_types_in_and_out() {
    let gw = TestGateway::start().await;
    let body = json!({"message": user_message("x")}).to_string();
    for ct in [
        Some("application/json"),
        Some("application/a2a+json"),
        Some("application/json; charset=utf-8"),
        None,
    ] {
        let mut req = request(&gw, Method::POST, "/message:send").body(body.clone());
        if let Some(ct) = ct {
            req = req.header("content-type", ct);
        }
        let r = read(req.send().await.unwrap()).await;
        assert_eq!(r.status, 200, "{ct:?}: {}", r.body);
        assert_eq!(r.content_type(), "application/json");
    }
    let r = read(
        request(&gw, Method::POST, "/message:send")
            .header("content-type", "application/a2a+json")
            .header("accept", "application/a2a+json")
            .body(body.clone())
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(r.status, 200);
    assert_eq!(
        r.content_type(),
        "application/a2a+json",
        "a2a+json when Accept asks for it"
    );
    // Errors stay application/json whatever Accept says.
    let r = read(
        request(&gw, Method::GET, "/tasks/missing")
            .header("accept", "application/a2a+json")
            .send()
            .await
            .unwrap(),
    )
    .await;
    status_error(&r, 404, "NOT_FOUND", "TASK_NOT_FOUND");

    let r = read(
        request(&gw, Method::POST, "/message:send")
            .header("content-type", "text/plain")
            .body(body)
            .send()
            .await
            .unwrap(),
    )
    .await;
    // A body that is not JSON: 415 at the transport level (a part's media type stays 400).
    let e = status_error(&r, 415, "INVALID_ARGUMENT", "CONTENT_TYPE_NOT_SUPPORTED");
    assert_eq!(
        e["details"][0]["metadata"],
        json!({"mediaType": "text/plain", "agent": "gateway"})
    );
}

#[tokio::test]
async fn error_bodies_are_google_rpc_status() {
    let gw = TestGateway::start().await;
    let r = call(&gw, Method::GET, "/tasks/missing", None).await;
    assert_eq!(
        r.body,
        json!({"error": {
            "code": 404,
            "status": "NOT_FOUND",
            "message": "task missing not found",
            "details": [{"@type": INFO, "reason": "TASK_NOT_FOUND",
                         "domain": "a2a-protocol.org", "metadata": {"taskId": "missing"}}],
        }})
    );
    assert!(r.headers.get("retry-after").is_none());

    // Malformed JSON.
    let resp = request(&gw, Method::POST, "/message:send")
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    let r = read(resp).await;
    let e = status_error(&r, 400, "INVALID_ARGUMENT", "PARSE_ERROR");
    assert_eq!(e["details"].as_array().unwrap().len(), 1);

    // JSON that is not the request type names the field.
    let mut m = user_message("x");
    m["role"] = json!("ROLE_WIZARD");
    let r = call(
        &gw,
        Method::POST,
        "/message:send",
        Some(json!({"message": m})),
    )
    .await;
    let e = status_error(&r, 400, "INVALID_ARGUMENT", "INVALID_PARAMS");
    assert_eq!(
        e["details"][0]["metadata"],
        json!({"field": "message.role"})
    );
    assert_eq!(
        e["details"][1],
        json!({"@type": "type.googleapis.com/google.rpc.BadRequest",
               "fieldViolations": [{"field": "message.role",
                                    "description": e["details"][1]["fieldViolations"][0]["description"]}]})
    );
    let r = call(&gw, Method::POST, "/message:send", Some(json!([1, 2]))).await;
    let e = status_error(&r, 400, "INVALID_ARGUMENT", "INVALID_PARAMS");
    assert_eq!(e["details"][0]["metadata"]["field"], "body");

    // A message to a terminal task (-32004 class).
    let done = echo_task(&gw).await;
    let mut m = user_message("again");
    m["taskId"] = done["id"].clone();
    let r = call(
        &gw,
        Method::POST,
        "/message:send",
        Some(json!({"message": m})),
    )
    .await;
    status_error(&r, 400, "FAILED_PRECONDITION", "UNSUPPORTED_OPERATION");
}

#[tokio::test]
async fn unknown_paths_and_wrong_verbs() {
    let gw = TestGateway::start().await;
    for path in [
        "",
        "/",
        "/nope",
        "/message:fly",
        "/tasks/t1:fly",
        "/a/b/c/d/e/f",
    ] {
        let r = call(&gw, Method::GET, path, None).await;
        let e = status_error(&r, 404, "UNIMPLEMENTED", "METHOD_NOT_FOUND");
        assert_eq!(
            e["details"][0]["metadata"]["method"],
            format!("GET /a2a/rest{path}"),
            "{path}"
        );
    }
    for (method, path, allow) in [
        (Method::GET, "/message:send", "POST"),
        (Method::PUT, "/message:stream", "POST"),
        (Method::POST, "/tasks", "GET"),
        (Method::DELETE, "/scenario/tasks/t1", "GET"),
        (Method::GET, "/tasks/t1:cancel", "POST"),
        (Method::DELETE, "/tasks/t1:subscribe", "GET, POST"),
        (
            Method::PATCH,
            "/tasks/t1/pushNotificationConfigs",
            "GET, POST",
        ),
        (
            Method::POST,
            "/tasks/t1/pushNotificationConfigs/c",
            "GET, DELETE",
        ),
        (Method::POST, "/extendedAgentCard", "GET"),
    ] {
        let r = call(&gw, method.clone(), path, None).await;
        let e = status_error(&r, 405, "UNIMPLEMENTED", "METHOD_NOT_ALLOWED");
        assert_eq!(r.headers["allow"], allow, "{method} {path}");
        assert_eq!(e["details"][0]["metadata"]["allow"], allow);
    }
}

#[tokio::test]
async fn oversized_bodies_get_413() {
    let gw = TestGateway::with_config("[limits]\nmax_body_bytes = 4096").await;
    let body = json!({"message": user_message(&"x".repeat(10_000))});
    let r = call(&gw, Method::POST, "/message:send", Some(body)).await;
    let e = status_error(&r, 413, "RESOURCE_EXHAUSTED", "PAYLOAD_TOO_LARGE");
    assert_eq!(e["details"][0]["metadata"]["limit"], "4096");
}

#[tokio::test]
async fn version_negotiation() {
    let gw = TestGateway::start().await;
    let r = read(
        gw.client
            .get(gw.url("/a2a/rest/tasks"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(r.status, 200, "a missing A2A-Version is served as 1.0");
    let r = read(
        gw.client
            .get(gw.url("/a2a/rest/tasks"))
            .header("a2a-version", "1.0.1")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(r.status, 200);
    // 0.3 is served under `/v1/…` (dialect03.rs): a 1.0 path asked for in 0.3 is not found.
    let r = read(
        gw.client
            .get(gw.url("/a2a/rest/tasks"))
            .header("a2a-version", "0.3")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(r.status, 404);
    for v in ["99.0", "0.2"] {
        let r = read(
            gw.client
                .get(gw.url("/a2a/rest/tasks"))
                .header("a2a-version", v)
                .send()
                .await
                .unwrap(),
        )
        .await;
        let e = status_error(&r, 400, "FAILED_PRECONDITION", "VERSION_NOT_SUPPORTED");
        assert_eq!(e["details"][0]["metadata"]["version"], v);
    }
    // The query parameter works too, and the version is checked before the body.
    let r = read(
        gw.client
            .post(gw.url("/a2a/rest/message:send?A2A-Version=99.0"))
            .header("content-type", "application/json")
            .body(r#"{"message":{}}"#)
            .send()
            .await
            .unwrap(),
    )
    .await;
    status_error(&r, 400, "FAILED_PRECONDITION", "VERSION_NOT_SUPPORTED");
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
    let r = call(&gw, Method::GET, "/tasks", None).await;
    let e = status_error(&r, 400, "FAILED_PRECONDITION", "EXTENSION_SUPPORT_REQUIRED");
    assert_eq!(
        e["details"][0]["metadata"]["extension"],
        "urn:example:required"
    );
    let r = read(
        request(&gw, Method::GET, "/tasks")
            .header(
                "a2a-extensions",
                "urn:example:required, urn:example:optional, urn:unknown",
            )
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(r.status, 200);
    assert_eq!(
        r.headers["a2a-extensions"],
        "urn:example:required, urn:example:optional"
    );
    // Echoed on streams too.
    let resp = request(&gw, Method::POST, "/scenario/message:stream")
        .header("a2a-extensions", "urn:example:required")
        .header("content-type", "application/json")
        .body(json!({"message": script_message(json!({}))}).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.headers()["a2a-extensions"], "urn:example:required");
    let events = SseStream::new(resp).collect().await;
    assert_eq!(kinds(&events).last().unwrap(), "TASK_STATE_COMPLETED");
}
