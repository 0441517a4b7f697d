//! The modes the benchmark scripts were built on, kept as they were (positional arguments, one
//! text line each, which the scripts print): `loadtest/bench-fanout.sh`
//! (how fast an event committed on one gateway replica reaches an SSE subscriber on another,
//! and what idle subscribers cost a replica), and the OTLP receiver of `loadtest/bench.sh`.
//!
//! ```text
//! a2a-loadtest raw    REDIS_URL RATE SECS        # XADD on one connection -> XREAD on another
//! a2a-loadtest fanout A_URL B_URL RATE SECS      # streaming tasks on A, followed on B
//! a2a-loadtest idle   A_URL B_URL N B_PID [DB_URL] # N hanging tasks on A, N subscribers on B;
//!                                                # with DB_URL, the database's reads while idle
//! a2a-loadtest otlp-sink ADDR COUNTFILE          # OTLP receiver that only counts (bench.sh)
//! ```
//!
//! Latencies are measured inside this one process. `raw`: from XADD to XREAD. `fanout`: from
//! the `status.timestamp` the gateway on A puts on a status event when it creates it (just before
//! committing it; millisecond precision, so up to 1 ms too high) to the moment an SSE client
//! receives it, on A (the creator's stream) and on B (a subscriber on the other replica); and B's
//! arrival minus A's arrival of the same event (same task, same SSE id) for every event.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use futures::StreamExt;
use futures::stream::BoxStream;
use serde_json::{Value, json};

fn ms(us: u64) -> f64 {
    us as f64 / 1000.0
}

/// p50, p99 and max of `samples`, in milliseconds, as one line: from the HDR histogram the
/// load tool's reports use (`stats`), so every percentile of the tool is computed one way.
fn summary(samples: &mut [Duration]) -> String {
    if samples.is_empty() {
        return "no samples".into();
    }
    let mut h = crate::stats::histogram();
    for d in samples.iter() {
        crate::stats::record(&mut h, *d);
    }
    format!(
        "n={} p50={:.2}ms p99={:.2}ms max={:.2}ms",
        h.len(),
        ms(h.value_at_quantile(0.50)),
        ms(h.value_at_quantile(0.99)),
        ms(h.max())
    )
}

/// The raw limit underneath: Redis itself, publishing on one connection and blocking in XREAD
/// on another, at the same rate.
pub async fn raw(url: &str, rate: u64, secs: u64) -> Result<()> {
    let client = redis::Client::open(url)?;
    let mut publisher = client.get_multiplexed_async_connection().await?;
    let mut reader = client.get_multiplexed_async_connection().await?;
    let key = format!("a2a-loadtest-raw:{}", uuid::Uuid::new_v4().simple());
    let start = Instant::now();
    let total = rate * secs;
    let read_key = key.clone();
    let reading = tokio::spawn(async move {
        let mut samples = Vec::new();
        let mut last = "0-0".to_owned();
        while (samples.len() as u64) < total {
            let reply: Option<redis::streams::StreamReadReply> = redis::cmd("XREAD")
                .arg("BLOCK")
                .arg(2000)
                .arg("STREAMS")
                .arg(&read_key)
                .arg(&last)
                .query_async(&mut reader)
                .await?;
            let Some(reply) = reply else { break };
            let now = start.elapsed();
            for entry in reply.keys.iter().flat_map(|k| &k.ids) {
                let sent: u64 = entry.get("at").context("at")?;
                samples.push(now.saturating_sub(Duration::from_nanos(sent)));
                last = entry.id.clone();
            }
        }
        anyhow::Ok(samples)
    });
    let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / rate as f64));
    for _ in 0..total {
        tick.tick().await;
        let at = start.elapsed().as_nanos() as u64;
        let _: String = redis::cmd("XADD")
            .arg(&key)
            .arg("MAXLEN")
            .arg("~")
            .arg(10_000)
            .arg("*")
            .arg("at")
            .arg(at)
            .query_async(&mut publisher)
            .await?;
    }
    let mut samples = reading.await??;
    let _: () = redis::cmd("DEL")
        .arg(&key)
        .query_async(&mut publisher)
        .await?;
    println!(
        "raw redis XADD->XREAD at {rate}/s: {}",
        summary(&mut samples)
    );
    Ok(())
}

