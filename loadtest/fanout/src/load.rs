//! The load models. Closed loop: N workers, each sends its next request when the previous one
//! was answered. Open loop: requests go out on the [`RateSpec`] schedule whatever the answers do,
//! and each latency counts from the request's intended send time, so queueing in the generator
//! (all `--max-in-flight` requests outstanding, a late timer) counts against the target as a real
//! client's wait would.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;

use crate::schedule::RateSpec;
use crate::stats::Stats;

/// What a successful operation measured besides its total latency: named points in time after
/// it started (e.g. `first_event` of a stream), recorded as secondary latencies from the
/// intended send time.
#[derive(Debug, Default)]
pub struct Outcome {
    pub marks: Vec<(&'static str, Duration)>,
    /// Named durations that are not points after the start (e.g. how much later a subscriber
    /// on another replica got an event than one on the replica that made it), recorded as
    /// they are, without the operation's queueing delay.
    pub spans: Vec<(&'static str, Duration)>,
}

/// A failed operation: `kind` is what the summary counts (an A2A reason such as
/// `TASK_NOT_FOUND`, `transport`, `check:state`), `detail` the first message of that kind.
#[derive(Debug)]
pub struct Failure {
    pub kind: String,
    pub detail: String,
}

impl Failure {
    pub fn new(kind: impl Into<String>, detail: impl Into<String>) -> Self {
        Self {
            kind: kind.into(),
            detail: detail.into(),
        }
    }
}

/// One operation of a scenario; its argument is the request's sequence number.
pub type Operation = Arc<dyn Fn(u64) -> BoxFuture<'static, Result<Outcome, Failure>> + Send + Sync>;

#[derive(Debug, Clone)]
pub enum Load {
    Closed {
        concurrency: usize,
    },
    Open {
        rate: RateSpec,
        max_in_flight: usize,
    },
}

impl std::fmt::Display for Load {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Closed { concurrency } => write!(f, "closed loop, {concurrency} concurrent"),
            Self::Open { rate, .. } => write!(f, "open loop at {rate}"),
        }
    }
}

#[derive(Debug, Clone)]
pub struct Plan {
    pub load: Load,
    /// Run, but leave out of every figure (connections opening, caches warming).
    pub warmup: Duration,
    /// Stop sending after this much of the measured window...
    pub duration: Option<Duration>,
    /// ...or after this many measured requests, whichever comes first.
    pub requests: Option<u64>,
}

const SHARDS: usize = 16;

/// Collects the answers of one run; shared by every in-flight operation.
pub struct Recorder {
    pub t0: Instant,
    pub measure_from: Instant,
    /// Sharded by request number so that thousands of answers a second do not queue on one
    /// lock; merged when read.
    shards: Vec<Mutex<Stats>>,
    first_errors: Mutex<BTreeMap<String, String>>,
    pub in_flight: AtomicU64,
    pub sent: AtomicU64,
    last_answer: Mutex<Option<Instant>>,
}

impl Recorder {
    pub fn new(warmup: Duration) -> Self {
        let t0 = Instant::now();
        Self {
            t0,
            measure_from: t0 + warmup,
            shards: (0..SHARDS).map(|_| Mutex::new(Stats::default())).collect(),
            first_errors: Mutex::new(BTreeMap::new()),
            in_flight: AtomicU64::new(0),
            sent: AtomicU64::new(0),
            last_answer: Mutex::new(None),
        }
    }

    fn answered(
        &self,
        n: u64,
        intended: Instant,
        started: Instant,
        result: Result<Outcome, Failure>,
    ) {
        let done = Instant::now();
        let mut stats = self.shards[n as usize % SHARDS].lock().unwrap();
        if intended < self.measure_from {
            match result {
                Ok(_) => stats.warmup_ok += 1,
                Err(_) => stats.warmup_errors += 1,
            }
            return;
        }
        let at = done - self.measure_from;
        match result {
            Ok(outcome) => {
                stats.ok(at, done - intended);
                let queued = started - intended;
                for (name, after) in outcome.marks {
                    stats.extra(name, queued + after);
                }
                for (name, span) in outcome.spans {
                    stats.extra(name, span);
                }
            }
            Err(f) => {
                stats.error(at, &f.kind);
                drop(stats);
                self.first_errors
                    .lock()
                    .unwrap()
                    .entry(f.kind)
                    .or_insert(f.detail);
            }
        }
        let mut last = self.last_answer.lock().unwrap();
        *last = Some(last.map_or(done, |l| l.max(done)));
    }

