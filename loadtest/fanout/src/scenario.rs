//! The A2A scenarios: one operation each, checking every answer (state, ids, event order) and
//! classifying every failure by kind.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::{Duration, Instant};

use a2a_client::{A2aClient, ClientError};
use a2a_types::state::is_terminal;
use a2a_types::v1::{
    GetTaskRequest, Message, Part, Role, SendMessageConfiguration, SendMessageRequest,
    SubscribeToTaskRequest, Task, TaskPushNotificationConfig, TaskState, part,
    send_message_response, stream_response,
};
use futures::{FutureExt, StreamExt};

use crate::load::{Failure, Operation, Outcome};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, clap::ValueEnum)]
pub enum Kind {
    /// SendMessage, blocking: the answer is the finished task.
    Send,
    /// SendMessage with returnImmediately, then GetTask until the task is finished.
    SendAsync,
    /// SendStreamingMessage: time to the first event and to the last.
    Stream,
    /// A task per operation, followed by N SubscribeToTask streams (fan-out).
    Subscribe,
    /// SendMessage with an inline push config to the built-in webhook receiver, until the
    /// terminal state is delivered.
    Push,
    /// SendStreamingMessage, dropped after two events, resumed with SubscribeToTask and
    /// `Last-Event-ID`: the rest must follow with no gap (HTTP bindings: gRPC carries no ids).
    Resume,
    /// A weighted mix of the others (`--mix send=70,stream=20,send-async=10`).
    Mixed,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Self::Send => "send",
            Self::SendAsync => "send-async",
            Self::Stream => "stream",
            Self::Subscribe => "subscribe",
            Self::Push => "push",
            Self::Resume => "resume",
            Self::Mixed => "mixed",
        }
    }
}

