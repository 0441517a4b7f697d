//! The equivalence suite: ONE table of scenarios (at the bottom), each run over every binding
//! (JSON-RPC, HTTP+JSON, gRPC) through `a2a-client`, against a fresh gateway per binding.
//!
//! A scenario asserts the protocol's rules itself and records a trace of outcomes (responses and
//! typed errors). Traces are normalised (task/context/message/config ids become `<idN>` in order of
//! first appearance, timestamps `<ts>`, page tokens `<token>`, the gateway address `<addr>`), and
//! every binding's trace must equal the reference (JSON-RPC) trace step for step. A failure names
//! the scenario, the binding and the step, with the expected and the actual value.
//! `A2A_EQUIVALENCE_TRACE=1` prints every normalised trace.

use std::collections::BTreeMap;
use std::time::Duration;

use a2a_client::{A2aClient, Binding, BindingKind, ClientError, EventStream, StreamEvent};
use a2a_types::A2aError;
use a2a_types::v1::{
    CancelTaskRequest, DeleteTaskPushNotificationConfigRequest, GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest, GetTaskRequest, ListTaskPushNotificationConfigsRequest,
    ListTasksRequest, SendMessageResponse, StreamResponse, SubscribeToTaskRequest, Task,
    TaskPushNotificationConfig, TaskState, send_message_response, stream_response,
};
use a2a_types::wkt::Timestamp;
use futures::StreamExt;
use futures::future::BoxFuture;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::harness::{TestGateway, script_message, user_message};

mod dialect03;
mod errors;
mod flows;

use errors::*;
use flows::*;

/// The bindings every scenario runs over; the first is the reference.
const BINDINGS: [BindingKind; 3] = [
    BindingKind::JsonRpc,
    BindingKind::HttpJson,
    BindingKind::Grpc,
];

struct Env {
    gw: TestGateway,
    kind: BindingKind,
}

impl Env {
    fn client(&self) -> A2aClient {
        let binding = match self.kind {
            BindingKind::JsonRpc => Binding::JsonRpc {
                url: self.gw.url("/a2a/jsonrpc"),
            },
            BindingKind::HttpJson => Binding::Rest {
                url: self.gw.url("/a2a/rest"),
            },
            BindingKind::Grpc => Binding::Grpc {
                endpoint: self.gw.addr.to_string(),
            },
        };
        A2aClient::new(binding).expect("a client for the test gateway")
    }

    fn scenario_client(&self) -> A2aClient {
        self.client().with_tenant("scenario")
    }

    /// SSE bindings number their events with the task's sequence numbers; gRPC has no ids.
    fn has_event_ids(&self) -> bool {
        self.kind != BindingKind::Grpc
    }
}

/// The recorded outcomes of one scenario on one binding.
#[derive(Default)]
struct Trace {
    steps: Vec<(String, Value)>,
}

impl Trace {
    fn ok<T: Serialize>(&mut self, label: &str, value: &T) {
        let v = serde_json::to_value(value).expect("wire types serialise");
        self.steps.push((label.to_owned(), v));
    }

    fn res<T: Serialize>(&mut self, label: &str, r: &Result<T, ClientError>) {
        match r {
            Ok(v) => self.ok(label, v),
            Err(e) => self.steps.push((label.to_owned(), error_json(e))),
        }
    }
}

fn error_json(e: &ClientError) -> Value {
    match e {
        ClientError::A2a(err) => {
            let info = err.error_info();
            json!({"error": info.reason, "metadata": info.metadata, "message": err.to_string()})
        }
        other => json!({"clientError": other.to_string()}),
    }
}

// ---------------------------------------------------------------------------------------------
// Normalisation and comparison

const ID_KEYS: [&str; 4] = ["id", "taskId", "contextId", "messageId"];
const TOKEN_KEYS: [&str; 2] = ["nextPageToken", "pageToken"];

/// Every UUID (8-4-4-4-12 hex digits) inside `s`, in order.
fn uuids_in(s: &str) -> Vec<&str> {
    let b = s.as_bytes();
    let is_uuid = |w: &[u8]| {
        w.iter().enumerate().all(|(i, c)| {
            if [8, 13, 18, 23].contains(&i) {
                *c == b'-'
            } else {
                c.is_ascii_hexdigit()
            }
        })
    };
    let mut out = Vec::new();
    let mut i = 0;
    while i + 36 <= b.len() {
        if is_uuid(&b[i..i + 36]) {
            out.push(&s[i..i + 36]);
            i += 36;
        } else {
            i += 1;
        }
    }
    out
}

