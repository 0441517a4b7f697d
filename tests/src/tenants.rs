//! A tarpit webhook tenant beside a healthy one (README, *Reliability*): under the steady load, a
//! healthy tenant sends short tasks with push configs to its own webhook; its delivery latency
//! (arrival minus the event's status timestamp) is measured alone first, then while a second
//! tenant's tasks push to a tarpit (429 with `Retry-After: 600`, or 30 s stalls) on another
//! destination. The healthy tenant's p99 must stay within twice its normal p99, and every
//! healthy task's end must reach its webhook.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use a2a_client::BindingKind;
use serde_json::json;

use crate::account::{self, Report};
use crate::load::{self, Acked, Load};
use crate::topology::Topology;
use crate::webhook::{Behaviour, Webhook, latency, quantile};

/// The healthy tenant alone, then beside the tarpit.
const NORMAL: Duration = Duration::from_secs(12);
const BESIDE: Duration = Duration::from_secs(15);
/// Below this, a p99 is machine noise (a debug build on two shared cores): the bound is twice
/// the normal p99, but never less than this.
const NOISE_FLOOR: Duration = Duration::from_millis(100);

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
    let tarpit = Webhook::start(Behaviour::Tarpit).await;
    let steady = Load::start(&top.lb(), &top.receiver.url(""), crate::CLIENTS_PER_BINDING);
    let good = Senders::start(
        &top.lb(),
        &healthy.url("/healthy"),
        2,
        Duration::from_millis(100),
    );
    tokio::time::sleep(NORMAL).await;
    let beside_from = SystemTime::now();
    let bad = Senders::start(&top.lb(), &tarpit.url("/tarpit"), 3, Duration::ZERO);
    tokio::time::sleep(BESIDE).await;
    let (bad_ids, bad_failures) = bad.stop().await;
    let (good_ids, good_failures) = good.stop().await;
    let mut ledger = steady.stop().await;

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

    let (mut normal, mut beside) = (Vec::new(), Vec::new());
    for a in healthy.arrivals() {
        let Some(l) = latency(&a) else { continue };
        // The phase of the event is when it was made: its arrival minus its latency.
        if a.at.checked_sub(l).is_some_and(|made| made < beside_from) {
            normal.push(l);
        } else {
            beside.push(l);
        }
    }
    let (p50n, p99n) = (quantile(&normal, 0.5), quantile(&normal, 0.99));
    let (p50b, p99b) = (quantile(&beside, 0.5), quantile(&beside, 0.99));
    println!(
        "healthy tenant: {} tasks; delivery latency alone p50 {p50n:?} p99 {p99n:?} ({} events), \
         beside the tarpit p50 {p50b:?} p99 {p99b:?} ({} events); tarpit tenant: {} tasks, {} \
         webhook requests (429 or stalled)",
        good_ids.len(),
        normal.len(),
        beside.len(),
        bad_ids.len(),
        tarpit.seen()
    );

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
        normal.len() >= 50 && beside.len() >= 50,
        "too few healthy deliveries to measure ({} alone, {} beside the tarpit)",
        normal.len(),
        beside.len()
    );
    assert!(
        tarpit.seen() >= 16,
        "the tarpit was hardly tried ({} requests)",
        tarpit.seen()
    );
    let bound = (p99n * 2).max(NOISE_FLOOR);
    assert!(
        p99b <= bound,
        "the healthy tenant's p99 went from {p99n:?} alone to {p99b:?} beside the tarpit (bound \
         {bound:?})"
    );
    report
}
