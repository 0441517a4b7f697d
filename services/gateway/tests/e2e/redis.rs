//! Several replicas on one PostgreSQL database and one Redis: any replica serves any task's
//! stream, live, through the Redis bus (not by polling the event log).

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::harness::*;

const TASKS: usize = 100;
const CHUNKS: u64 = 20;

/// Three replicas sharing a fresh database and a fresh Redis key prefix.
async fn replicas() -> (
    Vec<TestGateway>,
    a2a_testing::TestDatabase,
    a2a_testing::TestRedis,
) {
    let db = a2a_testing::TestDatabase::create().await;
    let redis = a2a_testing::TestRedis::create().await;
    let mut gws = Vec::new();
    for _ in 0..3 {
        gws.push(TestGateway::with_database_and_redis("", db.url(), &redis).await);
    }
    (gws, db, redis)
}

/// Three real gateway processes (migrated database, shared Redis prefix).
async fn processes() -> (
    [crate::postgres::process::GatewayProcess; 3],
    a2a_testing::TestDatabase,
    a2a_testing::TestRedis,
) {
    use crate::postgres::process::GatewayProcess;
    let db = a2a_testing::TestDatabase::create().await;
    let redis = a2a_testing::TestRedis::create().await;
    GatewayProcess::migrate(db.url());
    let env = [
        ("A2A_REDIS_URL", redis.url()),
        ("A2A_REDIS_PREFIX", redis.prefix()),
    ];
    let start = || GatewayProcess::start_with(db.url(), &env);
    ([start(), start(), start()], db, redis)
}

fn seq(ev: &SseEvent) -> u64 {
    ev.id
        .as_deref()
        .expect("SSE id")
        .parse()
        .expect("numeric id")
}

/// Every event a subscriber saw, with the time its stream ended.
async fn drain(stream: SseStream) -> (Vec<SseEvent>, Instant) {
    let events = stream.collect().await;
    (events, Instant::now())
}

/// Checks one subscriber's view against the creator's: the Task first (or, for a subscriber that
/// resumed after `resumed`, nothing before the events after it), then every later event exactly
/// once, in order, identical to what the creator saw.
fn check_subscriber(creator: &[SseEvent], sub: &[SseEvent], who: &str, resumed: Option<u64>) {
    assert!(
        !sub.is_empty(),
        "{who}: a stream that ended without an event"
    );
    let (snap, tail) = match resumed {
        Some(after) => (after, sub),
        None => {
            let first = &sub[0].data["result"];
            assert!(first.get("task").is_some(), "{who}: the Task comes first");
            (seq(&sub[0]), &sub[1..])
        }
    };
    let tail: Vec<u64> = tail.iter().map(seq).collect();
    let expected: Vec<u64> = (snap + 1..=CHUNKS + 3).collect();
    assert_eq!(
        tail, expected,
        "{who}: the full tail, in order, no gap, no duplicate"
    );
    let by_seq = |evs: &[SseEvent]| -> Vec<Value> {
        evs.iter()
            .filter(|e| seq(e) > snap)
            .map(|e| e.data["result"].clone())
            .collect()
    };
    assert_eq!(by_seq(sub), by_seq(creator), "{who}: the same events");
}

/// What the fan-out check needs of a replica: an in-process gateway or a real process.
pub(crate) trait Replica: Sync {
    fn open(&self, method: &str, params: Value) -> impl Future<Output = SseStream> + Send;
    /// SubscribeToTask with `Last-Event-ID: after`.
    fn resume(&self, id: &str, after: u64) -> impl Future<Output = SseStream> + Send;
}

impl Replica for TestGateway {
    fn open(&self, method: &str, params: Value) -> impl Future<Output = SseStream> + Send {
        self.stream(method, params)
    }
    async fn resume(&self, id: &str, after: u64) -> SseStream {
        SseStream::new(resume_jsonrpc(self, id, after).await)
    }
}

impl Replica for crate::postgres::process::GatewayProcess {
    fn open(&self, method: &str, params: Value) -> impl Future<Output = SseStream> + Send {
        self.stream(method, params)
    }
    async fn resume(&self, id: &str, after: u64) -> SseStream {
        crate::postgres::process::GatewayProcess::resume(self, id, after).await
    }
}