fn register(id: &str, ids: &mut BTreeMap<String, String>, order: &mut Vec<String>) {
    if !id.is_empty() && !ids.contains_key(id) {
        ids.insert(id.to_owned(), format!("<id{}>", order.len() + 1));
        order.push(id.to_owned());
    }
}

fn collect_ids(v: &Value, ids: &mut BTreeMap<String, String>, order: &mut Vec<String>) {
    match v {
        Value::String(s) => {
            for id in uuids_in(s) {
                register(id, ids, order);
            }
        }
        Value::Object(m) => {
            for (k, x) in m {
                if let (true, Value::String(s)) = (ID_KEYS.contains(&k.as_str()), x) {
                    register(s, ids, order);
                }
                collect_ids(x, ids, order);
            }
        }
        Value::Array(a) => a.iter().for_each(|x| collect_ids(x, ids, order)),
        _ => {}
    }
}

fn replace_ids(v: &mut Value, key: Option<&str>, ids: &BTreeMap<String, String>, addr: &str) {
    match v {
        Value::Object(m) => {
            for (k, x) in m.iter_mut() {
                // Card signatures: each gateway signs with a key of its own (and ES256 is
                // randomised); that each binding's card carries one is what is compared.
                if k == "signatures"
                    && let Value::Array(sigs) = x
                {
                    for sig in sigs {
                        *sig = serde_json::json!({"protected": "<jws>", "signature": "<jws>"});
                    }
                    continue;
                }
                replace_ids(x, Some(k), ids, addr);
            }
        }
        Value::Array(a) => a.iter_mut().for_each(|x| replace_ids(x, key, ids, addr)),
        Value::String(s) => {
            if key == Some("timestamp") {
                *s = "<ts>".into();
            } else if key.is_some_and(|k| TOKEN_KEYS.contains(&k)) && !s.is_empty() {
                *s = "<token>".into();
            } else {
                for (id, placeholder) in ids {
                    if s.contains(id.as_str()) {
                        *s = s.replace(id.as_str(), placeholder);
                    }
                }
                *s = s.replace(addr, "<addr>");
            }
        }
        _ => {}
    }
}

fn normalise(mut steps: Vec<(String, Value)>, addr: &str) -> Vec<(String, Value)> {
    let (mut ids, mut order) = (BTreeMap::new(), Vec::new());
    for (_, v) in &steps {
        collect_ids(v, &mut ids, &mut order);
    }
    for (_, v) in &mut steps {
        replace_ids(v, None, &ids, addr);
    }
    steps
}

type Scenario = fn(Env) -> BoxFuture<'static, Vec<(String, Value)>>;

fn panic_text(e: tokio::task::JoinError) -> String {
    match e.try_into_panic() {
        Ok(p) => p
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| (*s).to_owned()))
            .unwrap_or_else(|| "a non-string panic".into()),
        Err(e) => e.to_string(),
    }
}

