//! The steady load of every scenario: clients on all three bindings, through the balancer, each
//! running a cycle of blocking sends, streaming sends, subscriptions (on another binding, so
//! usually another replica), follow-ups of INPUT_REQUIRED tasks and cancels. Every send carries
//! an `Idempotency-Key` and is retried with it on a retryable error; a stream that breaks is
//! resumed with SubscribeToTask after the last event seen (`Last-Event-ID`, gRPC metadata
//! `a2a-last-event-id`). What each client saw goes into the [`Ledger`] the accounting reads.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use a2a_client::{A2aClient, Binding, BindingKind, ClientError, EventStream};
use a2a_testing::receiver::describe;
use a2a_types::v1::{CancelTaskRequest, SendMessageRequest, SubscribeToTaskRequest};
use futures::StreamExt;
use serde_json::{Value, json};

/// How long one operation keeps retrying before it counts as failed.
const RETRY_BUDGET: Duration = Duration::from_secs(60);
/// A stream that shows nothing for this long is treated as broken and resumed.
const STREAM_STALL: Duration = Duration::from_secs(20);
/// The tenant of every task: the upstream agent, so a dead replica's turns can be taken over.
const TENANT: &str = "up";

/// A task a client was told about (an acknowledged send).
#[derive(Debug, Clone)]
pub struct Acked {
    pub id: String,
    pub push: bool,
    /// The state the client's last answer about the task gave.
    pub answered: String,
}

/// One stream a client followed to its end (across resumes): `(seq, description)` per event.
#[derive(Debug, Clone, Default)]
pub struct Followed {
    pub task_id: String,
    pub events: Vec<(u64, String)>,
    pub duplicates: u64,
    pub resumes: u64,
    pub ended_terminal: bool,
}

#[derive(Debug, Default)]
pub struct LedgerInner {
    pub operations: u64,
    pub retries: u64,
    pub errors: BTreeMap<String, u64>,
    /// Operations that ended in an error that is not retryable, or gave up: wrong answers.
    pub failures: Vec<String>,
    /// Idempotency key → every task id answered for it.
    pub keys: BTreeMap<String, BTreeSet<String>>,
    pub acked: Vec<Acked>,
    pub followed: Vec<Followed>,
}

#[derive(Default)]
pub struct Ledger(Mutex<LedgerInner>);

impl Ledger {
    fn with<T>(&self, f: impl FnOnce(&mut LedgerInner) -> T) -> T {
        f(&mut self.0.lock().unwrap_or_else(|e| e.into_inner()))
    }

    fn error(&self, kind: &str) {
        self.with(|l| *l.errors.entry(kind.to_owned()).or_default() += 1);
    }

    fn fail(&self, what: String) {
        self.with(|l| l.failures.push(what));
    }

    pub fn take(&self) -> LedgerInner {
        self.with(std::mem::take)
    }
}