    /// A copy of what was recorded so far (for the progress line).
    pub fn snapshot(&self) -> Stats {
        let mut all = Stats::default();
        for shard in &self.shards {
            all.merge(&shard.lock().unwrap());
        }
        all
    }

    /// The stats, the first message of each error kind and the measured window (from the end
    /// of the warm-up to the last answer; every request sent is answered or failed by then).
    pub fn finish(&self) -> (Stats, BTreeMap<String, String>, Duration) {
        let last = self
            .last_answer
            .lock()
            .unwrap()
            .unwrap_or(self.measure_from);
        (
            self.snapshot(),
            std::mem::take(&mut *self.first_errors.lock().unwrap()),
            last.saturating_duration_since(self.measure_from),
        )
    }
}

/// Runs `op` under `plan`, recording into `rec` (created just before, its clock starts the run).
pub async fn run(plan: &Plan, rec: Arc<Recorder>, op: Operation) {
    let end = plan.duration.map(|d| rec.measure_from + d);
    match &plan.load {
        Load::Closed { concurrency } => closed(plan, *concurrency, end, rec, op).await,
        Load::Open {
            rate,
            max_in_flight,
        } => open(plan, rate, *max_in_flight, end, rec, op).await,
    }
}

async fn closed(
    plan: &Plan,
    concurrency: usize,
    end: Option<Instant>,
    rec: Arc<Recorder>,
    op: Operation,
) {
    let measured = Arc::new(AtomicU64::new(0));
    let limit = plan.requests;
    let workers = (0..concurrency.max(1)).map(|_| {
        let (rec, op, measured) = (rec.clone(), op.clone(), measured.clone());
        tokio::spawn(async move {
            loop {
                let now = Instant::now();
                if end.is_some_and(|e| now >= e) {
                    break;
                }
                if now >= rec.measure_from
                    && limit.is_some_and(|l| measured.fetch_add(1, Ordering::Relaxed) >= l)
                {
                    break;
                }
                let n = rec.sent.fetch_add(1, Ordering::Relaxed);
                rec.in_flight.fetch_add(1, Ordering::Relaxed);
                let result = op(n).await;
                rec.in_flight.fetch_sub(1, Ordering::Relaxed);
                // Closed loop: the request goes out when the worker is free, so intended = sent.
                rec.answered(n, now, now, result);
            }
        })
    });
    for w in futures::future::join_all(workers).await {
        w.expect("a load worker panicked");
    }
}

async fn open(
    plan: &Plan,
    rate: &RateSpec,
    max_in_flight: usize,
    end: Option<Instant>,
    rec: Arc<Recorder>,
    op: Operation,
) {
    let max_in_flight = max_in_flight.max(1);
    let slots = Arc::new(tokio::sync::Semaphore::new(max_in_flight));
    let warmup = rec.measure_from - rec.t0;
    // The warm-up runs at the schedule's starting rate, the measured window on the schedule.
    let warm_n = (rate.start() * warmup.as_secs_f64()).floor() as u64;
    let due = |n: u64| {
        if n < warm_n {
            Duration::from_secs_f64(n as f64 / rate.start())
        } else {
            warmup + rate.due(n - warm_n)
        }
    };
    for n in 0u64.. {
        if plan.requests.is_some_and(|l| n >= warm_n + l) {
            break;
        }
        let intended = rec.t0 + due(n);
        if end.is_some_and(|e| intended >= e) {
            break;
        }
        tokio::time::sleep_until(intended.into()).await;
        // Waiting for a free slot delays this request's sending, not its intended time.
        let slot = slots.clone().acquire_owned().await.expect("never closed");
        let (rec, op) = (rec.clone(), op.clone());
        rec.sent.fetch_add(1, Ordering::Relaxed);
        rec.in_flight.fetch_add(1, Ordering::Relaxed);
        tokio::spawn(async move {
            let started = Instant::now();
            let result = op(n).await;
            rec.in_flight.fetch_sub(1, Ordering::Relaxed);
            rec.answered(n, intended, started, result);
            drop(slot);
        });
    }
    // Every request sent has its answer once all slots are free again.
    let _all = slots
        .acquire_many(max_in_flight as u32)
        .await
        .expect("never closed");
}

