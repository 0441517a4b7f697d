//! A tarpit webhook tenant beside a healthy one (README, *Reliability*): under the steady load, a
//! healthy tenant sends short tasks with push configs to its own webhook; its delivery latency
//! (arrival minus the event's status timestamp) is measured in three phases: alone; beside a
//! second tenant whose three senders send without pause to a healthy webhook of their own (the
//! control: the load of the last phase, without the tarpit); beside the same senders sending to
//! a tarpit (429 with `Retry-After: 600`, or 30 s stalls) on another destination. The healthy
//! tenant's p50 and p99 beside the tarpit must stay within twice those beside the healthy load
//! (both never below a floor of machine noise, see `P99_FLOOR`), and every healthy task's end must reach its
//! webhook. The first phase is reported, not
//! bounded: the second tenant's sends load the two cores whatever its webhook does (issue 27:
//! that load, not the tarpit, is what slowed the healthy tenant's delivery against the phase
//! alone). Each phase also prints where the time went (CPU per process, PostgreSQL commits, the
//! workers' pipeline) and splits the latency at the event's entry in the worker's stream.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use a2a_client::BindingKind;
use serde_json::json;

use crate::account::{self, Report};
use crate::load::{self, Acked, Load};
use crate::topology::Topology;
use crate::usage::Usage;
use crate::webhook::{Behaviour, Webhook, latency, quantile};

/// The healthy tenant alone, then beside a second tenant's load to a healthy webhook, then
/// beside the same load to the tarpit (the last two alike, so that they see alike noise).
const ALONE: Duration = Duration::from_secs(8);
const CONTROL: Duration = Duration::from_secs(30);
const BESIDE: Duration = Duration::from_secs(30);
/// The p50 beside the tarpit is bounded by twice the control phase's, never less than [`P50_FLOOR`]
/// (below it, a difference is machine noise: a debug build on two cores shared with the rest of
/// the test run); the p99 by twice the control's, never less than [`P99_FLOOR`] (the same noise:
/// it bounds only a control p99 under 100 ms). The phases are 30 s: over 15 s the p99 was the
/// third-slowest of about 220 deliveries, in effect one slow healthy task (its three status events
/// late together), and longer phases showed what the shorter hid: before the worker renewed its
/// leases in one statement, the p99 beside the tarpit grew with the phase (2.4-4.0 times the
/// control's in 4 runs of 4 over 30 s); since, 1.10-1.70 in 6 runs of 7 and 2.56 in one; and since
/// a held lease is no longer polled (its entries are left to the holder), 0.75-1.19 in 3 runs of 3
/// (2026-11-29). A tarpit that holds shared delivery capacity moves both far beyond (p50 4.7 s,
/// p99 18.9 s).
const P50_FLOOR: Duration = Duration::from_millis(100);
const P99_FLOOR: Duration = Duration::from_millis(200);

/// Senders: each sends a task with a push config to `hook`, waits for its answer, pauses
/// `pause`, and again, until stopped; the ids of the tasks answered.
struct Senders {
    stop: Arc<AtomicBool>,
    ids: Arc<Mutex<Vec<String>>>,
    failures: Arc<Mutex<Vec<String>>>,
    handles: Vec<tokio::task::JoinHandle<()>>,
}

