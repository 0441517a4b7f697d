//! Measurements for the README (`cargo test -p a2a-bus -- --ignored --nocapture redis::bench`):
//! cross-process fan-out latency and the cost of idle subscribers. Two buses on one Redis stand
//! for two replicas; they share nothing but Redis.

use std::time::{Duration, Instant};

use super::*;

async fn two_replicas() -> (RedisEventBus, RedisEventBus, a2a_testing::TestRedis) {
    let redis = a2a_testing::TestRedis::create().await;
    let a = RedisEventBus::connect_lazy(redis.url(), redis.prefix()).unwrap();
    let b = RedisEventBus::connect_lazy(redis.url(), redis.prefix()).unwrap();
    (a, b, redis)
}

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "measurement"]
async fn fanout_latency_at_1000_events_per_second() {
    let (a, b, _redis) = two_replicas().await;
    const TASKS: usize = 100;
    const EVENTS: u64 = 5000;
    let mut subs = Vec::new();
    for t in 0..TASKS {
        subs.push(b.subscribe(&format!("t{t}")).await.unwrap());
    }
    let start = Instant::now();
    let receivers = subs.into_iter().map(|mut sub| {
        tokio::spawn(async move {
            let mut lat = Vec::new();
            while let Ok(Some(BusItem::Event(ev))) =
                tokio::time::timeout(Duration::from_secs(3), sub.next()).await
            {
                // seq carries the publish time in microseconds since `start`.
                lat.push(start.elapsed().as_micros() as u64 - ev.seq);
            }
            lat
        })
    });
    let receivers: Vec<_> = receivers.collect();
    let mut tick = tokio::time::interval(Duration::from_millis(1));
    for i in 0..EVENTS {
        tick.tick().await;
        let t = i as usize % TASKS;
        let mut ev = crate::suite::working(&format!("t{t}"), 0);
        ev.seq = start.elapsed().as_micros() as u64;
        a.publish(ev).await.unwrap();
    }
    let mut lat: Vec<u64> = Vec::new();
    for r in receivers {
        lat.extend(r.await.unwrap());
    }
    lat.sort_unstable();
    let pct = |p: f64| lat[((lat.len() as f64 * p) as usize).min(lat.len() - 1)];
    println!(
        "fan-out A->B: {} events, p50 {} us, p99 {} us, max {} us",
        lat.len(),
        pct(0.50),
        pct(0.99),
        lat[lat.len() - 1]
    );
    assert_eq!(lat.len() as u64, EVENTS, "every event arrived");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "measurement"]
async fn ten_thousand_idle_subscribers() {
    let (a, b, _redis) = two_replicas().await;
    let before = rss_kib();
    let started = Instant::now();
    let mut subs = Vec::new();
    for t in 0..10_000 {
        subs.push(b.subscribe(&format!("idle{t}")).await.unwrap());
    }
    let took = started.elapsed();
    tokio::time::sleep(Duration::from_secs(2)).await;
    println!(
        "10,000 idle subscribers: subscribed in {took:?}, RSS +{} KiB ({} KiB total)",
        rss_kib().saturating_sub(before),
        rss_kib()
    );
    // Still live: an event for one of them arrives promptly.
    let sent = Instant::now();
    a.publish(crate::suite::working("idle9999", 2))
        .await
        .unwrap();
    let got = tokio::time::timeout(Duration::from_secs(5), subs[9999].next()).await;
    assert!(matches!(got, Ok(Some(BusItem::Event(_)))));
    println!(
        "an event among 10,000 idle subscriptions: {:?}",
        sent.elapsed()
    );
}