/// What to do about an error: retry it (with its kind for the table) or stop (a wrong answer).
enum Verdict {
    Retry(&'static str),
    Final(&'static str),
}

fn classify(e: &ClientError) -> Verdict {
    match e {
        ClientError::A2a(a) if a.is_retryable() => Verdict::Retry("unavailable"),
        // What tonic reports, as INTERNAL, for a response the balancer cut or answered itself:
        // a stream ended without its trailers (the replica died), or haproxy's own 503 page
        // where a gRPC message was expected (no replica ready, e.g. while PostgreSQL is down).
        // The server never said INTERNAL: these are transport failures.
        ClientError::A2a(a2a_types::A2aError::Internal(m))
            if m.contains("missing grpc-status trailer")
                || m.contains("503 Service Unavailable") =>
        {
            Verdict::Retry("balancer")
        }
        ClientError::A2a(_) => Verdict::Final("a2a-error"),
        ClientError::Transport { .. } => Verdict::Retry("transport"),
        // The balancer's own refusals (no replica up for a moment, a replica gone mid-request):
        // 502/503/504 over HTTP, UNAVAILABLE over gRPC.
        ClientError::Unclassified { status, .. }
            if ["502", "503", "504", "UNAVAILABLE"]
                .iter()
                .any(|c| status.contains(c)) =>
        {
            Verdict::Retry("balancer")
        }
        // A gRPC stream reset by the balancer when the replica behind it died (h2 RST_STREAM).
        ClientError::Unclassified { status, message }
            if status.contains("gRPC") && (message.contains("h2") || message.contains("reset")) =>
        {
            Verdict::Retry("reset")
        }
        ClientError::Unclassified { .. } => Verdict::Final("unclassified"),
        ClientError::Decode { .. } => Verdict::Final("decode"),
        ClientError::Config(_) => Verdict::Final("config"),
    }
}

pub fn state_of(v: &Value) -> &str {
    v["task"]["status"]["state"]
        .as_str()
        .or(v["statusUpdate"]["status"]["state"].as_str())
        .or(v["status"]["state"].as_str())
        .unwrap_or_default()
}

pub fn is_terminal(state: &str) -> bool {
    matches!(
        state,
        "TASK_STATE_COMPLETED"
            | "TASK_STATE_FAILED"
            | "TASK_STATE_CANCELED"
            | "TASK_STATE_REJECTED"
    )
}

fn json_of<T: serde::Serialize>(v: &T) -> Value {
    serde_json::to_value(v).expect("ProtoJSON serializes")
}

/// A send of a `scenario` script to the upstream agent.
pub fn send(script: Value, push: Option<&str>, return_immediately: bool) -> SendMessageRequest {
    let mut configuration = json!({"returnImmediately": return_immediately});
    if let Some(url) = push {
        configuration["taskPushNotificationConfig"] = json!({"url": url, "token": "sys"});
    }
    serde_json::from_value(json!({
        "tenant": TENANT,
        "message": {"messageId": uuid::Uuid::new_v4().to_string(), "role": "ROLE_USER",
                    "parts": [{"data": script}]},
        "configuration": configuration,
    }))
    .expect("a valid SendMessageRequest")
}

/// One operation of a client's cycle.
#[derive(Clone, Copy, Debug)]
pub enum Op {
    Blocking {
        push: bool,
    },
    Stream,
    Subscribe {
        push: bool,
    },
    FollowUp,
    Cancel,
    /// A blocking send with a push config whose answer is two artifact chunks of 1 MiB each.
    Big,
}

/// The steady mix every scenario runs.
pub const CYCLE: [Op; 7] = [
    Op::Blocking { push: false },
    Op::Stream,
    Op::Subscribe { push: true },
    Op::FollowUp,
    Op::Cancel,
    Op::Blocking { push: true },
    Op::Subscribe { push: false },
];

/// A send loop with push configs: every operation's task has one (short turns, so many commits
/// and publishes per second).
pub const PUSH_CYCLE: [Op; 3] = [
    Op::Blocking { push: true },
    Op::Subscribe { push: true },
    Op::Blocking { push: true },
];

/// Sends whose answers are large (1 MiB chunks), with push configs.
pub const BIG_CYCLE: [Op; 1] = [Op::Big];

/// Bytes of each large chunk ([`Op::Big`]).
pub const BIG_BYTES: u64 = 1024 * 1024;

struct Client {
    kind: BindingKind,
    a2a: A2aClient,
    /// Clients of the other two bindings: subscriptions go through them.
    others: Vec<(BindingKind, A2aClient)>,
    ledger: Arc<Ledger>,
    hook: String,
    n: usize,
}

pub fn client_for(kind: BindingKind, lb: &str) -> A2aClient {
    let binding = match kind {
        BindingKind::JsonRpc => Binding::JsonRpc {
            url: format!("{lb}/a2a/jsonrpc"),
        },
        BindingKind::HttpJson => Binding::Rest {
            url: format!("{lb}/a2a/rest"),
        },
        BindingKind::Grpc => Binding::Grpc {
            endpoint: lb.to_owned(),
        },
    };
    A2aClient::new(binding)
        .expect("a client")
        .with_timeout(Duration::from_secs(30))
}

/// The running load: stop it with [`Load::stop`], which waits for every operation in flight to
/// finish (acknowledged, or failed after its retries).
pub struct Load {
    stop: Arc<AtomicBool>,
    handles: Vec<tokio::task::JoinHandle<()>>,
    pub ledger: Arc<Ledger>,
}

impl Load {
    /// `per_binding` clients on each binding against the balancer at `lb`; push configs point
    /// at `hook` (the receiver's URL prefix).
    pub fn start(lb: &str, hook: &str, per_binding: usize) -> Self {
        Self::start_mix(lb, hook, &[(&CYCLE, per_binding)])
    }

    /// Clients for each `(cycle, per_binding)` of `mix`, all in one ledger.
    pub fn start_mix(lb: &str, hook: &str, mix: &[(&'static [Op], usize)]) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let ledger = Arc::new(Ledger::default());
        let mut handles = Vec::new();
        let clients = mix.iter().flat_map(|(cycle, per_binding)| {
            BindingKind::ALL
                .into_iter()
                .cycle()
                .take(3 * per_binding)
                .map(move |kind| (*cycle, kind))
        });
        for (i, (cycle, kind)) in clients.enumerate() {
            let others = BindingKind::ALL
                .into_iter()
                .filter(|k| *k != kind)
                .map(|k| (k, client_for(k, lb)))
                .collect();
            let client = Client {
                kind,
                a2a: client_for(kind, lb),
                others,
                ledger: ledger.clone(),
                hook: hook.to_owned(),
                n: i,
            };
            let stop = stop.clone();
            handles.push(tokio::spawn(async move {
                let mut step = i;
                while !stop.load(Ordering::Relaxed) {
                    let failed = client.ledger.with(|l| l.failures.len());
                    client.run(cycle[step % cycle.len()], step).await;
                    step += 1;
                    // A failed operation is reported once; do not spin on the same failure.
                    if client.ledger.with(|l| l.failures.len()) > failed {
                        tokio::time::sleep(Duration::from_secs(1)).await;
                    }
                }
            }));
        }
        Self {
            stop,
            handles,
            ledger,
        }
    }

    /// Stops starting operations and waits for those in flight; what the clients saw.
    pub async fn stop(self) -> LedgerInner {
        self.stop.store(true, Ordering::Relaxed);
        for h in self.handles {
            h.await.expect("a load client panicked");
        }
        self.ledger.take()
    }
}

impl Client {
    async fn run(&self, op: Op, step: usize) {
        self.ledger.with(|l| l.operations += 1);
        let name = format!("{}#{}.{step}", self.kind, self.n);
        match op {
            Op::Blocking { push } => self.blocking(&name, push).await,
            Op::Stream => self.stream(&name).await,
            Op::Subscribe { push } => self.subscribe(&name, push, step).await,
            Op::FollowUp => self.follow_up(&name).await,
            Op::Cancel => self.cancel(&name).await,
            Op::Big => self.big(&name).await,
        }
    }

    fn hook_url(&self, push: bool, key: &str) -> Option<String> {
        push.then(|| format!("{}/hook/{key}", self.hook))
    }

    /// Runs `call` until it succeeds, retrying retryable errors for [`RETRY_BUDGET`]; `None`
    /// (recorded as a failure) when it gives up or the error is not retryable.
    async fn retry<T, F, Fut>(&self, what: &str, mut call: F) -> Option<T>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<T, ClientError>>,
    {
        let deadline = Instant::now() + RETRY_BUDGET;
        let mut pause = Duration::from_millis(100);
        loop {
            match call().await {
                Ok(v) => return Some(v),
                Err(e) => match classify(&e) {
                    Verdict::Retry(kind) => {
                        self.ledger.error(kind);
                        if Instant::now() > deadline {
                            self.ledger
                                .fail(format!("{what}: still failing after {RETRY_BUDGET:?}: {e}"));
                            return None;
                        }
                        self.ledger.with(|l| l.retries += 1);
                        tokio::time::sleep(pause).await;
                        pause = (pause * 2).min(Duration::from_secs(1));
                    }
                    Verdict::Final(kind) => {
                        self.ledger.error(kind);
                        self.ledger.fail(format!("{what}: {e}"));
                        return None;
                    }
                },
            }
        }
    }

    /// A send with an `Idempotency-Key`, retried; the answer as ProtoJSON.
    async fn send_keyed(&self, what: &str, req: SendMessageRequest, key: &str) -> Option<Value> {
        let client = self
            .a2a
            .clone()
            .with_header("idempotency-key", key)
            .expect("a valid header");
        let answer = self
            .retry(what, || client.send_message(req.clone()))
            .await?;
        let v = json_of(&answer);
        let Some(id) = v["task"]["id"].as_str() else {
            self.ledger
                .fail(format!("{what}: answered without a task: {v}"));
            return None;
        };
        self.ledger.with(|l| {
            l.keys
                .entry(key.to_owned())
                .or_default()
                .insert(id.to_owned())
        });
        Some(v["task"].clone())
    }

    fn ack(&self, task: &Value, push: bool) {
        let acked = Acked {
            id: task["id"].as_str().unwrap_or_default().to_owned(),
            push,
            answered: state_of(&json!({ "task": task })).to_owned(),
        };
        self.ledger.with(|l| l.acked.push(acked));
    }

    async fn blocking(&self, what: &str, push: bool) {
        let key = uuid::Uuid::new_v4().to_string();
        let req = send(
            json!({"chunks": 3, "delayMs": 40}),
            self.hook_url(push, &key).as_deref(),
            false,
        );
        let Some(task) = self.send_keyed(what, req, &key).await else {
            return;
        };
        let state = state_of(&json!({ "task": task })).to_owned();
        if !is_terminal(&state) {
            self.ledger
                .fail(format!("{what}: a blocking send answered {state}"));
        }
        self.ack(&task, push);
    }

    async fn big(&self, what: &str) {
        let key = uuid::Uuid::new_v4().to_string();
        let req = send(
            json!({"chunks": 2, "padBytes": BIG_BYTES}),
            self.hook_url(true, &key).as_deref(),
            false,
        );
        let Some(task) = self.send_keyed(what, req, &key).await else {
            return;
        };
        let state = state_of(&json!({ "task": task })).to_owned();
        if !is_terminal(&state) {
            self.ledger
                .fail(format!("{what}: a blocking send answered {state}"));
        }
        self.ack(&task, true);
    }

    async fn stream(&self, what: &str) {
        let key = uuid::Uuid::new_v4().to_string();
        let req = send(json!({"chunks": 15, "delayMs": 100}), None, false);
        let client = self
            .a2a
            .clone()
            .with_header("idempotency-key", key.as_str())
            .expect("a valid header");
        let mut rec = Followed::default();
        let mut attempt = 0;
        // Until the first event names the task: a retry of the send (same key) replays it.
        let (task, stream) = loop {
            attempt += 1;
            let Some(mut stream) = self
                .retry(what, || client.send_streaming_message(req.clone()))
                .await
            else {
                return;
            };
            match tokio::time::timeout(STREAM_STALL, stream.next()).await {
                Ok(Some(Ok(first))) => {
                    let v = json_of(&first.response);
                    if v["task"]["id"].as_str().is_none() {
                        self.ledger
                            .fail(format!("{what}: the stream began without the task: {v}"));
                        return;
                    }
                    if attempt == 1 {
                        let seq = first
                            .id
                            .as_deref()
                            .and_then(|s| s.parse().ok())
                            .unwrap_or(1);
                        rec.events.push((seq, describe(&v)));
                        break (v["task"].clone(), Some(stream));
                    }
                    // A replayed stream begins with the task as it is now, whose sequence
                    // number gRPC does not carry: follow it from the start instead.
                    break (v["task"].clone(), None);
                }
                Ok(Some(Err(e))) => {
                    if let Verdict::Final(kind) = classify(&e) {
                        self.ledger.error(kind);
                        self.ledger.fail(format!("{what}: {e}"));
                        return;
                    }
                    self.ledger.error("stream-error");
                }
                Ok(None) => self.ledger.error("stream-cut"),
                Err(_) => self.ledger.error("stream-stall"),
            }
            self.ledger.with(|l| l.retries += 1);
            tokio::time::sleep(Duration::from_millis(200)).await;
        };
        let id = task["id"].as_str().unwrap_or_default().to_owned();
        self.ledger
            .with(|l| l.keys.entry(key).or_default().insert(id.clone()));
        rec.task_id = id;
        self.follow(what, &self.a2a, self.kind, stream, &mut rec)
            .await;
        self.ack(
            &json!({"id": rec.task_id, "status": {"state": rec_state(&rec)}}),
            false,
        );
        self.ledger.with(|l| l.followed.push(rec));
    }

    async fn subscribe(&self, what: &str, push: bool, step: usize) {
        let key = uuid::Uuid::new_v4().to_string();
        let req = send(
            json!({"chunks": 15, "delayMs": 100}),
            self.hook_url(push, &key).as_deref(),
            true,
        );
        let Some(task) = self.send_keyed(what, req, &key).await else {
            return;
        };
        self.ack(&task, push);
        let (kind, other) = &self.others[step % self.others.len()];
        let mut rec = Followed {
            task_id: task["id"].as_str().unwrap_or_default().to_owned(),
            ..Followed::default()
        };
        self.follow(what, other, *kind, None, &mut rec).await;
        self.ledger.with(|l| l.followed.push(rec));
    }

    async fn follow_up(&self, what: &str) {
        let key = uuid::Uuid::new_v4().to_string();
        let req = send(json!({"end": "input-required"}), None, false);
        let Some(task) = self.send_keyed(what, req, &key).await else {
            return;
        };
        self.ack(&task, false);
        let state = state_of(&json!({ "task": task })).to_owned();
        if state != "TASK_STATE_INPUT_REQUIRED" {
            // A turn that failed over may end FAILED (outcome unknown); never anything else.
            if state != "TASK_STATE_FAILED" {
                self.ledger
                    .fail(format!("{what}: input-required turn answered {state}"));
            }
            return;
        }
        let id = task["id"].as_str().unwrap_or_default().to_owned();
        let mut next: SendMessageRequest = serde_json::from_value(json!({
            "tenant": TENANT,
            "message": {"messageId": uuid::Uuid::new_v4().to_string(), "role": "ROLE_USER",
                        "taskId": id, "parts": [{"text": "the missing input"}]},
        }))
        .expect("a valid follow-up");
        next.configuration = None;
        let key2 = format!("{key}.2");
        let Some(done) = self.send_keyed(what, next, &key2).await else {
            return;
        };
        let state = state_of(&json!({ "task": done })).to_owned();
        if !is_terminal(&state) {
            self.ledger
                .fail(format!("{what}: the follow-up answered {state}"));
        }
        self.ack(&done, false);
    }

    async fn cancel(&self, what: &str) {
        let key = uuid::Uuid::new_v4().to_string();
        let req = send(json!({"end": "hang"}), None, true);
        let Some(task) = self.send_keyed(what, req, &key).await else {
            return;
        };
        let id = task["id"].as_str().unwrap_or_default().to_owned();
        tokio::time::sleep(Duration::from_millis(300)).await;
        let cancel = CancelTaskRequest {
            tenant: TENANT.into(),
            id: id.clone(),
            ..Default::default()
        };
        let deadline = Instant::now() + RETRY_BUDGET;
        loop {
            match self.a2a.cancel_task(cancel.clone()).await {
                Ok(t) => {
                    let v = json_of(&t);
                    let state = state_of(&json!({ "task": v })).to_owned();
                    if state != "TASK_STATE_CANCELED" {
                        self.ledger
                            .fail(format!("{what}: CancelTask answered {state}"));
                    }
                    self.ack(&v, false);
                    return;
                }
                // An earlier attempt whose answer was lost did cancel it (or a takeover ended
                // the turn first): the task is terminal either way.
                Err(ClientError::A2a(a2a_types::A2aError::TaskNotCancelable { state, .. })) => {
                    self.ledger.error("not-cancelable");
                    self.ack(
                        &json!({"id": id, "status": {"state": state.as_str_name()}}),
                        false,
                    );
                    return;
                }
                Err(e) => match classify(&e) {
                    Verdict::Retry(kind) if Instant::now() < deadline => {
                        self.ledger.error(kind);
                        self.ledger.with(|l| l.retries += 1);
                        tokio::time::sleep(Duration::from_millis(200)).await;
                    }
                    Verdict::Retry(kind) | Verdict::Final(kind) => {
                        self.ledger.error(kind);
                        self.ledger.fail(format!("{what}: CancelTask {id}: {e}"));
                        return;
                    }
                },
            }
        }
    }

    /// Follows task `rec.task_id` to a terminal state: `stream` first (if any), then
    /// SubscribeToTask resumed after the last event seen, on `client`, until the end.
    async fn follow(
        &self,
        what: &str,
        client: &A2aClient,
        kind: BindingKind,
        mut stream: Option<EventStream>,
        rec: &mut Followed,
    ) {
        let deadline = Instant::now() + RETRY_BUDGET;
        let mut last = rec.events.last().map_or(0, |e| e.0);
        loop {
            if let Some(mut s) = stream.take() {
                loop {
                    match tokio::time::timeout(STREAM_STALL, s.next()).await {
                        Ok(Some(Ok(ev))) => {
                            // gRPC messages carry no id: message k of a resumed stream is
                            // the k-th event after the resume point.
                            let seq = ev
                                .id
                                .as_deref()
                                .and_then(|s| s.parse().ok())
                                .unwrap_or(last + 1);
                            let v = json_of(&ev.response);
                            if seq <= last {
                                rec.duplicates += 1;
                            } else {
                                rec.events.push((seq, describe(&v)));
                                last = seq;
                            }
                            if is_terminal(state_of(&v)) {
                                rec.ended_terminal = true;
                                return;
                            }
                        }
                        Ok(Some(Err(e))) => {
                            if let Verdict::Final(k) = classify(&e) {
                                self.ledger.error(k);
                                self.ledger
                                    .fail(format!("{what}: stream of {}: {e}", rec.task_id));
                                return;
                            }
                            self.ledger.error("stream-error");
                            break;
                        }
                        Ok(None) => {
                            self.ledger.error("stream-cut");
                            break;
                        }
                        Err(_) => {
                            self.ledger.error("stream-stall");
                            break;
                        }
                    }
                }
                rec.resumes += 1;
                self.ledger.with(|l| l.retries += 1);
            }
            if Instant::now() > deadline {
                self.ledger.fail(format!(
                    "{what}: task {} not followed to its end in {RETRY_BUDGET:?}",
                    rec.task_id
                ));
                return;
            }
            let header = if kind == BindingKind::Grpc {
                "a2a-last-event-id"
            } else {
                "last-event-id"
            };
            let resuming = client
                .clone()
                .with_header(header, &last.to_string())
                .expect("a valid header");
            let req = SubscribeToTaskRequest {
                tenant: TENANT.into(),
                id: rec.task_id.clone(),
            };
            stream = Some(
                match self
                    .retry(what, || resuming.subscribe_to_task(req.clone()))
                    .await
                {
                    Some(s) => s,
                    None => return,
                },
            );
        }
    }
}

fn rec_state(rec: &Followed) -> &'static str {
    if rec.ended_terminal {
        "TASK_STATE_COMPLETED"
    } else {
        "TASK_STATE_UNSPECIFIED"
    }
}