impl Senders {
    fn start(lb: &str, hook: &str, clients: usize, pause: Duration) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let ids = Arc::new(Mutex::new(Vec::new()));
        let failures = Arc::new(Mutex::new(Vec::new()));
        let handles = (0..clients)
            .map(|_| {
                let client = load::client_for(BindingKind::JsonRpc, lb);
                let (stop, ids, failures) = (stop.clone(), ids.clone(), failures.clone());
                let hook = hook.to_owned();
                tokio::spawn(async move {
                    while !stop.load(Ordering::Relaxed) {
                        let req = load::send(
                            json!({"chunks": 2, "delayMs": 20}),
                            Some(&format!("{hook}/{}", uuid::Uuid::new_v4())),
                            false,
                        );
                        match client.send_message(req).await {
                            Ok(answer) => {
                                let v = serde_json::to_value(&answer).unwrap_or_default();
                                match v["task"]["id"].as_str() {
                                    Some(id) => lock(&ids).push(id.to_owned()),
                                    None => lock(&failures).push(format!("answered {v}")),
                                }
                            }
                            Err(e) => lock(&failures).push(e.to_string()),
                        }
                        tokio::time::sleep(pause).await;
                    }
                })
            })
            .collect();
        Self {
            stop,
            ids,
            failures,
            handles,
        }
    }

    async fn stop(self) -> (Vec<String>, Vec<String>) {
        self.stop.store(true, Ordering::Relaxed);
        for h in self.handles {
            let _ = h.await;
        }
        (lock(&self.ids).clone(), lock(&self.failures).clone())
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

pub async fn tarpit_beside_a_healthy_tenant() -> Report {
    let name = "tarpit tenant";
    let top = Topology::start().await;
    let healthy = Webhook::start(Behaviour::Healthy).await;
    let decoy = Webhook::start(Behaviour::Healthy).await;
    let tarpit = Webhook::start(Behaviour::Tarpit).await;
    let steady = Load::start(&top.lb(), &top.receiver.url(""), crate::CLIENTS_PER_BINDING);
    let good = Senders::start(
        &top.lb(),
        &healthy.url("/healthy"),
        2,
        Duration::from_millis(100),
    );
    let u0 = Usage::sample(&top).await;
    tokio::time::sleep(ALONE).await;
    let control_from = SystemTime::now();
    let u1 = Usage::sample(&top).await;
    let other = Senders::start(&top.lb(), &decoy.url("/other"), 3, Duration::ZERO);
    tokio::time::sleep(CONTROL).await;
    let (other_ids, other_failures) = other.stop().await;
    let beside_from = SystemTime::now();
    let u2 = Usage::sample(&top).await;
    let bad = Senders::start(&top.lb(), &tarpit.url("/tarpit"), 3, Duration::ZERO);
    tokio::time::sleep(BESIDE).await;
    let u3 = Usage::sample(&top).await;
    let (bad_ids, bad_failures) = bad.stop().await;
    let (good_ids, good_failures) = good.stop().await;
    let mut ledger = steady.stop().await;
    println!("usage alone: {}", u1.since(&u0));
    println!("usage beside a healthy second tenant: {}", u2.since(&u1));
    println!("usage beside the tarpit: {}", u3.since(&u2));

    // Every healthy task's end reaches its webhook.
    let deadline = Instant::now() + Duration::from_secs(30);
    let missing = loop {
        let ended: BTreeSet<String> = healthy
            .arrivals()
            .iter()
            .filter(|a| {
                load::is_terminal(
                    a.json["statusUpdate"]["status"]["state"]
                        .as_str()
                        .unwrap_or(""),
                ) || load::is_terminal(a.json["task"]["status"]["state"].as_str().unwrap_or(""))
            })
            .map(|a| a2a_testing::receiver::task_id_of(&a.json).to_owned())
            .collect();
        let missing: Vec<&String> = good_ids.iter().filter(|id| !ended.contains(*id)).collect();
        if missing.is_empty() || Instant::now() > deadline {
            break missing.into_iter().cloned().collect::<Vec<_>>();
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    };

    // Each delivery in the phase its event was made in (its arrival minus its latency).
    let entered = entered_stream(&top).await;
    let mut phases: [Phase; 3] = Default::default();
    for a in healthy.arrivals() {
        let Some(l) = latency(&a) else { continue };
        let made = a.at.checked_sub(l).unwrap_or(a.at);
        let phase = if made < control_from {
            0
        } else if made < beside_from {
            1
        } else {
            2
        };
        let entered = stamp_of(&a.json).and_then(|k| entered.get(&k));
        phases[phase].add(l, made, a.at, entered.copied());
    }
    let [alone, control, beside] = &phases;
    let other: Vec<Duration> = decoy.arrivals().iter().filter_map(latency).collect();
    println!(
        "healthy tenant: {} tasks; delivery latency alone {}; beside a second tenant's load to a \
         healthy webhook {}; beside the same load to the tarpit {}. Second tenant: {} tasks to a \
         healthy webhook (its p50 {} ms, p99 {} ms), then {} tasks to the tarpit ({} requests, \
         429 or stalled)",
        good_ids.len(),
        alone.line(),
        control.line(),
        beside.line(),
        other_ids.len(),
        quantile(&other, 0.5).as_millis(),
        quantile(&other, 0.99).as_millis(),
        bad_ids.len(),
        tarpit.seen()
    );
    let (p50n, p99n) = (
        quantile(&control.total, 0.5),
        quantile(&control.total, 0.99),
    );
    let (p50b, p99b) = (quantile(&beside.total, 0.5), quantile(&beside.total, 0.99));
    let bad_ids: Vec<String> = bad_ids.into_iter().chain(other_ids).collect();
    let bad_failures: Vec<String> = bad_failures.into_iter().chain(other_failures).collect();

    // The senders' tasks are accounted with the steady load's (their own webhooks are checked
    // here, not the receiver).
    for id in good_ids.iter().chain(&bad_ids) {
        ledger.acked.push(Acked {
            id: id.clone(),
            push: false,
            answered: String::new(),
        });
    }
    let mut report = account::account(name, &top, &ledger).await;
    report.lost.extend(
        good_failures
            .iter()
            .chain(&bad_failures)
            .map(|f| format!("failed: a tenant's send: {f}")),
    );
    report.lost.extend(
        missing
            .iter()
            .map(|id| format!("healthy task {id}: its end never reached its webhook")),
    );
    crate::check(name, &top, &report);
    assert!(
        control.total.len() >= 50 && beside.total.len() >= 50,
        "too few healthy deliveries to measure ({} beside the healthy load, {} beside the tarpit)",
        control.total.len(),
        beside.total.len()
    );
    assert!(
        tarpit.seen() >= 16,
        "the tarpit was hardly tried ({} requests)",
        tarpit.seen()
    );
    // A tarpit that holds shared delivery capacity delays most healthy deliveries, not a few:
    // the median is the steady signal, the p99 the bound.
    let bound = (p50n * 2).max(P50_FLOOR);
    assert!(
        p50b <= bound,
        "the healthy tenant's p50 went from {p50n:?} beside a healthy load to {p50b:?} beside \
         the tarpit (bound {bound:?})"
    );
    let bound = (p99n * 2).max(P99_FLOOR);
    assert!(
        p99b <= bound,
        "the healthy tenant's p99 went from {p99n:?} beside a healthy load to {p99b:?} beside \
         the tarpit (bound {bound:?})"
    );
    report
}

/// The healthy tenant's deliveries of events made in one phase: end to end, and split where
/// the event entered the worker's stream (before: the gateway's commit and outbox relay;
/// after: the worker's read, lease and attempt), for the events whose entry was found.
#[derive(Default)]
struct Phase {
    total: Vec<Duration>,
    to_stream: Vec<Duration>,
    from_stream: Vec<Duration>,
}

impl Phase {
    fn add(&mut self, latency: Duration, made: SystemTime, at: SystemTime, entered: Option<u64>) {
        self.total.push(latency);
        if let Some(ms) = entered {
            let entered = SystemTime::UNIX_EPOCH + Duration::from_millis(ms);
            self.to_stream
                .push(entered.duration_since(made).unwrap_or_default());
            self.from_stream
                .push(at.duration_since(entered).unwrap_or_default());
        }
    }

    fn line(&self) -> String {
        let ms = |v: &[Duration], q| quantile(v, q).as_millis();
        format!(
            "p50 {} ms, p99 {} ms ({} events; made to stream p50 {} ms, p99 {} ms; stream to \
             webhook p50 {} ms, p99 {} ms)",
            ms(&self.total, 0.5),
            ms(&self.total, 0.99),
            self.total.len(),
            ms(&self.to_stream, 0.5),
            ms(&self.to_stream, 0.99),
            ms(&self.from_stream, 0.5),
            ms(&self.from_stream, 0.99),
        )
    }
}

/// An event's task and status timestamp: what identifies it both at the webhook and in the
/// stream (`None` for events without a status, artifact chunks).
fn stamp_of(json: &serde_json::Value) -> Option<(String, String)> {
    let stamp = json["task"]["status"]["timestamp"]
        .as_str()
        .or(json["statusUpdate"]["status"]["timestamp"].as_str())?;
    Some((
        a2a_testing::receiver::task_id_of(json).to_owned(),
        stamp.to_owned(),
    ))
}

/// When each event with a status entered the worker's stream (the entry id's Unix ms), read
/// back from every partition (the run is far below the stream's cap: nothing was trimmed).
async fn entered_stream(top: &Topology) -> HashMap<(String, String), u64> {
    let mut out = HashMap::new();
    let Ok(client) = redis::Client::open(top.redis().url()) else {
        return out;
    };
    let Ok(mut conn) = client.get_multiplexed_async_connection().await else {
        return out;
    };
    for p in 0..a2a_bus::keys::DEFAULT_PARTITIONS {
        let key = a2a_bus::events_key("sys:", p);
        let Ok(reply) = redis::cmd("XRANGE")
            .arg(&key)
            .arg("-")
            .arg("+")
            .query_async::<redis::streams::StreamRangeReply>(&mut conn)
            .await
        else {
            continue;
        };
        for entry in reply.ids {
            let Some(ms) = entry.id.split_once('-').and_then(|(ms, _)| ms.parse().ok()) else {
                continue;
            };
            let Some(event) = a2a_bus::decode_entry(&entry) else {
                continue;
            };
            let json = serde_json::to_value(&*event.event).unwrap_or_default();
            if let Some(key) = stamp_of(&json) {
                out.entry(key).or_insert(ms);
            }
        }
    }
    out
}