fn script_send(method: &str, script: Value, return_immediately: bool) -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": {
        "tenant": "scenario",
        "configuration": {"returnImmediately": return_immediately},
        "message": {"messageId": uuid::Uuid::new_v4().to_string(), "role": "ROLE_USER",
                    "parts": [{"text": "run"}, {"data": script}]}}})
}

fn subscribe(id: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "SubscribeToTask", "params": {"id": id}})
}

type Events = BoxStream<'static, Result<(u64, Value)>>;

/// Posts a JSON-RPC request that answers with SSE; yields (SSE id, data) as events arrive.
async fn sse(http: &reqwest::Client, base: &str, body: &Value) -> Result<Events> {
    let resp = http
        .post(format!("{base}/a2a/jsonrpc"))
        .header("a2a-version", "1.0")
        .json(body)
        .send()
        .await?;
    if !resp.status().is_success() {
        bail!("{base}: HTTP {}", resp.status());
    }
    // The client's bounded SSE parser (the one the repository has); a JSON-RPC stream event,
    // one StreamResponse, is far below 1 MiB.
    Ok(a2a_client::sse::events(resp.bytes_stream(), 1 << 20)
        .map(|ev| {
            let ev = ev?;
            let data: Value = serde_json::from_str(&ev.data)?;
            if data.get("error").is_some() {
                bail!("stream error: {data}");
            }
            let id = ev.id.and_then(|id| id.trim().parse().ok());
            Ok((id.context("an SSE event without id")?, data))
        })
        .boxed())
}

/// When each event (by SSE id) arrived, and how long after its status timestamp, if it has one.
type Arrivals = HashMap<u64, (Instant, Option<Duration>)>;

/// Time since a status event's `status.timestamp` (RFC 3339, milliseconds), on the wall clock.
fn since_stamp(data: &Value) -> Option<Duration> {
    let stamp = data["result"]["statusUpdate"]["status"]["timestamp"].as_str()?;
    let at = chrono::DateTime::parse_from_rfc3339(stamp).ok()?;
    let now = chrono::Utc::now();
    (now - at.with_timezone(&chrono::Utc)).to_std().ok()
}

/// Streaming tasks on A (20 chunks, 20 ms apart: about 50 events/s each), as many at once as
/// `rate` needs, each followed by a subscriber on B; until `secs` have passed.
pub async fn fanout(a: &str, b: &str, rate: u64, secs: u64) -> Result<()> {
    const CHUNKS: u64 = 20;
    const DELAY_MS: u64 = 20;
    let per_task = 1000 / DELAY_MS; // events/s one task produces
    let workers = rate.div_ceil(per_task);
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(256)
        .build()?;
    let deadline = Instant::now() + Duration::from_secs(secs);
    let samples = Arc::new(Mutex::new(Samples::default()));
    let events = Arc::new(Mutex::new(0u64));
    let started = Instant::now();
    let runs = (0..workers).map(|_| {
        let (http, samples, events) = (http.clone(), samples.clone(), events.clone());
        async move {
            while Instant::now() < deadline {
                let script = json!({"chunks": CHUNKS, "delayMs": DELAY_MS});
                let mut on_a = sse(
                    &http,
                    a,
                    &script_send("SendStreamingMessage", script, false),
                )
                .await?;
                let (_, head) = on_a.next().await.context("A: the task")??;
                let id = head["result"]["task"]["id"]
                    .as_str()
                    .context("task id")?
                    .to_owned();
                let on_b = sse(&http, b, &subscribe(&id)).await?;
                let collect = |mut s: Events| async move {
                    let mut seen = Arrivals::new();
                    while let Some(item) = s.next().await {
                        let (seq, data) = item?;
                        seen.insert(seq, (Instant::now(), since_stamp(&data)));
                    }
                    anyhow::Ok(seen)
                };
                let (on_a, on_b) = tokio::join!(collect(on_a), collect(on_b));
                let (on_a, on_b) = (on_a?, on_b?);
                let first_b = on_b.keys().min().copied().unwrap_or(0); // B's snapshot
                let mut samples = samples.lock().unwrap();
                for (seq, (tb, b_stamp)) in on_b.iter().filter(|(seq, _)| **seq > first_b) {
                    let Some((ta, a_stamp)) = on_a.get(seq) else {
                        continue;
                    };
                    samples.b_minus_a.push(tb.saturating_duration_since(*ta));
                    samples.a_before_b += u64::from(ta <= tb);
                    samples.a_stamp.extend(*a_stamp);
                    samples.b_stamp.extend(*b_stamp);
                }
                *events.lock().unwrap() += on_a.len() as u64;
            }
            anyhow::Ok(())
        }
    });
    for r in futures::future::join_all(runs).await {
        r?;
    }
    let elapsed = started.elapsed().as_secs_f64();
    let events = *events.lock().unwrap();
    let mut s = std::mem::take(&mut *samples.lock().unwrap());
    println!(
        "cross-replica fan-out: {workers} concurrent streaming tasks, {:.0} events/s committed on A",
        events as f64 / elapsed
    );
    println!(
        "  status event created on A -> SSE on A (same replica):  {}",
        summary(&mut s.a_stamp)
    );
    println!(
        "  status event created on A -> SSE on B (other replica): {}",
        summary(&mut s.b_stamp)
    );
    let compared = s.b_minus_a.len();
    println!(
        "  every event, arrival on B after arrival on A (0 when B was first, {} of {compared}): {}",
        compared as u64 - s.a_before_b,
        summary(&mut s.b_minus_a)
    );
    Ok(())
}

