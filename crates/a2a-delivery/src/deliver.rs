//! Delivering one event to one webhook until it is delivered or becomes a dead letter: the
//! retry loop around [`Webhooks::attempt`], the delivery log and the dead letters.

use a2a_process::telemetry::{self, KeyValue, SpanKind, TraceSpan};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use a2a_store::pg::{AttemptRecord, NewDeadLetter};
use a2a_types::Dialect;
use a2a_types::v1::{StreamResponse, TaskPushNotificationConfig};
use bytes::Bytes;
use tokio::sync::mpsc;

use crate::DeliveryStore;
use crate::gates::{Gates, destination};
use crate::metrics;
use crate::retry::RetryPolicy;
use crate::webhook::{Attempt, Webhooks};

/// How an event ended up at one webhook.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Delivered { attempts: u32 },
    DeadLettered { attempts: u32, error: String },
}

/// One event for one webhook.
pub struct Delivery<'a> {
    pub task_id: &'a str,
    /// The task's owner: whose share of the delivery slots the attempts take.
    pub owner: &'a str,
    pub seq: u64,
    pub event: &'a StreamResponse,
    /// The event's ProtoJSON, shared by every webhook of the task.
    pub body: &'a Bytes,
    pub config: &'a TaskPushNotificationConfig,
    /// The dialect `body` is in (the webhook's), kept with a dead letter for its replay.
    pub dialect: Dialect,
    /// When the event entered the stream (Unix ms), for the event-to-delivery latency.
    pub published_ms: Option<u64>,
    /// The W3C `traceparent` the event was published under: each attempt's span is its child,
    /// and the webhook receives the trace.
    pub trace: Option<&'a str>,
}

/// What every delivery needs. One per worker process (or embedded gateway).
pub struct Deliverer {
    pub store: Arc<dyn DeliveryStore>,
    pub webhooks: Webhooks,
    pub retry: RetryPolicy,
    pub log: LogSink,
    /// The slots attempts take (per destination, per owner, per process).
    pub gates: Arc<Gates>,
    /// Dead letters kept per owner (0 = no cap).
    pub dead_letters_per_owner: u64,
}

impl Deliverer {
    /// Attempts until delivered, refused or out of attempts; a delivery that gives up is
    /// recorded as a dead letter before this returns (retrying while PostgreSQL is down), so the
    /// caller may acknowledge the event afterwards.
    pub async fn deliver(&self, d: &Delivery<'_>) -> Outcome {
        let mut attempt = 0;
        let destination = destination(&d.config.url);
        loop {
            attempt += 1;
            // The slots are held for the attempt only, never for the wait before a retry.
            let pass = self.gates.enter(&destination, d.owner).await;
            let started = Instant::now();
            let span = attempt_span(d, attempt);
            // Without traces of our own, the webhook still gets the trace the event came with.
            let traceparent = span.traceparent().or_else(|| d.trace.map(str::to_owned));
            let result = span
                .in_span(
                    self.webhooks
                        .attempt(d.task_id, d.body, d.config, traceparent.as_deref()),
                )
                .await;
            let latency = started.elapsed();
            drop(pass);
            if span.is_traced() {
                record_attempt(&span, &result);
                span.end();
            }
            let record =
                |outcome: &'static str, status: Option<u16>, error: Option<String>| AttemptRecord {
                    task_id: d.task_id.to_owned(),
                    seq: d.seq,
                    config_id: d.config.id.clone(),
                    attempt,
                    outcome,
                    status,
                    error,
                    latency,
                };
            let (status, error, retry_after) = match result {
                Attempt::Delivered { status } => {
                    metrics::attempt("delivered", latency);
                    metrics::delivered(d.published_ms.map(since_unix_ms));
                    self.log.send(record("delivered", Some(status), None)).await;
                    return Outcome::Delivered { attempts: attempt };
                }
                Attempt::Retry {
                    status,
                    error,
                    retry_after,
                } if attempt < self.retry.max_attempts => (status, error, retry_after),
                Attempt::Retry { status, error, .. } | Attempt::Refused { status, error } => {
                    metrics::attempt("failed", latency);
                    self.log
                        .send(record("dead_lettered", status, Some(error.clone())))
                        .await;
                    self.dead_letter(d, attempt, &error).await;
                    return Outcome::DeadLettered {
                        attempts: attempt,
                        error,
                    };
                }
            };
            metrics::attempt("retry", latency);
            let delay = self.retry.delay(attempt, retry_after);
            tracing::debug!(task_id = d.task_id, seq = d.seq, config_id = %d.config.id,
                attempt, %error, ?delay, "push delivery failed; retrying");
            self.log.send(record("retry", status, Some(error))).await;
            tokio::time::sleep(delay).await;
        }
    }

    /// Records, without an attempt, that `d` cannot be delivered at all (its payload cannot be
    /// built: `reason`): a dead letter, so the task's later events go on.
    pub async fn poison(&self, d: &Delivery<'_>, reason: &str) -> Outcome {
        self.log
            .send(AttemptRecord {
                task_id: d.task_id.to_owned(),
                seq: d.seq,
                config_id: d.config.id.clone(),
                attempt: 0,
                outcome: "dead_lettered",
                status: None,
                error: Some(reason.to_owned()),
                latency: Duration::ZERO,
            })
            .await;
        self.dead_letter(d, 0, reason).await;
        Outcome::DeadLettered {
            attempts: 0,
            error: reason.to_owned(),
        }
    }

    async fn dead_letter(&self, d: &Delivery<'_>, attempts: u32, error: &str) {
        tracing::warn!(task_id = d.task_id, seq = d.seq, config_id = %d.config.id, attempts,
            error, "push delivery gave up: dead letter");
        metrics::dead_lettered();
        let letter = NewDeadLetter {
            task_id: d.task_id.to_owned(),
            seq: d.seq,
            config: d.config.clone(),
            event: d.event.clone(),
            dialect: d.dialect,
            attempts,
            last_error: error.to_owned(),
        };
        let mut wait = Duration::from_millis(200);
        let mut tries = 0;
        loop {
            match self
                .store
                .add_dead_letter(&letter, self.dead_letters_per_owner)
                .await
            {
                Ok(()) => return,
                // PostgreSQL down: wait for it, the entry stays unacknowledged meanwhile.
                Err(a2a_store::StoreError::Unavailable(e)) => {
                    tracing::warn!(error = %e, "cannot record a dead letter yet; retrying");
                }
                // Anything else will not get better by waiting: logged (above) and counted.
                Err(e) if tries >= 3 => {
                    tracing::error!(task_id = d.task_id, seq = d.seq, error = %e,
                        "cannot record a dead letter; giving up on it");
                    return;
                }
                Err(e) => tracing::warn!(error = %e, "cannot record a dead letter; retrying"),
            }
            tries += 1;
            tokio::time::sleep(wait).await;
            wait = (wait * 2).min(Duration::from_secs(5));
        }
    }
}

