//! Push-notification config CRUD and its validation.

use serde_json::json;

use crate::harness::*;

#[tokio::test]
async fn create_get_list_delete() {
    let gw = TestGateway::start().await;
    let task = gw.send_text("x").await;
    let tid = task["id"].as_str().unwrap();

    let created = gw
        .ok(
            "CreateTaskPushNotificationConfig",
            json!({"taskId": tid, "url": "https://hooks.example.com/a2a", "token": "tok",
                   "authentication": {"scheme": "Bearer", "credentials": "secret"}}),
        )
        .await;
    let cid = created["id"]
        .as_str()
        .expect("the server assigns an id")
        .to_owned();
    assert_eq!(created["taskId"], tid);
    assert_eq!(created["authentication"]["scheme"], "Bearer");

    let mine = gw
        .ok(
            "CreateTaskPushNotificationConfig",
            json!({"taskId": tid, "id": "my-id", "url": "https://hooks.example.com/2"}),
        )
        .await;
    assert_eq!(mine["id"], "my-id");

    let got = gw
        .ok(
            "GetTaskPushNotificationConfig",
            json!({"taskId": tid, "id": cid}),
        )
        .await;
    assert_eq!(got, created);

    let page = gw
        .ok(
            "ListTaskPushNotificationConfigs",
            json!({"taskId": tid, "pageSize": 1}),
        )
        .await;
    assert_eq!(page["configs"].as_array().unwrap().len(), 1);
    let next = page["nextPageToken"].as_str().unwrap();
    assert!(!next.is_empty());
    let page2 = gw
        .ok(
            "ListTaskPushNotificationConfigs",
            json!({"taskId": tid, "pageSize": 1, "pageToken": next}),
        )
        .await;
    assert_eq!(page2["configs"][0]["id"], "my-id");

    let deleted = gw
        .ok(
            "DeleteTaskPushNotificationConfig",
            json!({"taskId": tid, "id": cid}),
        )
        .await;
    assert_eq!(deleted, json!({}));
    gw.ok(
        "DeleteTaskPushNotificationConfig",
        json!({"taskId": tid, "id": cid}),
    )
    .await;
    assert_eq!(
        gw.err_code(
            "GetTaskPushNotificationConfig",
            json!({"taskId": tid, "id": cid})
        )
        .await,
        -32001
    );
    let all = gw
        .ok("ListTaskPushNotificationConfigs", json!({"taskId": tid}))
        .await;
    assert_eq!(all["configs"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn inline_config_with_send_message() {
    let gw = TestGateway::start().await;
    let task = gw
        .ok(
            "SendMessage",
            json!({"message": user_message("x"),
                   "configuration": {"taskPushNotificationConfig": {"url": "https://hooks.example.com/inline"}}}),
        )
        .await["task"]
        .clone();
    let list = gw
        .ok(
            "ListTaskPushNotificationConfigs",
            json!({"taskId": task["id"]}),
        )
        .await;
    assert_eq!(
        list["configs"][0]["url"],
        "https://hooks.example.com/inline"
    );
    assert_eq!(list["configs"][0]["taskId"], task["id"]);
}

#[tokio::test]
async fn validation_and_missing_tasks() {
    let gw = TestGateway::start().await;
    let task = gw.send_text("x").await;
    let tid = task["id"].as_str().unwrap();
    for (params, field) in [
        (json!({"taskId": tid}), "url"),
        (json!({"taskId": tid, "url": "ftp://example.com"}), "url"),
        (
            json!({"taskId": tid, "url": "https://e.com", "id": "a/b"}),
            "id",
        ),
        (
            json!({"taskId": tid, "url": "https://e.com", "authentication": {"scheme": ""}}),
            "authentication.scheme",
        ),
        (json!({"url": "https://e.com"}), "taskId"),
    ] {
        let r = gw
            .rpc("CreateTaskPushNotificationConfig", params.clone())
            .await;
        assert_eq!(r["error"]["code"], -32602, "{params}");
        assert_eq!(
            r["error"]["data"][0]["metadata"]["field"], field,
            "{params}"
        );
    }
    let missing = json!({"taskId": "nope", "url": "https://e.com"});
    assert_eq!(
        gw.err_code("CreateTaskPushNotificationConfig", missing)
            .await,
        -32001
    );
    assert_eq!(
        gw.err_code("ListTaskPushNotificationConfigs", json!({"taskId": "nope"}))
            .await,
        -32001
    );
    assert_eq!(
        gw.err_code(
            "ListTaskPushNotificationConfigs",
            json!({"taskId": tid, "pageSize": 500})
        )
        .await,
        -32602
    );
}

#[tokio::test]
async fn push_can_be_disabled() {
    let gw = TestGateway::with_config("[card]\npush_notifications = false").await;
    let task = gw.send_text("x").await;
    let tid = task["id"].as_str().unwrap();
    for (method, params) in [
        (
            "CreateTaskPushNotificationConfig",
            json!({"taskId": tid, "url": "https://e.com"}),
        ),
        (
            "GetTaskPushNotificationConfig",
            json!({"taskId": tid, "id": "x"}),
        ),
        ("ListTaskPushNotificationConfigs", json!({"taskId": tid})),
        (
            "DeleteTaskPushNotificationConfig",
            json!({"taskId": tid, "id": "x"}),
        ),
    ] {
        let r = gw.rpc(method, params).await;
        assert_eq!(r["error"]["code"], -32003, "{method}");
        assert_eq!(
            r["error"]["data"][0]["reason"],
            "PUSH_NOTIFICATION_NOT_SUPPORTED"
        );
    }
    let r = gw
        .rpc(
            "SendMessage",
            json!({"message": user_message("x"),
                   "configuration": {"taskPushNotificationConfig": {"url": "https://e.com"}}}),
        )
        .await;
    assert_eq!(r["error"]["code"], -32003);
}