#[derive(Default)]
struct Samples {
    a_stamp: Vec<Duration>,
    b_stamp: Vec<Duration>,
    b_minus_a: Vec<Duration>,
    a_before_b: u64,
}

fn rss_kib(pid: u32) -> Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .context("VmRSS")
}

/// N tasks that wait for ever (created on A), each with one SSE subscriber on B; B's RSS before
/// and after; then, among all those open streams, how fast a cancel on A reaches B.
/// Transactions the database has committed so far (`pg_stat_database`, read with psql): every
/// store read is one.
fn db_transactions(db_url: &str) -> Result<u64> {
    let out = std::process::Command::new("psql")
        .args([db_url, "-X", "-q", "-t", "-A", "-c"])
        .arg("SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()")
        .output()
        .context("psql")?;
    anyhow::ensure!(
        out.status.success(),
        "psql: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(String::from_utf8_lossy(&out.stdout).trim().parse()?)
}

pub async fn idle(a: &str, b: &str, n: usize, b_pid: u32, db_url: Option<&str>) -> Result<()> {
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(256)
        .build()?;
    let before = rss_kib(b_pid)?;
    let started = Instant::now();
    let ids: Vec<String> = futures::stream::iter(0..n)
        .map(|_| {
            let http = http.clone();
            async move {
                let body = script_send("SendMessage", json!({"end": "hang"}), true);
                let resp: Value = http
                    .post(format!("{a}/a2a/jsonrpc"))
                    .header("a2a-version", "1.0")
                    .json(&body)
                    .send()
                    .await?
                    .json()
                    .await?;
                let id = resp["result"]["task"]["id"]
                    .as_str()
                    .with_context(|| format!("{resp}"))?;
                anyhow::Ok(id.to_owned())
            }
        })
        .buffer_unordered(64)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect::<Result<_>>()?;
    println!(
        "created {n} hanging tasks on A in {:.1?}",
        started.elapsed()
    );

    // One HTTP/1.1 connection per subscriber (a streaming response holds its connection), as
    // browsers and most SSE clients do.
    let h1 = reqwest::Client::builder().http1_only().build()?;
    let started = Instant::now();
    let subscribers: Vec<_> = futures::stream::iter(ids.iter().cloned())
        .map(|id| {
            let h1 = h1.clone();
            async move {
                let mut s = sse(&h1, b, &subscribe(&id)).await?;
                s.next().await.context("B: the snapshot")??;
                anyhow::Ok((id, s))
            }
        })
        .buffer_unordered(64)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect::<Result<_>>()?;
    let after = rss_kib(b_pid)?;
    println!(
        "{} idle SSE subscribers open on B in {:.1?}: B's RSS {} MiB (before: {} MiB, +{:.1} KiB per subscriber)",
        subscribers.len(),
        started.elapsed(),
        after / 1024,
        before / 1024,
        (after.saturating_sub(before)) as f64 / n as f64
    );

    // What the open subscriptions cost the database while nothing happens (pg_stat_database is
    // refreshed at most every 500 ms, hence the long window).
    if let Some(db_url) = db_url {
        const HOLD: Duration = Duration::from_secs(10);
        let before = db_transactions(db_url)?;
        tokio::time::sleep(HOLD).await;
        let after = db_transactions(db_url)?;
        println!(
            "while {n} subscribers idled for {HOLD:?}: {:.1} database transactions/s (both replicas, \
             every background job included)",
            after.saturating_sub(before) as f64 / HOLD.as_secs_f64()
        );
    }

    // Cancel 50 of them on A, one at a time, and time the CANCELED event's arrival on B.
    let mut samples = Vec::new();
    let mut subscribers: HashMap<String, _> = subscribers.into_iter().collect();
    for id in ids.iter().take(50) {
        let mut s = subscribers.remove(id).context("subscriber")?;
        let sent = Instant::now();
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "CancelTask", "params": {"id": id}});
        http.post(format!("{a}/a2a/jsonrpc"))
            .header("a2a-version", "1.0")
            .json(&body)
            .send()
            .await?
            .error_for_status()?;
        let acked = sent.elapsed();
        s.next().await.context("B: CANCELED")??;
        samples.push(sent.elapsed().saturating_sub(acked).max(Duration::ZERO));
        // `samples` is B's arrival after A acknowledged the cancel (the CANCELED event was
        // committed before the acknowledgement).
    }
    println!(
        "among {n} open subscriptions, CancelTask acknowledged on A -> CANCELED on B: {}",
        summary(&mut samples)
    );
    // Leave the rest of the tasks canceled, so the gateway is clean for the next run.
    futures::stream::iter(ids.into_iter().skip(50))
        .map(|id| {
            let http = http.clone();
            async move {
                let body = json!({"jsonrpc": "2.0", "id": 1, "method": "CancelTask", "params": {"id": id}});
                let _ = http.post(format!("{a}/a2a/jsonrpc")).header("a2a-version", "1.0").json(&body).send().await;
            }
        })
        .buffer_unordered(64)
        .collect::<Vec<_>>()
        .await;
    drop(subscribers);
    Ok(())
}