/// Starts a scenario stream on `replica`: the stream, its first event (the Task) and the task id.
pub(crate) async fn start_scenario(
    replica: &impl Replica,
    script: Value,
) -> (SseStream, SseEvent, String) {
    let mut stream = replica
        .open(
            "SendStreamingMessage",
            json!({"tenant": "scenario", "message": script_message(script)}),
        )
        .await;
    let head = stream.next().await.expect("the task");
    let id = head.data["result"]["task"]["id"]
        .as_str()
        .expect("a task id")
        .to_owned();
    (stream, head, id)
}

/// A follower of task `id` on `replica`: SubscribeToTask; or, when the task was done before the
/// subscription reached the replica, a resume after the Task (`Last-Event-ID: 1`), which replays
/// the log. A subscription to a done task is refused, and on a loaded machine one came late: 1
/// of 200 in a CI run with the other suites beside this one, its task done after 0.4 s.
/// Returns the stream and, for a resume, what it resumed after.
async fn follow(replica: &impl Replica, id: &str, who: &str) -> (SseStream, Option<u64>) {
    let live = replica.open("SubscribeToTask", json!({"id": id})).await;
    match live.or_refusal().await {
        Ok(stream) => (stream, None),
        Err(refusal) if refusal.contains("a terminal task has no more events") => {
            println!("{who}: task {id} was done before its subscription; resuming");
            (replica.resume(id, 1).await.expect_sse(who).await, Some(1))
        }
        Err(refusal) => panic!("{who}: {refusal}"),
    }
}

/// `TASKS` concurrent streaming tasks created on `a`, each followed by a subscriber on `b` and
/// one on `c`: every subscriber sees the creator's full sequence, in order, and one that
/// subscribed while the task ran ends with it, live. (Tasks of 1 s with both subscriptions at
/// once loaded the replicas more: many came late, and one found its store pool exhausted.)
async fn fan_out_across(a: &impl Replica, b: &impl Replica, c: &impl Replica) {
    let script = json!({"chunks": CHUNKS, "delayMs": 20});
    let runs = (0..TASKS).map(|_| async {
        let (created, head, id) = start_scenario(a, script.clone()).await;
        let (on_b, b_resumed) = follow(b, &id, "replica B").await;
        let (on_c, c_resumed) = follow(c, &id, "replica C").await;
        let ((mut rest, a_end), (b_events, b_end), (c_events, c_end)) =
            tokio::join!(drain(created), drain(on_b), drain(on_c));
        rest.insert(0, head);
        assert_eq!(
            ids(&rest),
            (1..=CHUNKS + 3).collect::<Vec<_>>(),
            "task + WORKING + chunks + COMPLETED"
        );
        check_subscriber(&rest, &b_events, "replica B", b_resumed);
        check_subscriber(&rest, &c_events, "replica C", c_resumed);
        // Live, not polled: without the bus a follower on another replica only learns of new
        // events from its 2 s poll of the event log.
        for (who, end, resumed) in [("B", b_end, b_resumed), ("C", c_end, c_resumed)] {
            if resumed.is_some() {
                continue; // the task was done: nothing to follow live
            }
            let late = end.saturating_duration_since(a_end);
            assert!(
                late < Duration::from_millis(1000),
                "replica {who} ended {late:?} after A"
            );
        }
    });
    futures::future::join_all(runs).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn streams_created_on_one_replica_are_followed_live_on_the_others() {
    let (gws, _db, _redis) = replicas().await;
    fan_out_across(&gws[0], &gws[1], &gws[2]).await;
}

/// The same on a Redis Cluster of three primaries (each with a replica), started by the test:
/// every task's stream (on the slot of its group) reaches the followers on the other replicas,
/// live; a cancel crosses replicas through the control stream.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn replicas_on_a_redis_cluster_follow_each_others_streams_live() {
    let db = a2a_testing::TestDatabase::create().await;
    let cluster = a2a_testing::TestCluster::create().await;
    let mut gws = Vec::new();
    for _ in 0..3 {
        gws.push(TestGateway::with_database_and_cluster("", db.url(), &cluster).await);
    }
    fan_out_across(&gws[0], &gws[1], &gws[2]).await;
    cancel_across(&gws[0], &gws[2]).await;
}

