//! ListTasks: paging, ordering, filters and validation.

use std::collections::HashSet;

use serde_json::json;

use crate::harness::*;

#[tokio::test]
async fn pages_through_120_tasks_exactly_once_newest_first() {
    let gw = TestGateway::start().await;
    let mut created = Vec::new();
    for i in 0..120 {
        created.push(
            gw.send_text(&format!("t{i}")).await["id"]
                .as_str()
                .unwrap()
                .to_owned(),
        );
    }
    let mut seen = Vec::new();
    let mut token = String::new();
    let mut pages = 0;
    loop {
        let page = gw
            .ok("ListTasks", json!({"pageSize": 50, "pageToken": token}))
            .await;
        pages += 1;
        assert_eq!(page["totalSize"], 120);
        assert_eq!(page["pageSize"], 50);
        for t in page["tasks"].as_array().unwrap() {
            assert!(
                t.get("artifacts").is_none(),
                "artifacts omitted unless asked"
            );
            seen.push(t["id"].as_str().unwrap().to_owned());
        }
        token = page["nextPageToken"]
            .as_str()
            .expect("nextPageToken always present")
            .to_owned();
        if token.is_empty() {
            break;
        }
    }
    assert_eq!(pages, 3);
    assert_eq!(seen.len(), 120);
    assert_eq!(
        seen.iter().collect::<HashSet<_>>().len(),
        120,
        "no task twice"
    );
    created.reverse();
    assert_eq!(seen, created, "newest first");
}

#[tokio::test]
async fn filters_and_defaults() {
    let gw = TestGateway::start().await;
    let mut m = user_message("x");
    m["contextId"] = json!("ctx-a");
    gw.ok("SendMessage", json!({"message": m})).await;
    gw.send_text("y").await;
    let waiting = gw
        .scenario(json!({"end": "input-required"}), json!({}))
        .await["task"]
        .clone();

    let all = gw.ok("ListTasks", json!({})).await;
    assert_eq!(all["totalSize"], 3);
    assert_eq!(all["pageSize"], 50, "the effective page size");
    assert_eq!(all["nextPageToken"], "");

    let by_ctx = gw.ok("ListTasks", json!({"contextId": "ctx-a"})).await;
    assert_eq!(by_ctx["tasks"].as_array().unwrap().len(), 1);

    let by_state = gw
        .ok("ListTasks", json!({"status": "TASK_STATE_INPUT_REQUIRED"}))
        .await;
    assert_eq!(by_state["tasks"][0]["id"], waiting["id"]);
    assert_eq!(by_state["totalSize"], 1);

    let future = gw
        .ok(
            "ListTasks",
            json!({"statusTimestampAfter": "2999-01-01T00:00:00Z"}),
        )
        .await;
    assert_eq!(future["totalSize"], 0);
    assert_eq!(future["tasks"], json!([]));
    let past = gw
        .ok(
            "ListTasks",
            json!({"statusTimestampAfter": "2000-01-01T00:00:00Z"}),
        )
        .await;
    assert_eq!(past["totalSize"], 3);

    let with_artifacts = gw
        .ok(
            "ListTasks",
            json!({"includeArtifacts": true, "historyLength": 0}),
        )
        .await;
    for t in with_artifacts["tasks"].as_array().unwrap() {
        assert!(t.get("history").is_none());
    }
    assert!(
        with_artifacts["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t.get("artifacts").is_some())
    );
}

#[tokio::test]
async fn invalid_list_parameters() {
    let gw = TestGateway::start().await;
    for (params, field) in [
        (json!({"pageSize": 0}), "pageSize"),
        (json!({"pageSize": 101}), "pageSize"),
        (json!({"pageSize": -5}), "pageSize"),
        (json!({"pageToken": "not-a-token"}), "pageToken"),
        (json!({"historyLength": -1}), "historyLength"),
        (json!({"status": "TASK_STATE_SLEEPING"}), "status"),
        (
            json!({"statusTimestampAfter": "yesterday"}),
            "statusTimestampAfter",
        ),
    ] {
        let resp = gw.rpc("ListTasks", params.clone()).await;
        assert_eq!(resp["error"]["code"], -32602, "{params}");
        assert_eq!(
            resp["error"]["data"][0]["metadata"]["field"], field,
            "{params}: {resp}"
        );
    }
}
