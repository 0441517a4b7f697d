//! `kill -9` of the replica dispatching tasks: two real gateway binaries on one PostgreSQL and
//! one Redis, fronting one upstream. The surviving replica takes the tasks over within about one
//! dispatch lease: it re-attaches to upstream tasks (a client that resumes its stream on the
//! survivor with `Last-Event-ID` sees the stream complete), and dispatches the turns that were
//! still waiting in the dead replica's queue, each exactly once. A built-in agent's task on the
//! dead replica cannot be resumed: it ends FAILED instead of staying WORKING. A turn whose send
//! had begun is sent again under the same `Idempotency-Key` to an upstream that honours one,
//! and otherwise ends FAILED as of unknown outcome.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::upstream;
use crate::harness::{SseStream, TestGateway, script_message};
use crate::postgres::process::GatewayProcess;

const CHUNKS: u64 = 30;

/// A config file (in a fresh temp dir) with a short dispatch lease and one agent `up`.
struct Config {
    dir: std::path::PathBuf,
    path: String,
}

impl Config {
    fn write(agent: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("a2a-takeover-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("gateway.toml");
        std::fs::write(&path, format!("[dispatch]\nlease_ms = 1500\n\n{agent}")).unwrap();
        let path = path.to_str().unwrap().to_owned();
        Self { dir, path }
    }
}

impl Drop for Config {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn replica(
    db: &a2a_testing::TestDatabase,
    redis: &a2a_testing::TestRedis,
    config: &str,
) -> GatewayProcess {
    GatewayProcess::start_with(
        db.url(),
        &[
            ("A2A_CONFIG", config),
            ("A2A_REDIS_URL", redis.url()),
            ("A2A_REDIS_PREFIX", redis.prefix()),
        ],
    )
}

async fn resume(gw: &GatewayProcess, id: &str, after: &str) -> SseStream {
    let body =
        json!({"jsonrpc": "2.0", "id": "r", "method": "SubscribeToTask", "params": {"id": id}});
    let resp = reqwest::Client::new()
        .post(format!("http://{}/a2a/jsonrpc", gw.addr))
        .header("content-type", "application/json")
        .header("a2a-version", "1.0")
        .header("last-event-id", after)
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    SseStream::new(resp)
}

async fn until(gw: &GatewayProcess, id: &str, what: &str, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let task = gw.ok("GetTask", json!({"id": id})).await;
        if done(&task) {
            return task;
        }
        assert!(Instant::now() < deadline, "{what}: {task}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

// Several workers: starting a replica blocks this thread (it waits for readiness), while the
// in-process upstream must keep answering the replica's card fetch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_surviving_replica_takes_over_a_dead_replicas_task() {
    let up = upstream("").await;
    let db = a2a_testing::TestDatabase::create().await;
    let redis = a2a_testing::TestRedis::create().await;
    GatewayProcess::migrate(db.url());
    let config = Config::write(&super::agent("up", &up.url(""), ""));
    let a = replica(&db, &redis, &config.path);
    let b = replica(&db, &redis, &config.path);

    // An upstream task streaming through A, and a built-in task hanging on A.
    let params = json!({"tenant": "up",
        "message": script_message(json!({"chunks": CHUNKS, "delayMs": 100}))});
    let mut stream = a.stream("SendStreamingMessage", params).await;
    let first = stream.next().await.unwrap();
    let id = first.data["result"]["task"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut last_id = first.id.clone().unwrap();
    for _ in 0..4 {
        last_id = stream.next().await.unwrap().id.unwrap();
    }
    let builtin = a
        .ok(
            "SendMessage",
            json!({"tenant": "scenario", "message": script_message(json!({"end": "hang"})),
                   "configuration": {"returnImmediately": true}}),
        )
        .await["task"]["id"]
        .as_str()
        .unwrap()
        .to_owned();

    let killed = Instant::now();
    a.kill9();
    drop(stream);

    // The client resumes on B where it stopped; B takes the task over and the stream ends
    // with COMPLETED.
    let events = resume(&b, &id, &last_id).await.collect().await;
    let taken_over_in = killed.elapsed();
    let last = events.last().expect("events after the resume point");
    assert_eq!(
        last.data["result"]["statusUpdate"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{events:?}"
    );
    let seqs: Vec<u64> = events
        .iter()
        .map(|e| e.id.as_ref().unwrap().parse().unwrap())
        .collect();
    let after: u64 = last_id.parse().unwrap();
    assert_eq!(seqs[0], after + 1, "no gap at the resume point: {seqs:?}");
    assert!(
        seqs.windows(2).all(|w| w[1] == w[0] + 1),
        "in order: {seqs:?}"
    );

    let task = b.ok("GetTask", json!({"id": id})).await;
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED");
    let parts = task["artifacts"][0]["parts"].as_array().unwrap().len() as u64;
    assert_eq!(parts, CHUNKS, "every chunk, none twice: {task}");
    assert!(
        taken_over_in < Duration::from_secs(CHUNKS / 10 + 10),
        "bounded takeover: {taken_over_in:?}"
    );
    assert_eq!(
        up.ok("ListTasks", json!({})).await["totalSize"],
        1,
        "re-attached to the same upstream task, not a new one"
    );

    let failed = until(&b, &builtin, "the built-in task never left WORKING", |t| {
        t["status"]["state"] == "TASK_STATE_FAILED"
    })
    .await;
    assert!(failed.to_string().contains("stopped"), "{failed}");
    b.stop();
}

/// `returnImmediately` SendMessage of `text` (a plain message) to agent `up` on `gw`; the task id.
async fn send_text(gw: &GatewayProcess, message_id: &str, text: &str) -> String {
    let params = json!({"tenant": "up", "configuration": {"returnImmediately": true},
        "message": {"messageId": message_id, "role": "ROLE_USER", "parts": [{"text": text}]}});
    gw.ok("SendMessage", params).await["task"]["id"]
        .as_str()
        .unwrap()
        .to_owned()
}

fn state_is(state: &'static str) -> impl Fn(&Value) -> bool {
    move |t: &Value| t["status"]["state"] == state
}

// More sends than the upstream's max_concurrency: the turns still queued on the replica that is
// killed never reached the upstream, so the survivor dispatches them (none ends FAILED), and the
// upstream sees every task exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn turns_queued_on_a_dead_replica_are_dispatched_by_the_survivor() {
    const SENDS: usize = 6;
    let up = upstream("").await;
    let db = a2a_testing::TestDatabase::create().await;
    let redis = a2a_testing::TestRedis::create().await;
    GatewayProcess::migrate(db.url());
    let config = Config::write(&super::agent("up", &up.url(""), "max_concurrency = 2"));
    let a = replica(&db, &redis, &config.path);
    let b = replica(&db, &redis, &config.path);

    // Each runs about two seconds upstream: two run, four wait in A's queue.
    let mut ids = Vec::new();
    for i in 0..SENDS {
        let mut message = script_message(json!({"chunks": 20, "delayMs": 100}));
        message["messageId"] = json!(format!("queued-{i}"));
        let params = json!({"tenant": "up", "message": message,
            "configuration": {"returnImmediately": true}});
        ids.push(
            a.ok("SendMessage", params).await["task"]["id"]
                .as_str()
                .unwrap()
                .to_owned(),
        );
    }
    // The two running turns show WORKING once their upstream says so; the rest stay SUBMITTED.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let queued = loop {
        let mut states = Vec::new();
        for id in &ids {
            states.push(a.ok("GetTask", json!({"id": id})).await["status"]["state"].clone());
        }
        let working = states.iter().filter(|s| *s == "TASK_STATE_WORKING").count();
        if working == 2 || std::time::Instant::now() > deadline {
            break states
                .iter()
                .filter(|s| *s == "TASK_STATE_SUBMITTED")
                .count();
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    assert_eq!(queued, SENDS - 2, "all but two wait in the queue");
    a.kill9();

    for id in &ids {
        let task = until(&b, id, "the task never finished", |t| {
            t["status"]["state"] != "TASK_STATE_SUBMITTED"
                && t["status"]["state"] != "TASK_STATE_WORKING"
        })
        .await;
        assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{task}");
        let parts = task["artifacts"][0]["parts"].as_array().unwrap().len();
        assert_eq!(parts, 20, "every chunk once: {task}");
    }
    // Exactly once upstream: one upstream task per send, each message among them once.
    let listed = up.ok("ListTasks", json!({"pageSize": 100})).await;
    assert_eq!(listed["totalSize"], SENDS as u64, "{listed}");
    let mut seen: Vec<&str> = listed["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            let history = t["history"].as_array().unwrap();
            let user = history.iter().find(|m| m["role"] == "ROLE_USER").unwrap();
            user["messageId"].as_str().unwrap()
        })
        .collect();
    seen.sort_unstable();
    let expected: Vec<String> = (0..SENDS).map(|i| format!("queued-{i}")).collect();
    assert_eq!(seen, expected, "{listed}");
    b.stop();
}

/// Two replicas in front of the recorder, with one turn running upstream at a time. A first
/// task holds the slot; a second waits in A's queue, then is being sent (the recorder does not
/// answer) when A is killed. Returns the survivor and both task ids.
async fn kill_while_sending(
    rec: &super::recorder::Recorder,
    db: &a2a_testing::TestDatabase,
    redis: &a2a_testing::TestRedis,
    config: &Config,
) -> (GatewayProcess, String, String) {
    let a = replica(db, redis, &config.path);
    let b = replica(db, redis, &config.path);
    let first = send_text(&a, "m-hold", "hold").await;
    let second = send_text(&a, "m-hang", "hang").await;
    assert_eq!(
        a.ok("GetTask", json!({"id": second})).await["status"]["state"],
        "TASK_STATE_SUBMITTED",
        "queued behind the first"
    );
    rec.release();
    until(
        &a,
        &first,
        "the first task never completed",
        state_is("TASK_STATE_COMPLETED"),
    )
    .await;
    rec.wait_sent("hang", 1).await;
    a.kill9();
    (b, first, second)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_send_of_unknown_outcome_fails_without_the_idempotency_extension() {
    let rec = super::recorder::Recorder::start(false).await;
    let db = a2a_testing::TestDatabase::create().await;
    let redis = a2a_testing::TestRedis::create().await;
    GatewayProcess::migrate(db.url());
    let config = Config::write(&super::agent("up", &rec.url(), "max_concurrency = 1"));
    let (b, _, second) = kill_while_sending(&rec, &db, &redis, &config).await;

    let failed = until(
        &b,
        &second,
        "the task was not settled",
        state_is("TASK_STATE_FAILED"),
    )
    .await;
    let text = failed["status"]["message"]["parts"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(text.contains("outcome upstream is unknown"), "{failed}");
    // The upstream did nothing wrong: it is still routed to.
    let next = send_text(&b, "m-next", "next").await;
    until(
        &b,
        &next,
        "the next task was not completed",
        state_is("TASK_STATE_COMPLETED"),
    )
    .await;
    // Never sent again, and no key toward an upstream that does not declare the extension.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let sent = rec.sent();
    assert_eq!(
        sent.iter().filter(|s| s.text == "hang").count(),
        1,
        "{sent:?}"
    );
    assert!(sent.iter().all(|s| s.idempotency_key.is_none()), "{sent:?}");
    b.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_send_of_unknown_outcome_is_sent_again_under_the_same_idempotency_key() {
    let rec = super::recorder::Recorder::start(true).await;
    let db = a2a_testing::TestDatabase::create().await;
    let redis = a2a_testing::TestRedis::create().await;
    GatewayProcess::migrate(db.url());
    let config = Config::write(&super::agent("up", &rec.url(), "max_concurrency = 1"));
    let (b, first, second) = kill_while_sending(&rec, &db, &redis, &config).await;

    let done = until(
        &b,
        &second,
        "the task was not completed",
        state_is("TASK_STATE_COMPLETED"),
    )
    .await;
    assert_eq!(done["artifacts"][0]["parts"][0]["text"], "done", "{done}");
    let sent = rec.sent();
    let keys = |text: &str| -> Vec<Option<String>> {
        sent.iter()
            .filter(|s| s.text == text)
            .map(|s| s.idempotency_key.clone())
            .collect()
    };
    // The key is the gateway task id: the same on both replicas.
    assert_eq!(keys("hold"), [Some(first)], "{sent:?}");
    assert_eq!(
        keys("hang"),
        [Some(second.clone()), Some(second)],
        "sent once more, under the same key: {sent:?}"
    );
    b.stop();
}

// The same in front of a real upstream that honours the key (a gateway running `scenario`),
// through a proxy that passes the queued turn's send on but not its answer: the upstream runs
// the turn once, answers the survivor's re-send from that run, and the task completes with all
// of it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_re_sent_turn_runs_exactly_once_on_an_upstream_gateway() {
    const CHUNKS: usize = 30;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let proxied = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let proxy =
        super::recorder::Recorder::forwarding(proxied, listener.local_addr().unwrap()).await;
    // Its card sends callers through the proxy.
    let up = TestGateway::on_listener(
        listener,
        &format!(
            "default_agent = \"scenario\"\npublic_url = \"{}\"\n",
            proxy.url()
        ),
    )
    .await;
    let db = a2a_testing::TestDatabase::create().await;
    let redis = a2a_testing::TestRedis::create().await;
    GatewayProcess::migrate(db.url());
    let agent = super::agent(
        "up",
        &proxy.url(),
        "bindings = [\"JSONRPC\"]\nmax_concurrency = 1",
    );
    let config = Config::write(&agent);
    let a = replica(&db, &redis, &config.path);
    let b = replica(&db, &redis, &config.path);

    // A first turn holds the only slot for about 1.5 s; the second waits in A's queue, then is
    // sent (about three seconds upstream: the re-send usually finds its run still going).
    let send = |text: &str, chunks: usize| {
        let mut message = script_message(json!({"chunks": chunks, "delayMs": 100}));
        message["parts"][0]["text"] = json!(text);
        json!({"tenant": "up", "message": message, "configuration": {"returnImmediately": true}})
    };
    a.ok("SendMessage", send("run", 15)).await;
    let queued = a.ok("SendMessage", send("hang", CHUNKS)).await["task"].clone();
    assert_eq!(
        queued["status"]["state"], "TASK_STATE_SUBMITTED",
        "{queued}"
    );
    let id = queued["id"].as_str().unwrap().to_owned();
    let message_id = queued["history"][0]["messageId"].clone();
    proxy.wait_sent("hang", 1).await;
    // The upstream has its task; A has not heard of it, and dies.
    let deadline = Instant::now() + Duration::from_secs(10);
    while up.ok("ListTasks", json!({})).await["totalSize"] != 2 {
        assert!(
            Instant::now() < deadline,
            "the send never reached the upstream"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    a.kill9();

    let done = until(&b, &id, "the task was not settled", |t| {
        t["status"]["state"] != "TASK_STATE_SUBMITTED"
            && t["status"]["state"] != "TASK_STATE_WORKING"
    })
    .await;
    assert_eq!(done["status"]["state"], "TASK_STATE_COMPLETED", "{done}");
    let sent = proxy.wait_sent("hang", 2).await;
    let keys: Vec<_> = sent.iter().map(|s| s.idempotency_key.clone()).collect();
    assert_eq!(
        keys,
        [Some(id.clone()), Some(id)],
        "re-sent once, under the same key"
    );

    // One upstream task for the turn, which ran its message once; its whole answer is the
    // gateway's.
    let theirs = up.ok("ListTasks", json!({"pageSize": 100})).await;
    let users = |t: &Value| -> Vec<Value> {
        let history = t["history"].as_array().unwrap();
        history
            .iter()
            .filter(|m| m["role"] == "ROLE_USER")
            .map(|m| m["messageId"].clone())
            .collect()
    };
    let ran: Vec<&Value> = theirs["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| users(t).contains(&message_id))
        .collect();
    assert_eq!(ran.len(), 1, "one upstream task: {theirs}");
    assert_eq!(users(ran[0]), [message_id], "the message once: {theirs}");
    assert_eq!(
        ran[0]["status"]["state"], "TASK_STATE_COMPLETED",
        "{theirs}"
    );
    // ListTasks leaves artifacts out.
    let answer = up.ok("GetTask", json!({"id": ran[0]["id"]})).await["artifacts"].clone();
    let chunks = answer[0]["parts"].as_array().map(Vec::len);
    assert_eq!(chunks, Some(CHUNKS), "{answer}");
    assert_eq!(
        done["artifacts"], answer,
        "the upstream's answer, once: {done}"
    );
    b.stop();
    up.stop().await;
}

// A task's next message that was still queued on the replica that died: the survivor sends it
// to the same upstream task (re-attaching instead would leave the task waiting for input with
// the message lost).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follow_up_queued_on_a_dead_replica_reaches_the_upstream_task() {
    let up = upstream("").await;
    let db = a2a_testing::TestDatabase::create().await;
    let redis = a2a_testing::TestRedis::create().await;
    GatewayProcess::migrate(db.url());
    let config = Config::write(&super::agent("up", &up.url(""), "max_concurrency = 1"));
    let a = replica(&db, &redis, &config.path);
    let b = replica(&db, &redis, &config.path);

    let asking = a
        .ok(
            "SendMessage",
            json!({"tenant": "up", "message": script_message(json!({"end": "input-required"}))}),
        )
        .await["task"]
        .clone();
    assert_eq!(asking["status"]["state"], "TASK_STATE_INPUT_REQUIRED");
    // A long turn takes the only slot; the follow-up waits behind it.
    let long = a
        .ok(
            "SendMessage",
            json!({"tenant": "up", "configuration": {"returnImmediately": true},
                   "message": script_message(json!({"chunks": 20, "delayMs": 100}))}),
        )
        .await["task"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut reply = script_message(json!({}));
    reply["taskId"] = asking["id"].clone();
    let queued = a
        .ok(
            "SendMessage",
            json!({"message": reply, "configuration": {"returnImmediately": true}}),
        )
        .await;
    assert_eq!(queued["task"]["status"]["state"], "TASK_STATE_WORKING");
    let theirs = up.ok("ListTasks", json!({})).await;
    let waiting = theirs["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .any(|t| t["status"]["state"] == "TASK_STATE_INPUT_REQUIRED");
    assert!(waiting, "the follow-up has not been sent yet: {theirs}");
    a.kill9();

    let id = asking["id"].as_str().unwrap();
    let done = until(&b, id, "the follow-up never ran", |t| {
        t["status"]["state"] != "TASK_STATE_WORKING"
    })
    .await;
    assert_eq!(done["status"]["state"], "TASK_STATE_COMPLETED", "{done}");
    until(
        &b,
        &long,
        "the long task never completed",
        state_is("TASK_STATE_COMPLETED"),
    )
    .await;
    let theirs = up.ok("ListTasks", json!({})).await;
    assert_eq!(theirs["totalSize"], 2, "no new upstream task: {theirs}");
    let users = |t: &Value| {
        t["history"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["role"] == "ROLE_USER")
            .count()
    };
    let counts: Vec<usize> = theirs["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(users)
        .collect();
    assert!(
        counts.contains(&2),
        "both messages reached one upstream task: {theirs}"
    );
    b.stop();
}

/// `SendMessage` of `text` to agent `up` on `gw` under `Idempotency-Key: key`; the raw answer.
async fn send_keyed(gw: &GatewayProcess, key: &str, message_id: &str, text: &str) -> Value {
    let params = json!({"tenant": "up",
        "message": {"messageId": message_id, "role": "ROLE_USER", "parts": [{"text": text}]}});
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": params});
    let resp = reqwest::Client::new()
        .post(format!("http://{}/a2a/jsonrpc", gw.addr))
        .header("content-type", "application/json")
        .header("a2a-version", "1.0")
        .header("idempotency-key", key)
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    resp.json().await.unwrap()
}

// Review M7. A keyed send is being sent upstream (the upstream got it, its answer never comes)
// when its replica is killed, before the task exists. The client retries on the survivor with
// the same `Idempotency-Key`: the key, abandoned, is reclaimed under a new gateway task id, and
// the upstream receives the retry under the same upstream key as the first send (derived from
// the caller's key and principal, not from the task id), so it can answer from the first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keyed_retry_after_its_key_was_reclaimed_reaches_the_upstream_under_the_same_key() {
    let rec = super::recorder::Recorder::start(true).await;
    let db = a2a_testing::TestDatabase::create().await;
    let redis = a2a_testing::TestRedis::create().await;
    GatewayProcess::migrate(db.url());
    let config = Config::write(&super::agent("up", &rec.url(), ""));
    let a = replica(&db, &redis, &config.path);
    let b = replica(&db, &redis, &config.path);

    let first = {
        let addr = a.addr.clone();
        tokio::spawn(async move {
            let _ = reqwest::Client::new()
                .post(format!("http://{addr}/a2a/jsonrpc"))
                .header("content-type", "application/json")
                .header("a2a-version", "1.0")
                .header("idempotency-key", "retry-me")
                .body(
                    json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {
                        "tenant": "up", "message": {"messageId": "m-keyed", "role": "ROLE_USER",
                        "parts": [{"text": "hang"}]}}})
                    .to_string(),
                )
                .send()
                .await;
        })
    };
    rec.wait_sent("hang", 1).await;
    a.kill9();
    first.abort();

    // The retry waits while the dead replica's key still looks held; once its lease expired,
    // the key is reclaimed and the send dispatched under a new task id.
    let deadline = Instant::now() + Duration::from_secs(30);
    let task = loop {
        let answer = send_keyed(&b, "retry-me", "m-keyed", "hang").await;
        if let Some(task) = answer.get("result").and_then(|r| r.get("task")) {
            break task.clone();
        }
        assert!(
            Instant::now() < deadline,
            "the retry never went through: {answer}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{task}");
    let sent = rec.wait_sent("hang", 2).await;
    let keys: Vec<_> = sent.iter().map(|s| s.idempotency_key.clone()).collect();
    assert!(keys[0].is_some(), "{sent:?}");
    assert_eq!(
        keys[0], keys[1],
        "the same upstream key both times: {sent:?}"
    );
    assert_ne!(
        keys[1].as_deref(),
        task["id"].as_str(),
        "not the task id the retry minted: {sent:?}"
    );
    b.stop();
}

// Review M4. Replica A runs a turn upstream ("hold") and has another waiting in its queue ("x")
// when its lease renewals start failing (a failpoint, as under a partition from PostgreSQL or
// pool exhaustion). B takes both tasks over: it re-attaches to the first and dispatches the
// second. A's renewals then succeed again and its queue frees, but its turns were fenced: A
// commits nothing more and never sends "x", which the upstream receives exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_whose_lease_was_taken_over_never_sends_or_commits_its_turns() {
    let rec = super::recorder::Recorder::start(false).await;
    let db = a2a_testing::TestDatabase::create().await;
    let redis = a2a_testing::TestRedis::create().await;
    GatewayProcess::migrate(db.url());
    let config_a = Config::write(&super::agent("up", &rec.url(), "max_concurrency = 1"));
    let config_b = Config::write(&super::agent("up", &rec.url(), "max_concurrency = 4"));
    let stall = config_a.dir.join("stall-lease");
    let stall_path = stall.to_str().unwrap().to_owned();
    let a = GatewayProcess::start_with(
        db.url(),
        &[
            ("A2A_CONFIG", config_a.path.as_str()),
            ("A2A_REDIS_URL", redis.url()),
            ("A2A_REDIS_PREFIX", redis.prefix()),
            ("A2A_FAILPOINT_LEASE_STALL", stall_path.as_str()),
        ],
    );
    let b = replica(&db, &redis, &config_b.path);

    let held = send_text(&a, "m-hold", "hold").await;
    rec.wait_sent("hold", 1).await;
    let queued = send_text(&a, "m-x", "x").await;
    assert_eq!(
        a.ok("GetTask", json!({"id": queued})).await["status"]["state"],
        "TASK_STATE_SUBMITTED",
        "queued behind the first"
    );

    // A's lease lapses; B takes both tasks over and dispatches the queued one.
    std::fs::write(&stall, b"").unwrap();
    rec.wait_sent("x", 1).await;
    until(
        &b,
        &queued,
        "the survivor never completed the queued task",
        state_is("TASK_STATE_COMPLETED"),
    )
    .await;
    // The first turn ends upstream: both replicas see it; only B may commit it. A's slot frees,
    // and its renewals succeed again: its queued turn is fenced before it is sent.
    rec.release();
    until(
        &b,
        &held,
        "the re-attached task never completed",
        state_is("TASK_STATE_COMPLETED"),
    )
    .await;
    std::fs::remove_file(&stall).unwrap();
    tokio::time::sleep(Duration::from_secs(3)).await;

    let sent = rec.sent();
    let count = |text: &str| sent.iter().filter(|s| s.text == text).count();
    assert_eq!(count("x"), 1, "sent upstream by one replica only: {sent:?}");
    assert_eq!(count("hold"), 1, "{sent:?}");
    // Nothing was written after the survivor settled the tasks (A's late commits were refused).
    for id in [&held, &queued] {
        let task = a.ok("GetTask", json!({"id": id})).await;
        assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{task}");
    }
    // A is healthy again and dispatches new work.
    let next = send_text(&a, "m-next", "next").await;
    until(
        &a,
        &next,
        "A never dispatched new work after its lease was renewed",
        state_is("TASK_STATE_COMPLETED"),
    )
    .await;
    a.stop();
    b.stop();
}
