//! 200 tasks of every kind, a graceful stop, a new process on the same database: everything a
//! client can read is identical.

use futures::StreamExt;
use serde_json::{Value, json};

use super::process::GatewayProcess;
use crate::harness::{script_message, user_message};

const CONCURRENCY: usize = 16;

/// What a client can read about `ids`: GetTask (all history and the last message only), every
/// ListTasks page (unfiltered with artifacts, and filtered), and every push config.
async fn read_all(gw: &GatewayProcess, ids: &[String], push_ids: &[String]) -> Vec<Value> {
    let mut seen = Vec::new();
    for id in ids {
        seen.push(gw.ok("GetTask", json!({"id": id})).await);
        seen.push(
            gw.ok("GetTask", json!({"id": id, "historyLength": 1}))
                .await,
        );
    }
    for filter in [
        json!({"includeArtifacts": true}),
        json!({"status": "TASK_STATE_INPUT_REQUIRED"}),
        json!({"contextId": "shared-context", "historyLength": 0}),
    ] {
        let mut token = String::new();
        loop {
            let mut params = filter.clone();
            params["pageSize"] = json!(37);
            params["pageToken"] = json!(token);
            let page = gw.ok("ListTasks", params).await;
            token = page["nextPageToken"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            seen.push(page);
            if token.is_empty() {
                break;
            }
        }
    }
    for id in push_ids {
        let mut token = String::new();
        loop {
            let params = json!({"taskId": id, "pageSize": 2, "pageToken": token});
            let list = gw.ok("ListTaskPushNotificationConfigs", params).await;
            for config in list["configs"].as_array().unwrap() {
                let one = json!({"taskId": id, "id": config["id"]});
                seen.push(gw.ok("GetTaskPushNotificationConfig", one).await);
            }
            token = list["nextPageToken"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            seen.push(list);
            if token.is_empty() {
                break;
            }
        }
    }
    seen
}

/// Creates task number `n` (of 200): 70 echo (some in a shared context), 60 scenarios with
/// chunks, 40 input-required (half answered), 30 echo tasks with push configs. Returns the id
/// and whether it has push configs.
async fn create(gw: &GatewayProcess, n: usize) -> (String, bool) {
    let task = match n {
        0..70 => {
            let mut message = user_message(&format!("echo {n}"));
            if n.is_multiple_of(3) {
                message["contextId"] = json!("shared-context");
            }
            gw.ok("SendMessage", json!({"message": message})).await["task"].clone()
        }
        70..130 => {
            let script = json!({"chunks": 1 + n % 4, "end": "completed"});
            let params = json!({"tenant": "scenario", "message": script_message(script)});
            gw.ok("SendMessage", params).await["task"].clone()
        }
        130..170 => {
            let script = json!({"chunks": 1, "end": "input-required"});
            let params = json!({"tenant": "scenario", "message": script_message(script)});
            let task = gw.ok("SendMessage", params).await["task"].clone();
            if n.is_multiple_of(2) {
                let mut answer = user_message("the answer");
                answer["taskId"] = task["id"].clone();
                gw.ok("SendMessage", json!({"message": answer})).await["task"].clone()
            } else {
                task
            }
        }
        _ => {
            let config = json!({"url": "https://hooks.example.com/inline", "token": "inline"});
            let params = json!({"message": user_message("push"),
                                "configuration": {"taskPushNotificationConfig": config}});
            let task = gw.ok("SendMessage", params).await["task"].clone();
            for i in 0..2 {
                let params = json!({"taskId": task["id"], "id": format!("cfg-{i}"),
                    "url": format!("https://hooks.example.com/{n}/{i}"), "token": "tok",
                    "authentication": {"scheme": "Bearer", "credentials": format!("secret-{n}")}});
                gw.ok("CreateTaskPushNotificationConfig", params).await;
            }
            return (task["id"].as_str().unwrap().to_owned(), true);
        }
    };
    (task["id"].as_str().unwrap().to_owned(), false)
}

#[tokio::test]
async fn a_new_process_on_the_same_database_serves_identical_tasks() {
    let db = a2a_testing::TestDatabase::create().await;
    // Redis too: push configs (read back below) are offered only where a worker can deliver.
    let redis = a2a_testing::TestRedis::create().await;
    let bus = [
        ("A2A_REDIS_URL", redis.url()),
        ("A2A_REDIS_PREFIX", redis.prefix()),
    ];
    GatewayProcess::migrate(db.url());
    let first = GatewayProcess::start_with(db.url(), &bus);
    let created: Vec<(String, bool)> = futures::stream::iter(0..200)
        .map(|n| create(&first, n))
        .buffer_unordered(CONCURRENCY)
        .collect()
        .await;
    let ids: Vec<String> = created.iter().map(|(id, _)| id.clone()).collect();
    let push_ids: Vec<String> = created
        .iter()
        .filter(|(_, push)| *push)
        .map(|(id, _)| id.clone())
        .collect();
    let before = read_all(&first, &ids, &push_ids).await;
    let total = before
        .iter()
        .find_map(|v| v.get("totalSize"))
        .and_then(Value::as_u64);
    assert_eq!(total, Some(200));
    first.stop();

    // Migrating on start (A2A_MIGRATE=1) is a no-op on a migrated database.
    let second = GatewayProcess::start_with(db.url(), &[bus[0], bus[1], ("A2A_MIGRATE", "1")]);
    let after = read_all(&second, &ids, &push_ids).await;
    assert_eq!(before.len(), after.len());
    for (b, a) in before.iter().zip(&after) {
        assert_eq!(b, a, "identical after the restart");
    }
    // And the new process keeps working on the old tasks: answer one that asked for input.
    let waiting = after
        .iter()
        .find(|v| v["status"]["state"] == "TASK_STATE_INPUT_REQUIRED")
        .expect("an input-required task");
    let mut answer = user_message("late answer");
    answer["taskId"] = waiting["id"].clone();
    let done = second.ok("SendMessage", json!({"message": answer})).await;
    assert_eq!(done["task"]["status"]["state"], "TASK_STATE_COMPLETED");
    second.stop();
}