#[cfg(test)]
mod tests {
    use futures::FutureExt;

    use super::*;

    fn sleeping(d: Duration) -> Operation {
        Arc::new(move |_| {
            async move {
                tokio::time::sleep(d).await;
                Ok(Outcome {
                    spans: Vec::new(),
                    marks: vec![("half", d / 2)],
                })
            }
            .boxed()
        })
    }

    fn ms(h: u64) -> f64 {
        h as f64 / 1000.0
    }

    #[tokio::test]
    async fn open_loop_latency_counts_from_the_intended_send_time() {
        // 100/s for 0.2 s = 20 requests due 10 ms apart, but a target that takes 20 ms and
        // serves one at a time: the queue grows, and so must the latencies. The last request
        // is due at 190 ms and answered at about 20 × 20 = 400 ms: about 210 ms late.
        let plan = Plan {
            load: Load::Open {
                rate: RateSpec::fixed(100.0),
                max_in_flight: 1,
            },
            warmup: Duration::ZERO,
            duration: Some(Duration::from_millis(200)),
            requests: None,
        };
        let rec = Arc::new(Recorder::new(plan.warmup));
        run(&plan, rec.clone(), sleeping(Duration::from_millis(20))).await;
        let (stats, _, window) = rec.finish();
        let h = stats.latency();
        assert_eq!(h.len(), 20);
        assert!(ms(h.min()) >= 19.0, "min {}", ms(h.min()));
        assert!(
            ms(h.max()) >= 180.0,
            "max {} ms: latency from the actual send would be 20 ms",
            ms(h.max())
        );
        // The secondary mark counts from the intended time too.
        assert!(ms(stats.extra["half"].max()) >= 170.0);
        assert!(window >= Duration::from_millis(380), "{window:?}");
    }

    #[tokio::test]
    async fn open_loop_keeps_its_rate_when_the_target_keeps_up() {
        let plan = Plan {
            load: Load::Open {
                rate: RateSpec::fixed(200.0),
                max_in_flight: 100,
            },
            warmup: Duration::from_millis(100),
            duration: Some(Duration::from_millis(300)),
            requests: None,
        };
        let rec = Arc::new(Recorder::new(plan.warmup));
        run(&plan, rec.clone(), sleeping(Duration::from_millis(5))).await;
        let (stats, _, _) = rec.finish();
        assert_eq!(stats.warmup_ok, 20);
        assert_eq!(stats.ok_count(), 60);
        assert!(ms(stats.latency().value_at_quantile(0.5)) < 50.0);
    }

    #[tokio::test]
    async fn closed_loop_stops_at_the_request_count_and_counts_errors() {
        let plan = Plan {
            load: Load::Closed { concurrency: 4 },
            warmup: Duration::ZERO,
            duration: None,
            requests: Some(50),
        };
        let rec = Arc::new(Recorder::new(plan.warmup));
        let op: Operation = Arc::new(|n| {
            async move {
                if n % 10 == 0 {
                    Err(Failure::new("check:state", format!("request {n}")))
                } else {
                    Ok(Outcome::default())
                }
            }
            .boxed()
        });
        run(&plan, rec.clone(), op).await;
        let (stats, first, _) = rec.finish();
        assert_eq!(stats.ok_count() + stats.error_count(), 50);
        assert_eq!(stats.errors["check:state"], 5);
        assert_eq!(first["check:state"], "request 0");
    }
}