// Resume: `Last-Event-ID` (SSE) / `a2a-last-event-id` (gRPC metadata) on SubscribeToTask replays
// the events after that sequence number from the event log, with no Task snapshot first, then
// follows the live tail.

/// SubscribeToTask over JSON-RPC with `Last-Event-ID: after`.
async fn resume_jsonrpc(gw: &TestGateway, id: &str, after: u64) -> reqwest::Response {
    let body =
        json!({"jsonrpc": "2.0", "id": "r", "method": "SubscribeToTask", "params": {"id": id}});
    gw.client
        .post(gw.url("/a2a/jsonrpc"))
        .header("content-type", "application/json")
        .header("a2a-version", "1.0")
        .header("last-event-id", after.to_string())
        .body(body.to_string())
        .send()
        .await
        .unwrap()
}

fn ids(events: &[SseEvent]) -> Vec<u64> {
    events.iter().map(seq).collect()
}

#[tokio::test]
async fn a_client_resumes_on_another_replica_with_last_event_id() {
    let (gws, _db, _redis) = replicas().await;
    let (a, b) = (&gws[0], &gws[1]);
    let mut first = a
        .stream(
            "SendStreamingMessage",
            json!({"tenant": "scenario", "message": script_message(json!({"chunks": CHUNKS, "delayMs": 30}))}),
        )
        .await;
    let mut seen = Vec::new();
    for _ in 0..6 {
        seen.push(first.next().await.unwrap());
    }
    let id = seen[0].data["result"]["task"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    drop(first); // the connection breaks mid-stream
    let last = seq(seen.last().unwrap());
    let resumed = SseStream::new(resume_jsonrpc(b, &id, last).await)
        .collect()
        .await;
    assert!(
        resumed[0].data["result"].get("task").is_none(),
        "a resumed stream continues with the next event, not a snapshot"
    );
    seen.extend(resumed);
    assert_eq!(
        ids(&seen),
        (1..=CHUNKS + 3).collect::<Vec<_>>(),
        "the complete sequence, once each"
    );
    assert_eq!(
        seen.last().unwrap().data["result"]["statusUpdate"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );
}

#[tokio::test]
async fn a_terminal_task_is_replayed_from_last_event_id_over_each_binding() {
    let (gws, _db, _redis) = replicas().await;
    let (a, b, c) = (&gws[0], &gws[1], &gws[2]);
    let task = a.scenario(json!({"chunks": 3}), json!({})).await["task"].clone();
    assert_eq!(state(&task), "TASK_STATE_COMPLETED");
    let id = task["id"].as_str().unwrap();

    // Everything: the log from its first event (the task as created).
    let all = SseStream::new(resume_jsonrpc(b, id, 0).await)
        .collect()
        .await;
    let n = all.len() as u64;
    assert_eq!(ids(&all), (1..=n).collect::<Vec<_>>());
    assert_eq!(
        all.last().unwrap().data["result"]["statusUpdate"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );
    // A suffix over JSON-RPC, and nothing (a stream that just ends) for a client that has it all.
    let tail = SseStream::new(resume_jsonrpc(b, id, n - 2).await)
        .collect()
        .await;
    assert_eq!(ids(&tail), [n - 1, n]);
    assert!(
        SseStream::new(resume_jsonrpc(c, id, n).await)
            .collect()
            .await
            .is_empty()
    );
    // A sequence number the task never reached is a client error.
    let beyond: Value = resume_jsonrpc(c, id, n + 5).await.json().await.unwrap();
    assert_eq!(beyond["error"]["code"], -32602, "{beyond}");

    // HTTP+JSON: the same header on the subscribe route.
    let rest = c
        .client
        .get(c.url(&format!("/a2a/rest/tasks/{id}:subscribe")))
        .header("a2a-version", "1.0")
        .header("last-event-id", (n - 1).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(rest.status(), 200);
    assert_eq!(ids(&SseStream::new(rest).collect().await), [n]);

    // gRPC: the `a2a-last-event-id` metadata key.
    use a2a_types::v1::a2a_service_client::A2aServiceClient;
    let channel = tonic::transport::Channel::from_shared(format!("http://{}", a.addr))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut request = tonic::Request::new(a2a_types::v1::SubscribeToTaskRequest {
        id: id.to_owned(),
        ..Default::default()
    });
    request
        .metadata_mut()
        .insert("a2a-version", "1.0".parse().unwrap());
    request
        .metadata_mut()
        .insert("a2a-last-event-id", (n - 2).to_string().parse().unwrap());
    let mut client = A2aServiceClient::new(channel);
    let mut stream = client
        .subscribe_to_task(request)
        .await
        .unwrap()
        .into_inner();
    let mut got = Vec::new();
    while let Some(ev) = stream.message().await.unwrap() {
        got.push(ev);
    }
    assert_eq!(got.len(), 2, "events {} and {n}", n - 1);
    assert!(matches!(
        got[1].payload,
        Some(a2a_types::v1::stream_response::Payload::StatusUpdate(_))
    ));

    // Without a resume point, a gRPC subscription names its snapshot's sequence number in the
    // response metadata, which is where a gRPC client's resume point comes from.
    let hanging = a
        .scenario(json!({"end": "hang"}), json!({"returnImmediately": true}))
        .await["task"]
        .clone();
    let mut request = tonic::Request::new(a2a_types::v1::SubscribeToTaskRequest {
        id: hanging["id"].as_str().unwrap().to_owned(),
        ..Default::default()
    });
    request
        .metadata_mut()
        .insert("a2a-version", "1.0".parse().unwrap());
    let response = client.subscribe_to_task(request).await.unwrap();
    let first: u64 = response
        .metadata()
        .get("a2a-first-event-id")
        .expect("a2a-first-event-id")
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(first >= 1, "the snapshot's sequence number");
    b.ok("CancelTask", json!({"id": hanging["id"]})).await;
}

#[tokio::test]
async fn cancel_on_one_replica_stops_a_turn_running_on_another() {
    let (gws, _db, _redis) = replicas().await;
    cancel_across(&gws[0], &gws[2]).await;
}

/// A turn hanging on `a` is canceled through `c` by a control message to `a`'s runner.
async fn cancel_across(a: &TestGateway, c: &TestGateway) {
    let (running, _, id) = start_scenario(a, json!({"end": "hang"})).await;
    let started = Instant::now();
    let canceled = c.ok("CancelTask", json!({"id": id})).await;
    assert_eq!(state(&canceled), "TASK_STATE_CANCELED");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "the owning replica's runner canceled it (not the {:?} fallback)",
        started.elapsed()
    );
    // The stream on A, where the turn ran, ends with the CANCELED its runner recorded.
    let rest = running.collect().await;
    assert_eq!(
        rest.last().unwrap().data["result"]["statusUpdate"]["status"]["state"],
        "TASK_STATE_CANCELED"
    );
    assert_eq!(
        state(&a.ok("GetTask", json!({"id": id})).await),
        "TASK_STATE_CANCELED"
    );
}

/// Streams on replica B of tasks running on A, checked against A's view.
async fn follow_on_other_replica(a: &TestGateway, b: &TestGateway, delay_ms: u64) {
    let script = json!({"chunks": CHUNKS, "delayMs": delay_ms});
    let (created, head, id) = start_scenario(a, script).await;
    let on_b = b.stream("SubscribeToTask", json!({"id": id})).await;
    let (mut rest, b_events) = tokio::join!(created.collect(), on_b.collect());
    rest.insert(0, head);
    assert_eq!(ids(&rest), (1..=CHUNKS + 3).collect::<Vec<_>>());
    check_subscriber(&rest, &b_events, "replica B", None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn while_redis_is_down_requests_work_and_streams_poll_the_log() {
    let server = std::sync::Arc::new(a2a_testing::RedisServer::start().unwrap());
    let redis = a2a_testing::TestRedis::on(&server);
    let db = a2a_testing::TestDatabase::create().await;
    let a = TestGateway::with_database_and_redis("", db.url(), &redis).await;
    let b = TestGateway::with_database_and_redis("", db.url(), &redis).await;

    // Streams that span the outage: every subscriber still gets every event once, in order.
    let spanning = futures::future::join_all((0..10).map(|_| follow_on_other_replica(&a, &b, 100)));
    let outage = async {
        tokio::time::sleep(Duration::from_millis(500)).await;
        server.stop().unwrap();
        // Sends and gets keep working from PostgreSQL.
        let task = b.send_text("during the outage").await;
        assert_eq!(state(&task), "TASK_STATE_COMPLETED");
        let id = task["id"].as_str().unwrap();
        assert_eq!(a.ok("GetTask", json!({"id": id})).await["id"], task["id"]);
        tokio::time::sleep(Duration::from_millis(1500)).await;
        server.start_again().unwrap();
    };
    tokio::join!(spanning, outage);

    // Back to live fan-out once Redis is back (the reader reconnects within its backoff).
    tokio::time::sleep(Duration::from_secs(3)).await;
    let started = Instant::now();
    follow_on_other_replica(&a, &b, 20).await;
    assert!(
        started.elapsed() < Duration::from_millis(1800),
        "live again, not polling: {:?}",
        started.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_subscriber_whose_replica_is_killed_resumes_on_another() {
    let ([a, b, c], _db, _redis) = processes().await;

    let (created, head, id) = start_scenario(&a, json!({"chunks": CHUNKS, "delayMs": 50})).await;
    let mut on_b = b.stream("SubscribeToTask", json!({"id": id})).await;
    let mut seen = vec![on_b.next().await.unwrap()];
    assert!(seen[0].data["result"].get("task").is_some());
    for _ in 0..4 {
        seen.push(on_b.next().await.unwrap());
    }
    b.kill9(); // mid-stream: the client's connection breaks
    drop(on_b);

    let body =
        json!({"jsonrpc": "2.0", "id": "r", "method": "SubscribeToTask", "params": {"id": id}});
    let resumed = reqwest::Client::new()
        .post(format!("http://{}/a2a/jsonrpc", c.addr))
        .header("a2a-version", "1.0")
        .header("last-event-id", seq(seen.last().unwrap()).to_string())
        .json(&body)
        .send()
        .await
        .unwrap();
    seen.extend(SseStream::new(resumed).collect().await);
    let snap = seq(&seen[0]);
    assert_eq!(
        ids(&seen[1..]),
        (snap + 1..=CHUNKS + 3).collect::<Vec<_>>(),
        "the complete tail across the kill, once each"
    );
    let mut all = created.collect().await;
    all.insert(0, head);
    check_subscriber(&all, &seen, "the resumed subscriber", None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_gateway_processes_serve_each_others_streams() {
    let ([a, b, c], _db, _redis) = processes().await;
    fan_out_across(&a, &b, &c).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_blocking_follow_up_works_on_whichever_replica_receives_it() {
    let (gws, _db, _redis) = replicas().await;
    let (a, b, c) = (&gws[0], &gws[1], &gws[2]);
    let task = a
        .scenario(json!({"end": "input-required"}), json!({}))
        .await["task"]
        .clone();
    assert_eq!(state(&task), "TASK_STATE_INPUT_REQUIRED");
    let id = task["id"].as_str().unwrap();

    // The follow-up reaches B, which never saw the task: it runs the next turn there and answers
    // the blocking call with the finished task.
    let mut follow = user_message("here you go");
    follow["taskId"] = json!(id);
    let done = b.ok("SendMessage", json!({"message": follow})).await["task"].clone();
    assert_eq!(state(&done), "TASK_STATE_COMPLETED");
    assert_eq!(done["id"], id);
    assert_eq!(done["contextId"], task["contextId"]);
    // C sees the same task, the whole conversation in order.
    let got = c.ok("GetTask", json!({"id": id})).await;
    assert_eq!(state(&got), "TASK_STATE_COMPLETED");
    let roles: Vec<&str> = got["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["ROLE_USER", "ROLE_AGENT", "ROLE_USER"]);
}

#[tokio::test]
async fn the_trace_context_of_a_request_travels_with_its_events() {
    let (gws, _db, redis) = replicas().await;
    let traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let send = |trace: Option<&'static str>| {
        let gw = &gws[0];
        async move {
            // A push config: only the events of tasks with one go to the worker's stream.
            let body = json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {
                "tenant": "scenario", "message": script_message(json!({"chunks": 2})),
                "configuration": {"taskPushNotificationConfig":
                    {"url": "https://hooks.example.com/traced"}}}});
            let mut req = gw
                .client
                .post(gw.url("/a2a/jsonrpc"))
                .header("a2a-version", "1.0");
            if let Some(tp) = trace {
                req = req.header("traceparent", tp);
            }
            let resp: Value = req.json(&body).send().await.unwrap().json().await.unwrap();
            resp["result"]["task"]["id"].as_str().unwrap().to_owned()
        }
    };
    let traced = send(Some(traceparent)).await;
    let untraced = send(None).await;

    let client = redis::Client::open(redis.url()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    // The push worker's input: every partition (a task's entries are all in one).
    let mut entries = Vec::new();
    for p in 0..a2a_bus::keys::DEFAULT_PARTITIONS {
        let part: redis::streams::StreamRangeReply = redis::cmd("XRANGE")
            .arg(a2a_bus::events_key(redis.prefix(), p))
            .arg("-")
            .arg("+")
            .query_async(&mut conn)
            .await
            .unwrap();
        entries.extend(part.ids);
    }
    let traces_of = |id: &str| -> Vec<Option<String>> {
        entries
            .iter()
            .filter(|e| e.get::<String>("t").as_deref() == Some(id))
            .map(|e| e.get("tp"))
            .collect()
    };
    // Task, WORKING, two chunks, COMPLETED: each entry carries the request's traceparent.
    assert_eq!(traces_of(&traced), vec![Some(traceparent.to_owned()); 5]);
    assert_eq!(traces_of(&untraced), vec![None; 5]);
}

/// A subscriber on replica A to an INPUT_REQUIRED task stays connected; the follow-up sent
/// through replica B runs there, and A's subscriber sees its events and the terminal state,
/// then its stream closes. Over every binding.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_subscriber_on_one_replica_sees_a_follow_up_sent_through_another() {
    use a2a_client::StreamEvent;
    use a2a_types::v1::{SubscribeToTaskRequest, TaskState, stream_response::Payload};
    use futures::StreamExt;

    use crate::auth::{BINDINGS, client};

    let (gws, _db, _redis) = replicas().await;
    let (a, b) = (&gws[0], &gws[1]);
    let state_of = |ev: &StreamEvent| match &ev.response.payload {
        Some(Payload::StatusUpdate(s)) => {
            TaskState::try_from(s.status.as_ref().unwrap().state).ok()
        }
        Some(Payload::Task(t)) => TaskState::try_from(t.status.as_ref().unwrap().state).ok(),
        _ => None,
    };
    for kind in BINDINGS {
        let task = a
            .scenario(json!({"end": "input-required"}), json!({}))
            .await["task"]
            .clone();
        let id = task["id"].as_str().unwrap().to_owned();
        let mut sub = client(a, kind, None)
            .subscribe_to_task(SubscribeToTaskRequest {
                id: id.clone(),
                ..Default::default()
            })
            .await
            .unwrap();
        let first = sub.next().await.unwrap().unwrap();
        assert_eq!(state_of(&first), Some(TaskState::InputRequired), "{kind}");
        let quiet = tokio::time::timeout(Duration::from_millis(300), sub.next()).await;
        assert!(quiet.is_err(), "{kind}: the subscriber stays connected");

        let mut follow = user_message("here you go");
        follow["taskId"] = json!(id);
        let done = client(b, kind, None)
            .send_message(serde_json::from_value(json!({"message": follow})).unwrap())
            .await
            .unwrap();
        assert!(format!("{done:?}").contains(&id), "{kind}");

        let mut rest = Vec::new();
        while let Some(ev) = tokio::time::timeout(Duration::from_secs(10), sub.next())
            .await
            .unwrap_or_else(|_| panic!("{kind}: the stream closes after COMPLETED"))
        {
            rest.push(ev.unwrap());
        }
        let states: Vec<_> = rest.iter().filter_map(state_of).collect();
        assert_eq!(
            states.last(),
            Some(&TaskState::Completed),
            "{kind}: the follow-up's events end in COMPLETED: {states:?}"
        );
        assert!(
            !states.contains(&TaskState::InputRequired),
            "{kind}: {states:?}"
        );
    }
}