/// `send=70,stream=20,send-async=10`: scenarios and their weights.
pub fn parse_mix(s: &str) -> anyhow::Result<Vec<(Kind, u64)>> {
    use clap::ValueEnum;
    let mix = s
        .split(',')
        .map(|item| {
            let (name, weight) = item
                .split_once('=')
                .ok_or_else(|| anyhow::anyhow!("{item:?}: SCENARIO=WEIGHT"))?;
            let kind = Kind::from_str(name.trim(), true).map_err(|e| anyhow::anyhow!("{e}"))?;
            anyhow::ensure!(kind != Kind::Mixed, "a mix cannot hold mixed");
            Ok((kind, weight.trim().parse::<u64>()?))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    anyhow::ensure!(
        mix.iter().map(|(_, w)| w).sum::<u64>() > 0,
        "--mix {s:?}: the weights add up to 0"
    );
    Ok(mix)
}

/// The scenario of request `n` in `mix`: spread by a multiplicative hash of `n`, so each
/// scenario gets its share in every stretch of requests, in no fixed pattern.
pub fn pick(mix: &[(Kind, u64)], n: u64) -> Kind {
    let total: u64 = mix.iter().map(|(_, w)| w).sum();
    let mut x = n.wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(29) % total;
    for (kind, w) in mix {
        if x < *w {
            return *kind;
        }
        x -= w;
    }
    unreachable!("x < total")
}

/// What every operation sends and expects.
#[derive(Debug, Clone)]
pub struct Options {
    pub text: String,
    /// A data part after the text (the `scenario` agent's script).
    pub data: Option<serde_json::Value>,
    /// The state a finished task must be in.
    pub expect: TaskState,
    pub poll: Duration,
    pub subscribers: usize,
    /// Tells message ids of this run apart from earlier runs' on the same target.
    pub run_id: String,
    /// Every send that creates a task carries an `Idempotency-Key` of its own.
    pub idempotency_key: bool,
    /// `push`: the receiver and the URL the target delivers to.
    pub webhook: Option<(crate::push::Webhook, String)>,
    /// `push`: how long to wait for the terminal delivery.
    pub push_timeout: Duration,
    /// `mixed`: the scenarios and their weights.
    pub mix: Vec<(Kind, u64)>,
}

pub fn error_kind(e: &ClientError) -> String {
    match e {
        ClientError::A2a(a) => a.codes().reason.to_owned(),
        ClientError::Unclassified { status, .. } => status.clone(),
        ClientError::Transport { .. } => "transport".into(),
        ClientError::Decode { .. } => "decode".into(),
        ClientError::Config(_) => "config".into(),
    }
}

fn client_failure(e: ClientError) -> Failure {
    Failure::new(error_kind(&e), e.to_string())
}

fn check(what: &str, detail: impl Into<String>) -> Failure {
    Failure::new(format!("check:{what}"), detail)
}

fn request(o: &Options, n: u64, return_immediately: bool) -> SendMessageRequest {
    let mut parts = vec![Part {
        content: Some(part::Content::Text(o.text.clone())),
        ..Default::default()
    }];
    if let Some(data) = &o.data {
        parts.push(Part {
            content: Some(part::Content::Data(data.clone().into())),
            ..Default::default()
        });
    }
    SendMessageRequest {
        message: Some(Message {
            message_id: format!("lt-{}-{n}", o.run_id),
            role: Role::User as i32,
            parts,
            ..Default::default()
        }),
        configuration: return_immediately.then(|| SendMessageConfiguration {
            return_immediately: true,
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The client that sends request `n`'s task-creating message: with `--idempotency-key`, a clone
/// carrying that request's own key (cloning shares the connections).
fn sender<'a>(c: &'a A2aClient, o: &Options, n: u64) -> Result<Cow<'a, A2aClient>, Failure> {
    if !o.idempotency_key {
        return Ok(Cow::Borrowed(c));
    }
    c.clone()
        .with_header("idempotency-key", &format!("lt-{}-{n}", o.run_id))
        .map(Cow::Owned)
        .map_err(client_failure)
}

fn state_of(task: &Task) -> TaskState {
    task.status
        .as_ref()
        .and_then(|s| TaskState::try_from(s.state).ok())
        .unwrap_or(TaskState::Unspecified)
}

/// A finished task must have ids and be in the expected state.
fn check_finished(task: &Task, expect: TaskState) -> Result<(), Failure> {
    if task.id.is_empty() || task.context_id.is_empty() {
        return Err(check(
            "ids",
            format!("a task without id or contextId: {task:?}"),
        ));
    }
    let state = state_of(task);
    if state != expect {
        return Err(check(
            "state",
            format!("task {} ended {state:?}, expected {expect:?}", task.id),
        ));
    }
    Ok(())
}

/// The scenario's operation over `clients` (round robin: one per connection). `subscribe`'s
/// followers use `followers` (clients of another replica: fan-out across replicas), or
/// `clients` when it is empty.
pub fn operation(
    kind: Kind,
    clients: Vec<A2aClient>,
    followers: Vec<A2aClient>,
    o: Options,
) -> Operation {
    let clients = Arc::new(clients);
    let followers = if followers.is_empty() {
        clients.clone()
    } else {
        Arc::new(followers)
    };
    let o = Arc::new(o);
    Arc::new(move |n| {
        let client = clients[n as usize % clients.len()].clone();
        let o = o.clone();
        let all = followers.clone();
        async move {
            if kind != Kind::Mixed {
                return one(kind, &client, &all, &o, n).await;
            }
            // Each scenario of the mix also gets its own latency, by name.
            let chosen = pick(&o.mix, n);
            let started = Instant::now();
            let mut outcome = one(chosen, &client, &all, &o, n).await?;
            outcome.marks = vec![(chosen.name(), started.elapsed())];
            Ok(outcome)
        }
        .boxed()
    })
}

async fn one(
    kind: Kind,
    client: &A2aClient,
    all: &[A2aClient],
    o: &Options,
    n: u64,
) -> Result<Outcome, Failure> {
    match kind {
        Kind::Send => send(client, o, n).await,
        Kind::SendAsync => send_async(client, o, n).await,
        Kind::Stream => stream(client, o, n).await,
        Kind::Subscribe => subscribe(client, all, o, n).await,
        Kind::Push => push(client, o, n).await,
        Kind::Resume => resume(client, o, n).await,
        Kind::Mixed => Err(check("answer", "a mix cannot hold mixed")),
    }
}

async fn send(c: &A2aClient, o: &Options, n: u64) -> Result<Outcome, Failure> {
    let resp = sender(c, o, n)?
        .send_message(request(o, n, false))
        .await
        .map_err(client_failure)?;
    match resp.payload {
        Some(send_message_response::Payload::Task(task)) => check_finished(&task, o.expect)?,
        // An agent may answer with a message and no task.
        Some(send_message_response::Payload::Message(m)) if m.role == Role::Agent as i32 => {}
        other => return Err(check("answer", format!("{other:?}"))),
    }
    Ok(Outcome::default())
}

async fn send_async(c: &A2aClient, o: &Options, n: u64) -> Result<Outcome, Failure> {
    let started = Instant::now();
    let resp = sender(c, o, n)?
        .send_message(request(o, n, true))
        .await
        .map_err(client_failure)?;
    let task = match resp.payload {
        Some(send_message_response::Payload::Task(task)) => task,
        other => return Err(check("answer", format!("expected a task, got {other:?}"))),
    };
    let accepted = started.elapsed();
    let id = task.id.clone();
    let mut current = task;
    while !is_terminal(state_of(&current)) {
        tokio::time::sleep(o.poll).await;
        current = c
            .get_task(GetTaskRequest {
                id: id.clone(),
                ..Default::default()
            })
            .await
            .map_err(client_failure)?;
        if current.id != id {
            return Err(check(
                "ids",
                format!("GetTask {id} answered task {}", current.id),
            ));
        }
    }
    check_finished(&current, o.expect)?;
    Ok(Outcome {
        spans: Vec::new(),
        marks: vec![("accepted", accepted)],
    })
}

/// Reads a stream to its end, checking its order: the first event is the task (or a message
/// reply), every later one names that task, SSE ids rise, and the last leaves the task finished.
/// Returns when the first event arrived and the final state.
/// With `resume_after`, the SSE ids must go on from there one by one (no event lost).
async fn follow(
    events: a2a_client::EventStream,
    started: Instant,
    expect_task: Option<&str>,
    resume_after: Option<u64>,
) -> Result<(Duration, Option<TaskState>, String), Failure> {
    follow_timed(events, started, expect_task, resume_after, &mut Vec::new()).await
}

/// [`follow`], recording when each event after the first (the task snapshot a subscription
/// starts with, read from the store) arrived, by its sequence number.
async fn follow_timed(
    mut events: a2a_client::EventStream,
    started: Instant,
    expect_task: Option<&str>,
    resume_after: Option<u64>,
    arrivals: &mut Vec<(u64, Instant)>,
) -> Result<(Duration, Option<TaskState>, String), Failure> {
    let mut first = None;
    let mut task_id = expect_task.map(str::to_owned);
    let mut state = None;
    let mut last_seq: Option<u64> = resume_after;
    let mut count = 0u64;
    while let Some(item) = events.next().await {
        let ev = item.map_err(client_failure)?;
        count += 1;
        first.get_or_insert_with(|| started.elapsed());
        if let Some(seq) = ev.id.as_deref().and_then(|s| s.parse::<u64>().ok()) {
            if last_seq.is_some_and(|l| seq <= l) {
                return Err(check("order", format!("SSE id {seq} after {last_seq:?}")));
            }
            if resume_after.is_some() && last_seq.is_some_and(|l| seq != l + 1) {
                return Err(check("gap", format!("SSE id {seq} after {last_seq:?}")));
            }
            last_seq = Some(seq);
            if count > 1 {
                arrivals.push((seq, Instant::now()));
            }
        }
        let (tid, new_state) = match ev.response.payload {
            Some(stream_response::Payload::Task(t)) => {
                let s = state_of(&t);
                (t.id, Some(s))
            }
            Some(stream_response::Payload::StatusUpdate(u)) => {
                let s = u
                    .status
                    .as_ref()
                    .and_then(|s| TaskState::try_from(s.state).ok());
                (u.task_id, s)
            }
            Some(stream_response::Payload::ArtifactUpdate(u)) => (u.task_id, None),
            Some(stream_response::Payload::Message(_)) if count == 1 && expect_task.is_none() => {
                return Ok((first.unwrap_or_default(), None, String::new()));
            }
            other => return Err(check("order", format!("unexpected event {other:?}"))),
        };
        match &task_id {
            None if count == 1 => task_id = Some(tid),
            Some(id) if *id == tid => {}
            _ => {
                return Err(check(
                    "ids",
                    format!("event of task {tid} in the stream of {task_id:?}"),
                ));
            }
        }
        if state.is_some_and(is_terminal) {
            return Err(check("order", "an event after the terminal state"));
        }
        if new_state.is_some() {
            state = new_state;
        }
    }
    let first = first.ok_or_else(|| check("order", "an empty stream"))?;
    Ok((first, state, task_id.unwrap_or_default()))
}

fn check_state(state: Option<TaskState>, o: &Options, id: &str) -> Result<(), Failure> {
    match state {
        Some(s) if s == o.expect => Ok(()),
        other => Err(check(
            "state",
            format!(
                "stream of task {id} ended {other:?}, expected {:?}",
                o.expect
            ),
        )),
    }
}

async fn stream(c: &A2aClient, o: &Options, n: u64) -> Result<Outcome, Failure> {
    let started = Instant::now();
    let events = sender(c, o, n)?
        .send_streaming_message(request(o, n, false))
        .await
        .map_err(client_failure)?;
    let (first, state, id) = follow(events, started, None, None).await?;
    if !id.is_empty() {
        check_state(state, o, &id)?;
    }
    Ok(Outcome {
        spans: Vec::new(),
        marks: vec![("first_event", first)],
    })
}

/// Creates a task (returnImmediately; give the agent time to run, e.g. the `scenario` agent's
/// `{"chunks": 20, "delayMs": 10}`), then follows it with `subscribers` SubscribeToTask streams
/// spread over the connections, and one more on the task's own replica (the reference for
/// `cross_replica_event`); the operation ends when every subscriber saw the end.
async fn subscribe(
    c: &A2aClient,
    all: &[A2aClient],
    o: &Options,
    n: u64,
) -> Result<Outcome, Failure> {
    let started = Instant::now();
    let resp = sender(c, o, n)?
        .send_message(request(o, n, true))
        .await
        .map_err(client_failure)?;
    let id = match resp.payload {
        Some(send_message_response::Payload::Task(task)) => task.id,
        other => return Err(check("answer", format!("expected a task, got {other:?}"))),
    };
    // One more subscriber, on the replica that made the task (`--url`), as the reference: each
    // event reaches it as soon as its replica has published it, so the others' arrival minus its
    // arrival is what following from another replica adds (`cross_replica_event`).
    let follow_on = |client: A2aClient| {
        let id = id.clone();
        async move {
            let events = client
                .subscribe_to_task(SubscribeToTaskRequest {
                    id: id.clone(),
                    ..Default::default()
                })
                .await
                .map_err(client_failure)?;
            let mut arrivals = Vec::new();
            let (first, state, _) =
                follow_timed(events, started, Some(&id), None, &mut arrivals).await?;
            check_state(state, o, &id)?;
            Ok::<_, Failure>((first, arrivals))
        }
    };
    let followers =
        (0..o.subscribers.max(1)).map(|i| follow_on(all[(n as usize + i + 1) % all.len()].clone()));
    let (reference, firsts) = futures::future::try_join(
        follow_on(c.clone()),
        futures::future::try_join_all(followers),
    )
    .await?;
    let here: std::collections::HashMap<u64, Instant> = reference.1.into_iter().collect();
    let spans = firsts
        .iter()
        .flat_map(|(_, arrivals)| arrivals)
        .filter_map(|(seq, at)| here.get(seq).map(|h| at.saturating_duration_since(*h)))
        .map(|lag| ("cross_replica_event", lag))
        .collect();
    Ok(Outcome {
        marks: vec![(
            "subscribed",
            firsts.iter().map(|(f, _)| *f).max().unwrap_or_default(),
        )],
        spans,
    })
}

/// Creates a task whose events are pushed to the built-in receiver (an inline push config on
/// SendMessage with returnImmediately); ends when its terminal state was delivered, checked.
async fn push(c: &A2aClient, o: &Options, n: u64) -> Result<Outcome, Failure> {
    let (hook, url) = o.webhook.as_ref().expect("push runs with a webhook");
    let started = Instant::now();
    let mut req = request(o, n, true);
    if let Some(cfg) = req.configuration.as_mut() {
        cfg.task_push_notification_config = Some(TaskPushNotificationConfig {
            url: url.clone(),
            token: format!("lt-{}", o.run_id),
            ..Default::default()
        });
    }
    let resp = sender(c, o, n)?
        .send_message(req)
        .await
        .map_err(client_failure)?;
    let accepted = started.elapsed();
    let id = match resp.payload {
        Some(send_message_response::Payload::Task(task)) => task.id,
        other => return Err(check("answer", format!("expected a task, got {other:?}"))),
    };
    let (state, _) = tokio::time::timeout(o.push_timeout, hook.ended(&id))
        .await
        .map_err(|_| {
            Failure::new(
                "push:timeout",
                format!(
                    "task {id}: no terminal delivery within {:?}",
                    o.push_timeout
                ),
            )
        })??;
    if state != o.expect {
        return Err(check(
            "state",
            format!("task {id} delivered {state:?}, expected {:?}", o.expect),
        ));
    }
    Ok(Outcome {
        spans: Vec::new(),
        marks: vec![("accepted", accepted)],
    })
}

/// Streams a task, drops the stream after its second event, and resumes with SubscribeToTask
/// and `Last-Event-ID` (give the agent time: `--tenant scenario --data '{"chunks": 10,
/// "delayMs": 10}'`): the resumed stream must go on from the next id with no gap to the end.
async fn resume(c: &A2aClient, o: &Options, n: u64) -> Result<Outcome, Failure> {
    let started = Instant::now();
    let mut events = sender(c, o, n)?
        .send_streaming_message(request(o, n, false))
        .await
        .map_err(client_failure)?;
    let (mut id, mut last, mut count) = (String::new(), None, 0);
    while count < 2 {
        let ev = events
            .next()
            .await
            .ok_or_else(|| check("resume", format!("the stream ended after {count} events")))?
            .map_err(client_failure)?;
        count += 1;
        last = ev.id.as_deref().and_then(|s| s.parse::<u64>().ok());
        match ev.response.payload {
            Some(stream_response::Payload::Task(t)) if count == 1 => id = t.id,
            Some(stream_response::Payload::StatusUpdate(u)) if u.task_id == id => {
                let s = u.status.and_then(|s| TaskState::try_from(s.state).ok());
                if s.is_some_and(is_terminal) {
                    return Err(check(
                        "resume",
                        format!("task {id} ended before it could be resumed: give the agent time"),
                    ));
                }
            }
            Some(stream_response::Payload::ArtifactUpdate(u)) if u.task_id == id => {}
            other => return Err(check("order", format!("unexpected event {other:?}"))),
        }
    }
    drop(events);
    let last = last.ok_or_else(|| {
        check(
            "resume",
            "no event id to resume from (gRPC streams carry none)",
        )
    })?;
    let resumed_at = Instant::now();
    let events = c
        .clone()
        .with_header("last-event-id", &last.to_string())
        .map_err(client_failure)?
        .subscribe_to_task(SubscribeToTaskRequest {
            id: id.clone(),
            ..Default::default()
        })
        .await
        .map_err(client_failure)?;
    let (first, state, _) = follow(events, resumed_at, Some(&id), Some(last)).await?;
    check_state(state, o, &id)?;
    Ok(Outcome {
        spans: Vec::new(),
        marks: vec![("resumed_first_event", resumed_at - started + first)],
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use a2a_client::Binding;

    use super::*;

    #[tokio::test]
    async fn each_send_carries_its_own_idempotency_key_when_asked() {
        // A JSON-RPC endpoint that records each request's `idempotency-key` and answers with a
        // completed task, over real HTTP.
        let seen = Arc::new(Mutex::new(Vec::new()));
        let record = seen.clone();
        let app = axum::Router::new().route(
            "/rpc",
            axum::routing::post(
                move |headers: axum::http::HeaderMap, body: axum::Json<serde_json::Value>| {
                    let key = headers
                        .get("idempotency-key")
                        .map(|v| v.to_str().unwrap().to_owned());
                    record.lock().unwrap().push(key);
                    async move {
                        axum::Json(serde_json::json!({"jsonrpc": "2.0", "id": body["id"],
                            "result": {"task": {"id": "t", "contextId": "c",
                                "status": {"state": "TASK_STATE_COMPLETED"}}}}))
                    }
                },
            ),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/rpc", listener.local_addr().unwrap());
        let server = tokio::spawn(async move { axum::serve(listener, app).await });
        for keyed in [true, false] {
            let client = A2aClient::new(Binding::JsonRpc { url: url.clone() }).unwrap();
            let options = Options {
                text: "hello".into(),
                data: None,
                expect: TaskState::Completed,
                poll: Duration::from_millis(5),
                subscribers: 1,
                run_id: "r1".into(),
                idempotency_key: keyed,
                webhook: None,
                push_timeout: Duration::from_secs(1),
                mix: vec![(Kind::Send, 1)],
            };
            let op = operation(Kind::Send, vec![client], Vec::new(), options);
            for n in [7, 8] {
                op(n).await.unwrap();
            }
        }
        let want = [Some("lt-r1-7"), Some("lt-r1-8"), None, None].map(|k| k.map(str::to_owned));
        assert_eq!(*seen.lock().unwrap(), want);
        server.abort();
    }

    #[test]
    fn a_mix_gives_each_scenario_its_share() {
        let mix = parse_mix("send=70, stream=20,send-async=10").unwrap();
        assert_eq!(mix[2], (Kind::SendAsync, 10));
        let mut counts = std::collections::HashMap::new();
        for n in 0..10_000 {
            *counts.entry(pick(&mix, n)).or_insert(0u32) += 1;
        }
        for (kind, share) in [
            (Kind::Send, 7000),
            (Kind::Stream, 2000),
            (Kind::SendAsync, 1000),
        ] {
            let got = counts[&kind] as i64;
            assert!((got - share).abs() < 300, "{kind:?}: {got}");
        }
        for bad in ["send", "send=0", "soap=1", "mixed=1", "send=x"] {
            assert!(parse_mix(bad).is_err(), "{bad}");
        }
    }
}