/// Runs `scenario` over every binding and fails with every discrepancy from the reference.
async fn run(name: &str, config: &'static str, scenario: Scenario) {
    let mut runs = Vec::new();
    for kind in BINDINGS {
        let env = Env {
            gw: TestGateway::with_config(config).await,
            kind,
        };
        let fut = tokio::time::timeout(Duration::from_secs(60), scenario(env));
        runs.push((kind, tokio::spawn(fut)));
    }
    let mut outcomes = Vec::new();
    for (kind, handle) in runs {
        let outcome = match handle.await {
            Ok(Ok(steps)) => Ok(steps),
            Ok(Err(_)) => Err("timed out after 60 s".to_owned()),
            Err(e) => Err(format!("panicked: {}", panic_text(e))),
        };
        outcomes.push((kind, outcome));
    }
    if std::env::var_os("A2A_EQUIVALENCE_TRACE").is_some() {
        for (kind, outcome) in &outcomes {
            if let Ok(steps) = outcome {
                eprintln!("{name} [{kind}] {}", serde_json::to_string(steps).unwrap());
            }
        }
    }
    let mut problems = Vec::new();
    let (ref_kind, reference) = &outcomes[0];
    for (kind, outcome) in &outcomes {
        let steps = match outcome {
            Ok(s) => s,
            Err(e) => {
                problems.push(format!("[{kind}] {e}"));
                continue;
            }
        };
        let Ok(reference) = reference else { continue };
        if kind == ref_kind {
            continue;
        }
        for i in 0..reference.len().max(steps.len()) {
            match (reference.get(i), steps.get(i)) {
                (Some((l1, v1)), Some((l2, v2))) if l1 == l2 && v1 == v2 => {}
                (Some((l1, v1)), Some((l2, v2))) => problems.push(format!(
                    "[{kind}] step {i} `{l2}` differs from {ref_kind} step `{l1}`\n  expected ({ref_kind}): {}\n  got ({kind}):      {}",
                    serde_json::to_string(v1).unwrap(),
                    serde_json::to_string(v2).unwrap()
                )),
                (Some((l1, _)), None) => {
                    problems.push(format!("[{kind}] step {i} `{l1}` missing"))
                }
                (None, Some((l2, _))) => {
                    problems.push(format!("[{kind}] extra step {i} `{l2}`"))
                }
                (None, None) => unreachable!(),
            }
        }
    }
    assert!(
        problems.is_empty(),
        "equivalence scenario `{name}`:\n{}",
        problems.join("\n")
    );
}

macro_rules! table {
    ($($name:ident ($config:expr);)*) => {
        mod cases {
            #[allow(unused_imports)]
            use super::{
                EXTENDED_CARD, EXTENDED_CARD_DECLARED, EXTENDED_CARD_NO_AUTH, REQUIRED_EXTENSION,
            };
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::run(stringify!($name), $config, |env| {
                        Box::pin(async move {
                            let mut t = super::Trace::default();
                            super::$name(&env, &mut t).await;
                            super::normalise(t.steps, &env.gw.addr.to_string())
                        })
                    })
                    .await;
                }
            )*
        }
    };
}

// ---------------------------------------------------------------------------------------------
// Helpers

/// A wire type from its ProtoJSON form.
fn wire<T: DeserializeOwned>(v: Value) -> T {
    serde_json::from_value(v).expect("valid ProtoJSON")
}

fn task_of(r: &SendMessageResponse) -> Task {
    match &r.payload {
        Some(send_message_response::Payload::Task(t)) => t.clone(),
        other => panic!("expected a task, got {other:?}"),
    }
}

fn state(t: &Task) -> TaskState {
    TaskState::try_from(t.status.as_ref().expect("a status").state).expect("a known state")
}

/// `task`, `message`, `artifactUpdate`, or the state of a status update.
fn kind(r: &StreamResponse) -> String {
    match r.payload.as_ref().expect("a payload") {
        stream_response::Payload::Task(_) => "task".into(),
        stream_response::Payload::Message(_) => "message".into(),
        stream_response::Payload::ArtifactUpdate(_) => "artifactUpdate".into(),
        stream_response::Payload::StatusUpdate(s) => {
            TaskState::try_from(s.status.as_ref().unwrap().state)
                .unwrap()
                .as_str_name()
                .into()
        }
    }
}

/// Every event until the server closes the stream, and the error that ended it, if any.
async fn drain(mut s: EventStream) -> (Vec<StreamEvent>, Option<ClientError>) {
    let mut out = Vec::new();
    loop {
        match tokio::time::timeout(Duration::from_secs(10), s.next())
            .await
            .expect("an event within 10 s")
        {
            None => return (out, None),
            Some(Ok(ev)) => out.push(ev),
            Some(Err(e)) => return (out, Some(e)),
        }
    }
}

/// A stream's responses, or its error (whether refused before streaming or as its first event).
async fn stream_outcome(
    opened: Result<EventStream, ClientError>,
) -> Result<Vec<StreamResponse>, ClientError> {
    let (events, err) = drain(opened?).await;
    match err {
        Some(e) if events.is_empty() => Err(e),
        Some(e) => panic!("the stream failed after {} events: {e}", events.len()),
        None => Ok(events.into_iter().map(|e| e.response).collect()),
    }
}

fn responses(events: &[StreamEvent]) -> Vec<StreamResponse> {
    events.iter().map(|e| e.response.clone()).collect()
}