fn since_unix_ms(ms: u64) -> Duration {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(ms);
    Duration::from_millis(now.saturating_sub(ms))
}

/// The delivery log's writer: attempts queue here and go to the store in batches, off the
/// delivery path. The log is a record for operators, not what delivery decisions rest on, so a
/// batch that cannot be written after a few tries is dropped with a warning.
#[derive(Clone)]
pub struct LogSink {
    tx: mpsc::Sender<AttemptRecord>,
}

/// Attempts written per statement.
const LOG_BATCH: usize = 1000;

impl LogSink {
    /// Starts the writer; it stops when every sender is dropped.
    pub fn spawn(
        store: Arc<dyn DeliveryStore>,
        worker: String,
    ) -> (Self, tokio::task::JoinHandle<()>) {
        let (tx, mut rx) = mpsc::channel::<AttemptRecord>(LOG_BATCH * 8);
        let task = tokio::spawn(async move {
            let mut batch = Vec::with_capacity(LOG_BATCH);
            while rx.recv_many(&mut batch, LOG_BATCH).await > 0 {
                let mut tries = 0;
                while let Err(e) = store.log(&worker, &batch).await {
                    tries += 1;
                    if tries == 5 {
                        tracing::warn!(error = %e, dropped = batch.len(),
                            "cannot write the delivery log; dropping a batch");
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(200 * tries)).await;
                }
                batch.clear();
            }
        });
        (Self { tx }, task)
    }

    pub async fn send(&self, record: AttemptRecord) {
        let _ = self.tx.send(record).await;
        metrics::log_queue(self.tx.max_capacity() - self.tx.capacity());
    }
}

/// The span of one delivery attempt (disabled while traces are off, or when the event's trace
/// is not sampled): a CLIENT span, child of the span that published the event (the turn's), so
/// one trace runs from the client's request to the webhook.
fn attempt_span(d: &Delivery<'_>, attempt: u32) -> TraceSpan {
    if !telemetry::sample_continuation(d.trace) {
        return TraceSpan::NONE;
    }
    TraceSpan::start_from(
        d.trace,
        "push deliver",
        SpanKind::Client,
        vec![
            KeyValue::new("http.request.method", "POST"),
            KeyValue::new("a2a.task.id", d.task_id.to_owned()),
            KeyValue::new("a2a.seq", d.seq as i64),
            KeyValue::new("a2a.push.config_id", d.config.id.clone()),
            KeyValue::new("a2a.push.attempt", i64::from(attempt)),
        ],
    )
}

fn record_attempt(span: &TraceSpan, result: &Attempt) {
    let (status, failed) = match result {
        Attempt::Delivered { status } => (Some(*status), false),
        Attempt::Retry { status, .. } | Attempt::Refused { status, .. } => (*status, true),
    };
    if let Some(s) = status {
        span.set("http.response.status_code", i64::from(s));
    }
    if failed {
        let kind = match (result, status) {
            (Attempt::Refused { .. }, None) => "refused",
            (_, Some(_)) => "http_status",
            _ => "connection",
        };
        span.set("error.type", kind);
        span.set_error();
    }
}
