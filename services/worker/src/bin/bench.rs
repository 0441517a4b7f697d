//! `a2a-worker-bench`: how fast one `a2a-worker` delivers to a local receiver (run by
//! `loadtest/bench-worker.sh`). In one run, on a fresh database and Redis prefix:
//!
//! 1. raw limit: this process POSTs the same bodies straight to the receiver (`CONCURRENCY`
//!    requests in flight, no worker) — what the HTTP stack on this machine allows;
//! 2. throughput: `TASKS` tasks with one push config each, `PER_TASK` events each published to
//!    the stream before the worker starts; deliveries/s from the first delivery to the last;
//! 3. latency: events published at `RATE`/s for `SECS` seconds, spread over the tasks; each body
//!    carries its publish time, the receiver records publish → arrival, p50/p99.
//!
//! Env: BENCH_DATABASE_URL, BENCH_REDIS_URL, BENCH_WORKER_BIN (the release binary), and
//! optionally BENCH_PREFIX (Redis key prefix), BENCH_TASKS, BENCH_PER_TASK, BENCH_RATE, BENCH_SECS.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use a2a_bus::{BusEvent, EventBus, RedisEventBus};
use a2a_store::{NewTask, PgOptions, PgTaskStore, TaskStore};
use a2a_types::v1::{StreamResponse, Task, TaskPushNotificationConfig};
use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::routing::post;
use serde_json::json;

const CONCURRENCY: usize = 200;

#[derive(Default)]
struct Received {
    count: AtomicU64,
    first_us: AtomicU64,
    last_us: AtomicU64,
    /// Publish → arrival, µs, for events that carry `sentUs`.
    latencies: Mutex<Vec<u64>>,
}

fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0)
}

fn var(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

async fn receive(State(r): State<Arc<Received>>, body: Bytes) -> &'static str {
    let now = now_us();
    r.count.fetch_add(1, Ordering::Relaxed);
    let _ = r
        .first_us
        .compare_exchange(0, now, Ordering::Relaxed, Ordering::Relaxed);
    r.last_us.fetch_max(now, Ordering::Relaxed);
    // The publish time sits in the status update's metadata: `"sentUs":<n>`.
    if let Some(at) = memchr_str(&body, b"\"sentUs\":") {
        let digits: String = body[at + 9..]
            .iter()
            .take_while(|b| b.is_ascii_digit() || **b == b'.')
            .map(|b| *b as char)
            .collect();
        if let Ok(sent) = digits.parse::<f64>() {
            r.latencies
                .lock()
                .unwrap()
                .push(now.saturating_sub(sent as u64));
        }
    }
    "ok"
}

fn memchr_str(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn status_event(task_id: &str, sent_us: Option<u64>) -> StreamResponse {
    let mut update = json!({"taskId": task_id, "contextId": "bench",
        "status": {"state": "TASK_STATE_WORKING"}});
    if let Some(sent) = sent_us {
        update["metadata"] = json!({"sentUs": sent});
    }
    serde_json::from_value(json!({ "statusUpdate": update })).expect("a StreamResponse")
}

#[tokio::main]
async fn main() -> Result<(), String> {
    let db_url = std::env::var("BENCH_DATABASE_URL").map_err(|_| "BENCH_DATABASE_URL")?;
    let redis_url = std::env::var("BENCH_REDIS_URL").map_err(|_| "BENCH_REDIS_URL")?;
    let worker_bin = std::env::var("BENCH_WORKER_BIN").map_err(|_| "BENCH_WORKER_BIN")?;
    let tasks_n = var("BENCH_TASKS", 200) as usize;
    let per_task = var("BENCH_PER_TASK", 100);
    let rate = var("BENCH_RATE", 1000);
    let secs = var("BENCH_SECS", 10);
    let prefix = std::env::var("BENCH_PREFIX")
        .unwrap_or_else(|_| format!("a2a-wbench-{}:", std::process::id()));

    // The receiver.
    let received = Arc::new(Received::default());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| e.to_string())?;
    let hook = format!("http://{}/hook", listener.local_addr().unwrap());
    let app = Router::new()
        .route("/hook", post(receive))
        .with_state(received.clone());
    tokio::spawn(async move { axum::serve(listener, app).await });

    // 1. The raw limit: the same bodies, straight to the receiver.
    let raw = raw_limit(&hook, Duration::from_secs(3)).await;
    println!("raw HTTP (bench -> receiver, {CONCURRENCY} in flight): {raw:.0} req/s");
    received.count.store(0, Ordering::Relaxed);

    // Tasks with one push config each, and the first event of each on the stream.
    let store =
        PgTaskStore::connect_lazy(&db_url, &PgOptions::default()).map_err(|e| e.to_string())?;
    store.migrate().await.map_err(|e| e.to_string())?;
    let bus = RedisEventBus::connect_lazy(&redis_url, &prefix).map_err(|e| e.to_string())?;
    let mut ids = Vec::with_capacity(tasks_n);
    for _ in 0..tasks_n {
        let id = uuid::Uuid::now_v7().to_string();
        let task = Task {
            id: id.clone(),
            context_id: "bench".into(),
            status: Some(Default::default()),
            ..Default::default()
        };
        let first = store
            .create(NewTask {
                push: None,
                upstream_key: None,
                owner: "bench".into(),
                agent: "bench".into(),
                task,
            })
            .await
            .map_err(|e| e.to_string())?;
        let config = TaskPushNotificationConfig {
            id: "hook".into(),
            task_id: id.clone(),
            url: hook.clone(),
            ..Default::default()
        };
        store
            .put_push_config(
                "bench",
                config,
                a2a_types::Dialect::V1,
                a2a_store::PushQuota::NONE,
            )
            .await
            .map_err(|e| e.to_string())?;
        publish(&bus, &id, 1, Arc::unwrap_or_clone(first.event)).await?;
        ids.push(id);
    }

    // 2. Throughput: a backlog of events, then the worker.
    let backlog = Instant::now();
    let mut handles = Vec::new();
    for id in ids.clone() {
        let bus = bus.clone();
        handles.push(tokio::spawn(async move {
            for seq in 2..=per_task {
                publish(&bus, &id, seq, status_event(&id, None)).await?;
            }
            Ok::<_, String>(())
        }));
    }
    for h in handles {
        h.await.map_err(|e| e.to_string())??;
    }
    let total = tasks_n as u64 * per_task;
    eprintln!("published {total} events in {:?}", backlog.elapsed());
    let key = std::env::temp_dir().join(format!("a2a-bench-{}.pem", std::process::id()));
    std::fs::write(&key, a2a_worker::keygen::es256_pem()?).map_err(|e| e.to_string())?;
    let mut worker = std::process::Command::new(&worker_bin)
        .env("A2A_DATABASE_URL", &db_url)
        .env("A2A_REDIS_URL", &redis_url)
        .env("A2A_REDIS_PREFIX", &prefix)
        .env("A2A_PUSH_SIGNING_KEYS", format!("bench={}", key.display()))
        .env("A2A_PUSH_ALLOWED_HOSTS", "127.0.0.1")
        .env("A2A_WORKER_LISTEN", "127.0.0.1:0")
        .env("RUST_LOG", "warn")
        .stdout(std::process::Stdio::null())
        .spawn()
        .map_err(|e| format!("{worker_bin}: {e}"))?;
    let result = measure(&received, &bus, &ids, total, per_task, rate, secs).await;
    let _ = worker.kill();
    let _ = worker.wait();
    let _ = std::fs::remove_file(&key);
    result
}