async fn send_script(c: &A2aClient, script: Value, configuration: Value) -> SendMessageResponse {
    c.send_message(wire(
        json!({"tenant": "scenario", "message": script_message(script),
                                "configuration": configuration}),
    ))
    .await
    .expect("the scenario send succeeds")
}

async fn send_text(c: &A2aClient, text: &str) -> Task {
    task_of(
        &c.send_message(wire(json!({"message": user_message(text)})))
            .await
            .expect("the echo send succeeds"),
    )
}

fn get(id: &str, history_length: Option<i32>) -> GetTaskRequest {
    GetTaskRequest {
        id: id.into(),
        history_length,
        ..Default::default()
    }
}

/// Polls until the task is WORKING (a hang task, before it is canceled).
async fn wait_working(c: &A2aClient, id: &str) -> Task {
    for _ in 0..200 {
        let t = c.get_task(get(id, None)).await.unwrap();
        if state(&t) == TaskState::Working {
            return t;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("task {id} never became WORKING");
}

fn err_of<T: std::fmt::Debug>(r: &Result<T, ClientError>) -> &A2aError {
    match r {
        Err(ClientError::A2a(e)) => e,
        other => panic!("expected an A2A error, got {other:?}"),
    }
}

/// An extended card for callers with the API key `the-key` (header `X-API-Key`).
const EXTENDED_CARD: &str = r#"
[auth.schemes.key]
scheme = { apiKeySecurityScheme = { location = "header", name = "X-API-Key" } }
keys = [{ id = "k", key = "the-key" }]
[extended_card]
description = "the extended card"
[[extended_card.skills]]
id = "private"
name = "Private"
description = "only in the extended card"
tags = ["private"]
"#;

/// The same extended card without `[auth]`: no caller is authenticated, so it is neither
/// declared nor served.
const EXTENDED_CARD_NO_AUTH: &str = r#"
[extended_card]
description = "the extended card"
"#;

/// The capability declared (to callers with the key), no card configured.
const EXTENDED_CARD_DECLARED: &str = r#"
[auth.schemes.key]
scheme = { apiKeySecurityScheme = { location = "header", name = "X-API-Key" } }
keys = [{ id = "k", key = "the-key" }]
[card]
extended_agent_card = true
"#;

const REQUIRED_EXTENSION: &str = r#"
[[extensions]]
uri = "urn:example:required"
required = true
"#;

/// Discovery: the public card lists every binding, and a client built from it reaches each one.
#[tokio::test]
async fn card_discovery_reaches_every_binding() {
    use a2a_client::ClientPrefs;
    let gw = TestGateway::start().await;
    let preferred = A2aClient::from_card_url(&gw.url("/"), &ClientPrefs::default())
        .await
        .unwrap();
    assert_eq!(
        preferred.binding().kind(),
        BindingKind::JsonRpc,
        "the card's first interface"
    );
    for kind in BINDINGS {
        let c = A2aClient::from_card_url(
            &gw.url("/.well-known/agent-card.json"),
            &ClientPrefs::only(kind),
        )
        .await
        .unwrap_or_else(|e| panic!("{kind}: {e}"));
        assert_eq!(c.binding().kind(), kind);
        let task = send_text(&c, "hi").await;
        assert_eq!(state(&task), TaskState::Completed, "{kind}");
    }
}

// ---------------------------------------------------------------------------------------------
// THE TABLE: scenario (gateway configuration). Every row runs over every binding in `BINDINGS`.

table! {
    send_echo("");
    send_every_end("");
    stream_chunks_in_order("");
    get_with_history_length("");
    list_filters_and_paging("");
    cancel_hang_and_completed("");
    subscribe_joins_mid_stream("");
    subscribe_waits_past_input_required("");
    push_config_crud("");
    error_unknown_task_on_every_op("");
    error_message_to_terminal_task("");
    error_version_not_supported("");
    error_invalid_params_name_the_field("");
    error_content_type_not_supported("");
    error_extended_card_unsupported("");
    error_extended_card_without_auth(EXTENDED_CARD_NO_AUTH);
    error_extended_card_not_configured(EXTENDED_CARD_DECLARED);
    extended_card_configured(EXTENDED_CARD);
    error_extension_required(REQUIRED_EXTENSION);
    error_push_not_supported("[card]\npush_notifications = false");
    error_streaming_disabled("[card]\nstreaming = false");
}
