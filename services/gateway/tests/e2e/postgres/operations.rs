//! Every store-backed A2A operation over JSON-RPC with the gateway on PostgreSQL: the same
//! answers the in-memory gateway gives (the store conformance suite covers the rules in depth).

use serde_json::json;

use crate::harness::*;

async fn pg_gateway() -> (TestGateway, a2a_testing::TestDatabase) {
    let db = a2a_testing::TestDatabase::create().await;
    let gw = TestGateway::with_database("", db.url()).await;
    (gw, db)
}

#[tokio::test]
async fn send_get_list_and_multi_turn() {
    let (gw, _db) = pg_gateway().await;
    let task = gw.send_text("hello").await;
    assert_eq!(state(&task), "TASK_STATE_COMPLETED");
    assert_eq!(task["artifacts"][0]["parts"][0]["text"], "hello");
    let id = task["id"].as_str().unwrap();
    assert_eq!(gw.ok("GetTask", json!({"id": id})).await, task);
    let trimmed = gw
        .ok("GetTask", json!({"id": id, "historyLength": 0}))
        .await;
    assert!(trimmed.get("history").is_none());
    assert_eq!(
        gw.err_code("GetTask", json!({"id": "missing"})).await,
        -32001
    );

    let asked = gw
        .scenario(json!({"chunks": 2, "end": "input-required"}), json!({}))
        .await["task"]
        .clone();
    assert_eq!(state(&asked), "TASK_STATE_INPUT_REQUIRED");
    let mut answer = user_message("answer");
    answer["taskId"] = asked["id"].clone();
    let done = gw.ok("SendMessage", json!({"message": answer})).await["task"].clone();
    assert_eq!(state(&done), "TASK_STATE_COMPLETED");
    let roles: Vec<_> = done["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(roles, ["ROLE_USER", "ROLE_AGENT", "ROLE_USER"]);
    let mut late = user_message("too late");
    late["taskId"] = asked["id"].clone();
    assert_eq!(
        gw.err_code("SendMessage", json!({"message": late})).await,
        -32004
    );

    let page = gw
        .ok(
            "ListTasks",
            json!({"pageSize": 1, "includeArtifacts": true}),
        )
        .await;
    assert_eq!(page["totalSize"], 2);
    assert_eq!(page["tasks"][0]["id"], done["id"], "newest status first");
    let token = page["nextPageToken"].as_str().unwrap();
    let rest = gw
        .ok("ListTasks", json!({"pageSize": 1, "pageToken": token}))
        .await;
    assert_eq!(rest["tasks"][0]["id"], task["id"]);
    assert_eq!(rest["nextPageToken"], "");
    let filtered = gw
        .ok("ListTasks", json!({"contextId": task["contextId"]}))
        .await;
    assert_eq!(filtered["totalSize"], 1);
    assert_eq!(
        gw.err_code("ListTasks", json!({"pageToken": "garbage!"}))
            .await,
        -32602
    );
}

#[tokio::test]
async fn streams_subscribe_and_cancel() {
    let (gw, _db) = pg_gateway().await;
    let events = gw
        .stream(
            "SendStreamingMessage",
            json!({"tenant": "scenario", "message": script_message(json!({"chunks": 3, "delayMs": 5}))}),
        )
        .await
        .collect()
        .await;
    let ids: Vec<u64> = events
        .iter()
        .map(|e| e.id.as_ref().unwrap().parse().unwrap())
        .collect();
    assert_eq!(ids, (1..=6).collect::<Vec<_>>());
    let task_id = events[0].data["result"]["task"]["id"].as_str().unwrap();
    let stored = gw.ok("GetTask", json!({"id": task_id})).await;
    assert_eq!(state(&stored), "TASK_STATE_COMPLETED");
    assert_eq!(stored["artifacts"][0]["parts"].as_array().unwrap().len(), 3);

    let hanging = gw
        .scenario(json!({"end": "hang"}), json!({"returnImmediately": true}))
        .await["task"]
        .clone();
    let mut watcher = gw
        .stream("SubscribeToTask", json!({"id": hanging["id"]}))
        .await;
    let first = watcher.next().await.unwrap();
    assert_eq!(first.data["result"]["task"]["id"], hanging["id"]);
    let canceled = gw.ok("CancelTask", json!({"id": hanging["id"]})).await;
    assert_eq!(state(&canceled), "TASK_STATE_CANCELED");
    let tail = watcher.collect().await;
    let last = &tail.last().expect("the cancel reaches the subscriber").data;
    assert_eq!(
        last["result"]["statusUpdate"]["status"]["state"],
        "TASK_STATE_CANCELED"
    );
    assert_eq!(
        gw.err_code("CancelTask", json!({"id": hanging["id"]}))
            .await,
        -32002
    );
}

/// With Redis: without it nothing delivers, and push is not offered (see `push_delivery`).
#[tokio::test]
async fn push_config_crud() {
    let db = a2a_testing::TestDatabase::create().await;
    let redis = a2a_testing::TestRedis::create().await;
    let gw = TestGateway::with_database_and_redis("", db.url(), &redis).await;
    let task = gw.send_text("x").await;
    let tid = task["id"].as_str().unwrap();
    let created = gw
        .ok(
            "CreateTaskPushNotificationConfig",
            json!({"taskId": tid, "id": "a", "url": "https://hooks.example.com/a", "token": "t",
                   "authentication": {"scheme": "Bearer", "credentials": "secret"}}),
        )
        .await;
    assert_eq!(created["authentication"]["credentials"], "secret");
    gw.ok(
        "CreateTaskPushNotificationConfig",
        json!({"taskId": tid, "id": "b", "url": "https://hooks.example.com/b"}),
    )
    .await;
    let got = gw
        .ok(
            "GetTaskPushNotificationConfig",
            json!({"taskId": tid, "id": "a"}),
        )
        .await;
    assert_eq!(got, created);
    let page = gw
        .ok(
            "ListTaskPushNotificationConfigs",
            json!({"taskId": tid, "pageSize": 1}),
        )
        .await;
    assert_eq!(page["configs"][0]["id"], "a");
    let next = gw
        .ok(
            "ListTaskPushNotificationConfigs",
            json!({"taskId": tid, "pageSize": 1, "pageToken": page["nextPageToken"]}),
        )
        .await;
    assert_eq!(next["configs"][0]["id"], "b");
    gw.ok(
        "DeleteTaskPushNotificationConfig",
        json!({"taskId": tid, "id": "a"}),
    )
    .await;
    assert_eq!(
        gw.err_code(
            "GetTaskPushNotificationConfig",
            json!({"taskId": "missing", "id": "a"})
        )
        .await,
        -32001
    );
    let ready = gw.client.get(gw.url("/readyz")).send().await.unwrap();
    assert_eq!(ready.status(), 200);
}

/// The events an agent produces together are stored in one write: echo's whole answer (the task
/// as created, its artifact, COMPLETED) is one transaction, a single insert of the finished task
/// (`now()` is the transaction's start, so one timestamp means one transaction), and its task
/// row was never updated afterwards.
#[tokio::test]
async fn an_agents_burst_of_events_is_one_write() {
    let (gw, db) = pg_gateway().await;
    let task = gw.send_text("hello").await;
    let id = task["id"].as_str().unwrap();
    let pool = sqlx::PgPool::connect(db.url()).await.unwrap();
    let (events, times): (i64, i64) = sqlx::query_as(
        "SELECT count(*), count(DISTINCT created_at) FROM task_events WHERE task_id = $1",
    )
    .bind(id)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!((events, times), (3, 1), "three events, one transaction");
    let (seq, created, updated): (i64, f64, f64) = sqlx::query_as(
        "SELECT seq, extract(epoch FROM created_at)::float8, extract(epoch FROM updated_at)::float8 \
           FROM tasks WHERE id = $1",
    )
    .bind(id)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(seq, 3);
    assert_eq!(created, updated, "inserted finished, never updated");
    pool.close().await;
}
