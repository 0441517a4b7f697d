//! Delivery against the ledger, poison-proof and fair (issue 27 items 2, 3, 6; review H3, H4,
//! H5, M1, M10): a poison event is a dead letter and the rest goes on; a Redis restart that lost
//! the group, and entries trimmed while the worker was stopped, lose nothing (the sweep reads the
//! event log); a tarpit webhook delays only its own events; a huge response body is not read;
//! dead letters are redacted, capped per owner and deleted with their task.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use a2a_store::TaskStore;
use axum::Router;
use axum::body::Body;
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use prost::Message as _;
use serde_json::json;

use crate::harness::Deployment;
use crate::receiver::{Receiver, task_id_of};

/// A webhook server of our own that answers every POST with `answer`; counts the requests.
async fn webhook(answer: fn() -> Response, slow: Option<Duration>) -> (String, Arc<AtomicUsize>) {
    let count = Arc::new(AtomicUsize::new(0));
    let seen = count.clone();
    let app = Router::new().route(
        "/{*path}",
        post(move || {
            let seen = seen.clone();
            async move {
                seen.fetch_add(1, Ordering::SeqCst);
                if let Some(d) = slow {
                    tokio::time::sleep(d).await;
                }
                answer()
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{addr}/hook"), count)
}

/// Every task of `tasks` got `events` distinct events at the receiver within `patience`.
async fn all_delivered(receiver: &Receiver, tasks: &[String], events: usize, patience: Duration) {
    let deadline = Instant::now() + patience;
    loop {
        let mut per_task: HashMap<String, HashSet<Vec<u8>>> = HashMap::new();
        for r in receiver.requests() {
            per_task
                .entry(task_id_of(&r.json).to_owned())
                .or_default()
                .insert(r.body.to_vec());
        }
        let counts: Vec<usize> = tasks
            .iter()
            .map(|t| per_task.get(t).map_or(0, HashSet::len))
            .collect();
        if counts.iter().all(|n| *n >= events) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "not every event arrived in {patience:?}: distinct events per task {counts:?}, \
             {events} expected each (lost > 0)"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn chunked_task(env: &Deployment, url: &str, wait: bool) -> String {
    let task = env
        .scenario_task(json!({"chunks": 2}), json!({"url": url}), !wait)
        .await;
    task["id"].as_str().unwrap().to_owned()
}

/// Events of `chunked_task`: the Task, WORKING, 2 chunks, COMPLETED.
const EVENTS: usize = 5;

/// The gateway and two workers on a Redis Cluster of three primaries: the worker's input is 8
/// partitions spread over the primaries by their slots, each worker reads each with a reader
/// of its own, and every event of every task is delivered from the stream (the sweep is
/// slowed to once a minute, so it cannot stand in for it).
#[tokio::test]
async fn on_a_redis_cluster_every_event_is_delivered_from_the_partitions() {
    let env = Deployment::start_on_cluster("127.0.0.1").await;
    let receiver = Receiver::start().await;
    let url = receiver.url("/hook");
    let slow_sweep = [("A2A_WORKER_SWEEP_INTERVAL_MS", "60000")];
    let _workers = [env.worker(&slow_sweep), env.worker(&slow_sweep)];
    let mut tasks = Vec::new();
    for _ in 0..16 {
        tasks.push(chunked_task(&env, &url, false).await);
    }
    all_delivered(&receiver, &tasks, EVENTS, Duration::from_secs(30)).await;
}

/// An event that cannot be serialised (a NaN in its metadata, as an old row or an upstream may
/// hold) becomes a dead letter with its reason; the worker goes on with other tasks. The old
/// worker sent a 1.0 webhook an empty body (and killed the runner of a 0.3 one).
#[tokio::test]
async fn a_poison_event_is_dead_lettered_and_other_tasks_still_deliver() {
    let env = Deployment::start("127.0.0.1").await;
    let receiver = Receiver::start().await;
    let _worker = env.worker(&[]);
    let url = receiver.url("/hook");
    let task = env
        .scenario_task(json!({"end": "input-required"}), json!({"url": url}), false)
        .await;
    let task_id = task["id"].as_str().unwrap().to_owned();
    let context_id = task["contextId"].as_str().unwrap().to_owned();
    receiver
        .wait_for(Duration::from_secs(20), |r| {
            r.iter()
                .any(|x| x.body.windows(14).any(|w| w == b"INPUT_REQUIRED"))
        })
        .await;
    let before = receiver.requests().len();

    // The poison: the task's next event, written to the ledger directly, with NaN in it.
    let mut fields = std::collections::BTreeMap::new();
    fields.insert(
        "x".to_owned(),
        a2a_types::wkt::Value {
            kind: Some(a2a_types::wkt::value::Kind::NumberValue(f64::NAN)),
        },
    );
    let event = a2a_types::v1::StreamResponse {
        payload: Some(a2a_types::v1::stream_response::Payload::StatusUpdate(
            a2a_types::v1::TaskStatusUpdateEvent {
                task_id: task_id.clone(),
                context_id,
                status: None,
                metadata: Some(a2a_types::wkt::Struct { fields }),
            },
        )),
    };
    let mut payload = vec![1u8];
    event.encode_raw(&mut payload);
    let store = env.store();
    let pool = store.pool();
    let (seq,): (i64,) = sqlx::query_as("SELECT seq FROM tasks WHERE id = $1")
        .bind(&task_id)
        .fetch_one(pool)
        .await
        .unwrap();
    sqlx::query("INSERT INTO task_events (task_id, seq, payload) VALUES ($1, $2, $3)")
        .bind(&task_id)
        .bind(seq + 1)
        .bind(&payload)
        .execute(pool)
        .await
        .unwrap();
    sqlx::query("UPDATE tasks SET seq = $2 WHERE id = $1")
        .bind(&task_id)
        .bind(seq + 1)
        .execute(pool)
        .await
        .unwrap();

    // Found behind its log by the sweep, dead-lettered with the reason, progress past it.
    let deadline = Instant::now() + Duration::from_secs(20);
    let letter = loop {
        let dead = store.dead_letters(true, 10).await.unwrap();
        if let Some(d) = dead.into_iter().find(|d| d.task_id == task_id) {
            break d;
        }
        assert!(
            Instant::now() < deadline,
            "no dead letter for the poison event"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(letter.seq, (seq + 1) as u64);
    assert!(
        letter.last_error.contains("cannot be serialised"),
        "{}",
        letter.last_error
    );
    assert_eq!(
        receiver.requests().len(),
        before,
        "nothing (no empty body) was sent for the poison event"
    );

    // Other tasks still deliver.
    let other = chunked_task(&env, &url, true).await;
    all_delivered(&receiver, &[other], EVENTS, Duration::from_secs(20)).await;
}

/// Redis restarts without persistence: the stream and the consumer group are gone. The worker
/// creates the group again (the old one looped on NOGROUP for good) and every event reaches the
/// webhook, those published while Redis was down too (from the ledger).
#[tokio::test]
async fn a_redis_restart_without_persistence_loses_no_push() {
    let server = Arc::new(a2a_testing::RedisServer::start().expect("a private redis-server"));
    let env = Deployment::start_on("127.0.0.1", a2a_testing::TestRedis::on(&server)).await;
    let receiver = Receiver::start().await;
    let worker = env.worker(&[]);
    let url = receiver.url("/hook");
    let a = chunked_task(&env, &url, true).await;
    all_delivered(
        &receiver,
        std::slice::from_ref(&a),
        EVENTS,
        Duration::from_secs(20),
    )
    .await;

    server.stop().unwrap();
    // Committed while Redis is down: its publish fails.
    let during = chunked_task(&env, &url, false).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    server.start_again().unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let after = chunked_task(&env, &url, true).await;
    all_delivered(
        &receiver,
        &[a, during, after],
        EVENTS,
        Duration::from_secs(30),
    )
    .await;
    let metrics = worker.metrics().await;
    assert!(
        crate::harness::metric(&metrics, "a2a_worker_group_recreated_total") >= 1.0,
        "{metrics}"
    );
}

/// The worker is stopped while more events flow than the stream keeps (trimmed to nothing
/// here, as `MAXLEN` does past its cap): once a worker runs again every event is delivered,
/// from the event log (the old worker never saw them: lost > 0).
#[tokio::test]
async fn events_trimmed_while_the_worker_was_stopped_are_delivered_from_the_ledger() {
    let env = Deployment::start("127.0.0.1").await;
    let receiver = Receiver::start().await;
    let url = receiver.url("/hook");
    let first = env.worker(&[]);
    let warm = chunked_task(&env, &url, true).await;
    all_delivered(
        &receiver,
        std::slice::from_ref(&warm),
        EVENTS,
        Duration::from_secs(20),
    )
    .await;
    first.kill9();

    let mut tasks = Vec::new();
    for _ in 0..6 {
        tasks.push(chunked_task(&env, &url, true).await);
    }
    let client = redis::Client::open(env.redis.url()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let mut trimmed: i64 = 0;
    for p in 0..a2a_bus::keys::DEFAULT_PARTITIONS {
        let n: i64 = redis::cmd("XTRIM")
            .arg(a2a_bus::events_key(env.redis.prefix(), p))
            .arg("MAXLEN")
            .arg(0)
            .query_async(&mut conn)
            .await
            .unwrap();
        trimmed += n;
    }
    assert!(
        trimmed >= (6 * EVENTS) as i64,
        "the unread entries are trimmed: {trimmed}"
    );

    let _second = env.worker(&[]);
    all_delivered(&receiver, &tasks, EVENTS, Duration::from_secs(30)).await;
}

/// A tenant's webhooks that hang, or answer 429 with `Retry-After: 600`, beside a healthy one:
/// the healthy deliveries go on promptly. The old worker gave every task a runner permit for
/// as long as its retries lasted (here 4 permits, all taken by the tarpit for minutes).
#[tokio::test]
async fn a_tarpit_webhook_delays_only_its_own_events() {
    let env = Deployment::start("127.0.0.1").await;
    let receiver = Receiver::start().await;
    let _worker = env.worker(&[
        ("A2A_WORKER_CONCURRENCY", "4"),
        ("A2A_WORKER_DESTINATION_CONCURRENCY", "2"),
        ("A2A_WORKER_ATTEMPT_TIMEOUT_MS", "60000"),
        ("A2A_WORKER_MAX_ATTEMPTS", "8"),
    ]);
    let (hang, hung) = webhook(
        || StatusCode::OK.into_response(),
        Some(Duration::from_secs(120)),
    )
    .await;
    let (busy, refused) = webhook(
        || {
            let mut r = StatusCode::TOO_MANY_REQUESTS.into_response();
            r.headers_mut()
                .insert("retry-after", HeaderValue::from_static("600"));
            r
        },
        None,
    )
    .await;
    for _ in 0..4 {
        chunked_task(&env, &hang, false).await;
        chunked_task(&env, &busy, false).await;
    }
    // The tarpits are being tried.
    let deadline = Instant::now() + Duration::from_secs(10);
    while hung.load(Ordering::SeqCst) == 0 || refused.load(Ordering::SeqCst) == 0 {
        assert!(Instant::now() < deadline, "the tarpits were never tried");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let started = Instant::now();
    let mut healthy = Vec::new();
    for _ in 0..4 {
        healthy.push(chunked_task(&env, &receiver.url("/hook"), true).await);
    }
    all_delivered(&receiver, &healthy, EVENTS, Duration::from_secs(10)).await;
    eprintln!(
        "healthy deliveries done {:?} after the tarpit filled",
        started.elapsed()
    );
    assert!(
        hung.load(Ordering::SeqCst) <= 2,
        "at most the destination's share of attempts hang at once"
    );
}

/// A webhook that answers 200 with an endless body: the delivery counts at once (at most a few
/// KiB are read), and the worker's memory does not grow with the body. The old worker read the
/// body until the attempt timed out, then retried.
#[tokio::test]
async fn an_endless_response_body_is_not_read() {
    let env = Deployment::start("127.0.0.1").await;
    let worker = env.worker(&[("A2A_WORKER_ATTEMPT_TIMEOUT_MS", "10000")]);
    let (url, count) = webhook(
        || {
            let chunk = bytes::Bytes::from(vec![b'x'; 64 * 1024]);
            let stream = futures::stream::repeat_with(move || {
                Ok::<_, std::convert::Infallible>(chunk.clone())
            });
            Response::new(Body::from_stream(stream))
        },
        None,
    )
    .await;
    let started = Instant::now();
    let task = chunked_task(&env, &url, true).await;
    let store = env.store();
    loop {
        let (delivered,): (i64,) =
            sqlx::query_as("SELECT delivered_seq FROM push_progress WHERE task_id = $1")
                .bind(&task)
                .fetch_one(store.pool())
                .await
                .unwrap();
        if delivered >= EVENTS as i64 {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(8),
            "the deliveries did not end within the attempt timeout (delivered {delivered})"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(count.load(Ordering::SeqCst), EVENTS, "one attempt each");
    assert!(store.dead_letters(true, 10).await.unwrap().is_empty());
    let status = std::fs::read_to_string(format!("/proc/{}/status", worker.pid())).unwrap();
    let rss_kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap();
    assert!(rss_kb < 128 * 1024, "peak RSS {rss_kb} KiB");
}

/// Dead letters keep no credentials or token, at most the configured number per owner (the
/// newest), and go with their task's retention. The old worker stored the whole config and
/// kept every dead letter for good.
#[tokio::test]
async fn dead_letters_are_redacted_capped_and_pruned_with_their_task() {
    let env = Deployment::start("127.0.0.1").await;
    let _worker = env.worker(&[("A2A_WORKER_DEAD_LETTERS_PER_OWNER", "3")]);
    let (url, _) = webhook(|| StatusCode::BAD_REQUEST.into_response(), None).await;
    let push = json!({"url": url, "token": "tok-secret-1",
                      "authentication": {"scheme": "Bearer", "credentials": "cred-secret-2"}});
    let task = env.scenario_task(json!({"chunks": 2}), push, false).await;
    let task_id = task["id"].as_str().unwrap().to_owned();
    let store = env.store();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (delivered,): (i64,) =
            sqlx::query_as("SELECT delivered_seq FROM push_progress WHERE task_id = $1")
                .bind(&task_id)
                .fetch_one(store.pool())
                .await
                .unwrap();
        if delivered >= EVENTS as i64 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "not every event was dead-lettered"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let rows: Vec<(i64, Vec<u8>)> =
        sqlx::query_as("SELECT seq, config FROM push_dead_letters WHERE task_id = $1 ORDER BY id")
            .bind(&task_id)
            .fetch_all(store.pool())
            .await
            .unwrap();
    let seqs: Vec<i64> = rows.iter().map(|r| r.0).collect();
    assert_eq!(seqs, [3, 4, 5], "the newest 3 of 5 are kept");
    for (_, config) in &rows {
        let text = String::from_utf8_lossy(config);
        assert!(
            !text.contains("tok-secret-1"),
            "the token is stored: {text}"
        );
        assert!(
            !text.contains("cred-secret-2"),
            "the credentials are stored: {text}"
        );
    }
    let listed = store.dead_letters(true, 10).await.unwrap();
    assert!(listed.iter().all(|d| a2a_store::pg::is_redacted(&d.config)));

    // Retention deletes the task, and its dead letters with it.
    sqlx::query("UPDATE tasks SET updated_at = now() - interval '1 day' WHERE id = $1")
        .bind(&task_id)
        .execute(store.pool())
        .await
        .unwrap();
    let tasks =
        a2a_store::pg::PgTaskStore::connect_lazy(env.db.url(), &Default::default()).unwrap();
    let purged = tasks
        .purge_tasks(std::time::SystemTime::now(), 100)
        .await
        .unwrap();
    assert_eq!(purged, 1);
    let (left,): (i64,) =
        sqlx::query_as("SELECT count(*) FROM push_dead_letters WHERE task_id = $1")
            .bind(&task_id)
            .fetch_one(store.pool())
            .await
            .unwrap();
    assert_eq!(left, 0, "dead letters go with their task");
}