/// CPU time this process has used so far (user + system, every thread): fields 14 and 15 of
/// /proc/self/stat, in clock ticks of USER_HZ (100 on Linux).
pub fn cpu_time() -> Result<Duration> {
    let stat = std::fs::read_to_string("/proc/self/stat")?;
    // The command name (field 2) is in parentheses and may hold spaces: count from after it,
    // where field 3 is the first.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .context("/proc/self/stat")?
        .1
        .split_whitespace()
        .collect();
    let ticks = |field: usize| -> Result<u64> {
        Ok(fields.get(field - 3).context("/proc/self/stat")?.parse()?)
    };
    Ok(Duration::from_millis((ticks(14)? + ticks(15)?) * 10))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summaries() {
        let mut samples: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        // Each figure is the top of its HDR bucket (3 significant digits: within 0.1%).
        assert_eq!(
            summary(&mut samples),
            "n=100 p50=50.02ms p99=99.01ms max=100.03ms"
        );
        assert_eq!(summary(&mut []), "no samples");
    }

    #[test]
    fn this_process_uses_cpu_time() {
        // Spins until the clock-tick counters move (a loaded machine may deschedule the test for
        // a while), up to a bound that would only be reached if they were misread.
        let before = cpu_time().unwrap();
        let spin = Instant::now();
        while cpu_time().unwrap() == before && spin.elapsed() < Duration::from_secs(10) {
            std::hint::black_box(0u64);
        }
        assert!(cpu_time().unwrap() > before);
    }
}
