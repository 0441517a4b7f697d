//! Bounded Redis (issue 27 item 4, review H6): events of about 1 MiB (echo's Task with the
//! message in its history, and its artifact) are published to Redis as references without
//! their payload, so the streams hold a few hundred bytes per entry whatever the artifacts
//! weigh; the worker reads each referenced event from the ledger and the webhook gets it whole.

use std::collections::HashMap;
use std::time::Duration;

use serde_json::json;

use crate::harness::Deployment;
use crate::receiver::{Receiver, task_id_of};

/// Echoed text per task: with the JSON envelope, just under the default 1 MiB body limit.
const TEXT: usize = 1000 * 1024;
const TASKS: usize = 4;

#[tokio::test]
async fn artifacts_of_1_mib_reach_the_webhook_whole_while_redis_holds_only_references() {
    let env = Deployment::start("127.0.0.1").await;
    let receiver = Receiver::start().await;
    let _worker = env.worker(&[]);
    let url = receiver.url("/hook");
    let mut tasks = Vec::new();
    for n in 0..TASKS {
        let text = format!("{n}").repeat(TEXT);
        let resp = env
            .rpc(
                "SendMessage",
                json!({"message": {"messageId": uuid::Uuid::new_v4().to_string(),
                                   "role": "ROLE_USER", "parts": [{"text": text}]},
                       "configuration": {"taskPushNotificationConfig": {"url": url}}}),
            )
            .await;
        assert!(resp.get("error").is_none(), "SendMessage failed: {resp}");
        let task = &resp["result"]["task"];
        assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED");
        tasks.push(task["id"].as_str().unwrap().to_owned());
    }

    // Redis: every entry of the worker's stream is small; the large ones carry no payload.
    let client = redis::Client::open(env.redis.url()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    // Every partition of the worker's input (the gateway's default count).
    let mut entries = redis::streams::StreamRangeReply::default();
    for p in 0..a2a_bus::keys::DEFAULT_PARTITIONS {
        let part: redis::streams::StreamRangeReply = redis::cmd("XRANGE")
            .arg(a2a_bus::events_key(env.redis.prefix(), p))
            .arg("-")
            .arg("+")
            .query_async(&mut conn)
            .await
            .unwrap();
        entries.ids.extend(part.ids);
    }
    assert!(entries.ids.len() >= TASKS * 3, "{}", entries.ids.len());
    let references = entries
        .ids
        .iter()
        .filter(|e| !e.map.contains_key("e"))
        .count();
    assert!(
        references >= TASKS * 2,
        "the Task and the artifact of each task are references: {references}"
    );
    let mut bytes = 0;
    for p in 0..a2a_bus::keys::DEFAULT_PARTITIONS {
        let used: Option<u64> = redis::cmd("MEMORY")
            .arg("USAGE")
            .arg(a2a_bus::events_key(env.redis.prefix(), p))
            .query_async(&mut conn)
            .await
            .unwrap();
        bytes += used.unwrap_or(0);
    }
    assert!(
        bytes < (entries.ids.len() * a2a_bus::DEFAULT_INLINE_MAX) as u64,
        "{bytes} bytes for {} entries; events of 1 MiB each would be several MiB",
        entries.ids.len()
    );

    // The webhook gets every event, the artifact whole.
    receiver
        .wait_for(Duration::from_secs(60), |r| {
            let mut artifacts: HashMap<&str, usize> = HashMap::new();
            for req in r {
                if req.json.get("artifactUpdate").is_some() {
                    *artifacts.entry(task_id_of(&req.json)).or_default() += 1;
                }
            }
            tasks.iter().all(|t| artifacts.contains_key(t.as_str()))
        })
        .await;
    for (n, task) in tasks.iter().enumerate() {
        let artifact = receiver
            .requests()
            .into_iter()
            .find(|r| task_id_of(&r.json) == task && r.json.get("artifactUpdate").is_some())
            .unwrap();
        let text = artifact.json["artifactUpdate"]["artifact"]["parts"][0]["text"]
            .as_str()
            .unwrap()
            .to_owned();
        assert_eq!(text.len(), TEXT, "task {n}: the whole artifact");
        assert!(text.starts_with(&format!("{n}")));
    }
}