async fn measure(
    received: &Received,
    bus: &RedisEventBus,
    ids: &[String],
    total: u64,
    per_task: u64,
    rate: u64,
    secs: u64,
) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(120);
    while received.count.load(Ordering::Relaxed) < total {
        if Instant::now() > deadline {
            return Err(format!(
                "only {} of {total} deliveries in 120 s",
                received.count.load(Ordering::Relaxed)
            ));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let span = received.last_us.load(Ordering::Relaxed) - received.first_us.load(Ordering::Relaxed);
    let throughput = total as f64 / (span as f64 / 1e6);
    println!(
        "throughput: {total} deliveries ({} tasks x {per_task}) in {:.2} s = {throughput:.0} deliveries/s",
        ids.len(),
        span as f64 / 1e6
    );

    // 3. Latency at a steady rate.
    let start = Instant::now();
    let n = rate * secs;
    let mut seqs = vec![per_task; ids.len()];
    for i in 0..n {
        let due = start + Duration::from_micros(i * 1_000_000 / rate);
        tokio::time::sleep_until(due.into()).await;
        let t = (i as usize) % ids.len();
        seqs[t] += 1;
        let event = status_event(&ids[t], Some(now_us()));
        let (bus, id, seq) = (bus.clone(), ids[t].clone(), seqs[t]);
        // Publishes of one task stay in order: each task gets an event every 1/ (rate/tasks) s,
        // far longer than one publish takes.
        tokio::spawn(async move { publish(&bus, &id, seq, event).await });
    }
    let expected = total + n;
    let deadline = Instant::now() + Duration::from_secs(30);
    while received.count.load(Ordering::Relaxed) < expected && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Percentiles from hdrhistogram (3 significant digits), as the load tool computes them.
    let mut lat = hdrhistogram::Histogram::<u64>::new(3).map_err(|e| e.to_string())?;
    for &us in received.latencies.lock().unwrap().iter() {
        lat.saturating_record(us);
    }
    let ms = |us: u64| us as f64 / 1000.0;
    println!(
        "latency at {rate}/s for {secs} s: {} of {n} delivered, publish -> webhook p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        lat.len(),
        ms(lat.value_at_quantile(0.50)),
        ms(lat.value_at_quantile(0.99)),
        ms(lat.max()),
    );
    Ok(())
}

async fn publish(
    bus: &RedisEventBus,
    task_id: &str,
    seq: u64,
    event: StreamResponse,
) -> Result<(), String> {
    bus.publish(BusEvent {
        task_id: task_id.to_owned(),
        seq,
        event: Arc::new(event),
        trace: None,
        push: true,
    })
    .await
    .map_err(|e| e.to_string())
}

async fn raw_limit(hook: &str, time: Duration) -> f64 {
    let client = reqwest::Client::new();
    let body = serde_json::to_vec(&status_event("raw", None)).unwrap();
    let count = Arc::new(AtomicU64::new(0));
    let end = Instant::now() + time;
    let mut handles = Vec::new();
    for _ in 0..CONCURRENCY {
        let (client, body, count, hook) =
            (client.clone(), body.clone(), count.clone(), hook.to_owned());
        handles.push(tokio::spawn(async move {
            while Instant::now() < end {
                if client.post(&hook).body(body.clone()).send().await.is_ok() {
                    count.fetch_add(1, Ordering::Relaxed);
                }
            }
        }));
    }
    for h in handles {
        let _ = h.await;
    }
    count.load(Ordering::Relaxed) as f64 / time.as_secs_f64()
}
