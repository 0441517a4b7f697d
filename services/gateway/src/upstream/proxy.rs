//! One turn on an upstream agent. The gateway sends the client's message upstream (with the
//! upstream's own task and context ids when the message continues a task), then follows the
//! upstream task: its stream when the upstream streams, else GetTask polls with backoff. Every
//! upstream event is rewritten to the gateway's ids and reported through [`AgentEvents`]; the
//! runner stores and publishes it. A takeover ([`resume`]) re-attaches to the upstream task with
//! SubscribeToTask (or GetTask) and reports only what the gateway's snapshot lacks.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use a2a_store::UpstreamRef;
use a2a_types::A2aError;
use a2a_types::state::{is_interrupted, is_settled, state_of};
use a2a_types::v1::{
    Artifact, Message, SendMessageConfiguration, SendMessageRequest, StreamResponse, Task,
    TaskState, send_message_response, stream_response::Payload,
};
use futures::StreamExt;
use futures::stream::BoxStream;
use tokio_util::sync::CancellationToken;

use super::{UpstreamAgent, UpstreamClient};
use crate::agents::{AgentEvent, AgentEvents, AgentRequest};

/// First and longest pause between GetTask polls.
const POLL_FIRST: Duration = Duration::from_millis(50);
const POLL_MAX: Duration = Duration::from_secs(2);
/// Consecutive failed polls before the turn fails.
const POLL_FAILURES: u32 = 10;

pub(super) async fn execute(
    agent: &UpstreamAgent,
    req: AgentRequest,
    events: AgentEvents,
) -> Result<(), A2aError> {
    let client = agent.client()?;
    let streaming = agent.streams();
    let mut map = Mapper::new(&req, events, false);
    let _forward = forward_cancel(&client, &map);
    let out = SendMessageRequest {
        message: Some(upstream_message(&req)),
        configuration: Some(SendMessageConfiguration {
            return_immediately: !streaming,
            ..Default::default()
        }),
        ..Default::default()
    };
    let key = agent.idempotent().then(|| idempotency_key(&req));
    let key = key.as_deref();
    tracing::debug!(agent = %agent.config.name, task_id = %req.task_id, binding = %client.binding(), streaming, idempotency_key = key, "proxying a turn");
    if streaming {
        let stream = client.map_stream(client.stream(out, key, req.hops.saturating_add(1)).await?);
        if map.pump(stream).await? {
            return Ok(());
        }
    } else {
        match client
            .send(out, key, req.hops.saturating_add(1))
            .await?
            .payload
        {
            Some(send_message_response::Payload::Message(m)) => {
                map.message(m).await?;
                return Ok(());
            }
            Some(send_message_response::Payload::Task(t)) => {
                if map.task(t).await? {
                    return Ok(());
                }
            }
            None => {
                return Err(A2aError::InvalidAgentResponse(format!(
                    "upstream agent {} answered SendMessage with neither a task nor a message",
                    agent.config.name
                )));
            }
        }
    }
    map.poll(&client).await
}

/// The `Idempotency-Key` of a turn: the same on every replica, plus the turn for a task's later
/// messages (each of them is a request of its own upstream). Its base is the digest of the
/// caller's (owner, key) for a task created by a keyed send, so a retry that got a new task id
/// (its key was freed or reclaimed) is still recognised upstream (review M7); otherwise the
/// gateway task id.
pub(super) fn idempotency_key(req: &AgentRequest) -> String {
    let base = req.upstream_key.as_deref().unwrap_or(&req.task_id);
    match req.turn {
        0 | 1 => base.to_owned(),
        n => format!("{base}.{n}"),
    }
}

/// Takes over a task whose dispatching replica died: re-attach to the upstream task. A turn the
/// replica had not sent is dispatched again instead (`execute`), and so is one it was sending
/// when the upstream honours idempotency keys; what reaches here without upstream ids is a send
/// that began toward an upstream that may or may not have run it.
pub(super) async fn resume(
    agent: &UpstreamAgent,
    req: AgentRequest,
    events: AgentEvents,
) -> Result<(), A2aError> {
    if req.upstream.is_none() {
        // Not `Unavailable`: the upstream did nothing wrong, and must not be marked unhealthy.
        return Err(A2aError::Internal(format!(
            "the replica dispatching task {} stopped while sending it to upstream agent {}, \
             before the upstream named its task: the outcome upstream is unknown (it may or may \
             not have run); send the message again if it is safe to repeat",
            req.task_id, agent.config.name
        )));
    }
    let client = agent.client()?;
    let mut map = Mapper::new(&req, events, true);
    let _forward = forward_cancel(&client, &map);
    let id = req
        .upstream
        .as_ref()
        .map(|u| u.task_id.clone())
        .unwrap_or_default();
    tracing::info!(agent = %agent.config.name, task_id = %req.task_id, "re-attaching to the upstream task");
    if agent.streams() {
        // A settled upstream task refuses a subscription: the poll below reads it.
        if let Ok(stream) = client.subscribe(&id).await
            && map.pump(client.map_stream(stream)).await?
        {
            return Ok(());
        }
    }
    map.poll(&client).await
}

/// The message as the upstream must see it: its own task and context ids (none for a new
/// task: the upstream mints them), no gateway task references.
fn upstream_message(req: &AgentRequest) -> Message {
    let mut m = req.message.clone();
    match &req.upstream {
        Some(u) => {
            m.task_id.clone_from(&u.task_id);
            m.context_id.clone_from(&u.context_id);
        }
        None => {
            m.task_id.clear();
            m.context_id.clear();
        }
    }
    m.reference_task_ids.clear();
    m
}

/// Forwards a cancel of the gateway task to the upstream task while the turn runs. The runner
/// drops the turn on cancel, so this runs beside it; the guard stops it when the turn ends.
struct CancelForward(CancellationToken);

impl Drop for CancelForward {
    fn drop(&mut self) {
        self.0.cancel();
    }
}

fn forward_cancel(client: &UpstreamClient, map: &Mapper) -> CancelForward {
    let done = CancellationToken::new();
    let (client, slot, cancel, stop) = (
        client.clone(),
        map.upstream.clone(),
        map.events.cancel_token(),
        done.clone(),
    );
    tokio::spawn(async move {
        tokio::select! {
            // Biased: a cancel also ends the turn, and then it must still be forwarded.
            biased;
            _ = cancel.cancelled() => {
                if let Some(u) = slot.get() {
                    match client.cancel(&u.task_id).await {
                        Ok(_) => tracing::debug!(upstream_task = %u.task_id, "cancel forwarded upstream"),
                        Err(e) => tracing::warn!(error = %e, "cannot forward the cancel upstream"),
                    }
                }
            }
            _ = stop.cancelled() => {}
        }
    });
    CancelForward(done)
}

/// Turns upstream events into the gateway task's events.
struct Mapper {
    events: AgentEvents,
    task_id: String,
    context_id: String,
    upstream: Arc<OnceLock<UpstreamRef>>,
    /// The gateway task's state and artifacts as reported so far.
    state: TaskState,
    artifacts: Vec<Artifact>,
    /// Id of the last status message reported (polls see the same one again).
    last_status_message: Option<String>,
    /// A task exists at the gateway (a reply can no longer be a direct message).
    has_task: bool,
}

impl Mapper {
    fn new(req: &AgentRequest, events: AgentEvents, resume: bool) -> Self {
        let slot = OnceLock::new();
        if let Some(u) = &req.upstream {
            let _ = slot.set(u.clone());
        }
        let (state, artifacts) = match (&req.task, resume) {
            // A continued task, with the snapshot from before its message: the runner has just
            // recorded WORKING. (A turn dispatched again by a takeover has the current one.)
            (Some(t), false) if is_interrupted(state_of(t)) => {
                (TaskState::Working, t.artifacts.clone())
            }
            (Some(t), _) => (state_of(t), t.artifacts.clone()),
            (None, _) => (TaskState::Submitted, Vec::new()),
        };
        Self {
            events,
            task_id: req.task_id.clone(),
            context_id: req.context_id.clone(),
            upstream: Arc::new(slot),
            state,
            artifacts,
            last_status_message: None,
            has_task: req.task.is_some(),
        }
    }

    fn ours(&self, mut m: Message) -> Message {
        m.task_id.clone_from(&self.task_id);
        m.context_id.clone_from(&self.context_id);
        m
    }

    /// Learns the upstream ids from the first event that names them.
    async fn bind(&mut self, task_id: &str, context_id: &str) -> Result<(), A2aError> {
        if self.upstream.get().is_some() || task_id.is_empty() {
            return Ok(());
        }
        let ids = UpstreamRef {
            task_id: task_id.to_owned(),
            context_id: context_id.to_owned(),
        };
        let _ = self.upstream.set(ids.clone());
        self.has_task = true;
        self.events.send(AgentEvent::Upstream(ids)).await
    }

    /// Events until the upstream task settles (`true`) or the stream ends first (`false`).
    async fn pump(
        &mut self,
        mut stream: BoxStream<'static, Result<StreamResponse, A2aError>>,
    ) -> Result<bool, A2aError> {
        while let Some(event) = stream.next().await {
            if self.event(event?).await? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    async fn event(&mut self, event: StreamResponse) -> Result<bool, A2aError> {
        match event.payload {
            Some(Payload::Task(t)) => self.task(t).await,
            Some(Payload::Message(m)) => self.message(m).await,
            Some(Payload::StatusUpdate(u)) => {
                self.bind(&u.task_id, &u.context_id).await?;
                let status = u.status.unwrap_or_default();
                let state = TaskState::try_from(status.state).unwrap_or(TaskState::Unspecified);
                self.status(state, status.message).await
            }
            Some(Payload::ArtifactUpdate(u)) => {
                self.bind(&u.task_id, &u.context_id).await?;
                let artifact = u.artifact.ok_or_else(|| {
                    A2aError::InvalidAgentResponse(
                        "an upstream artifact update without an artifact".into(),
                    )
                })?;
                let mut snapshot = Task {
                    artifacts: std::mem::take(&mut self.artifacts),
                    ..Default::default()
                };
                a2a_types::state::apply_event(
                    &mut snapshot,
                    &StreamResponse {
                        payload: Some(Payload::ArtifactUpdate(
                            a2a_types::v1::TaskArtifactUpdateEvent {
                                artifact: Some(artifact.clone()),
                                append: u.append,
                                ..Default::default()
                            },
                        )),
                    },
                );
                self.artifacts = snapshot.artifacts;
                self.events
                    .artifact(artifact, u.append, u.last_chunk)
                    .await?;
                Ok(false)
            }
            None => Err(A2aError::InvalidAgentResponse(
                "an empty upstream stream event".into(),
            )),
        }
    }

    /// A snapshot (first stream event, a poll, a re-attach): report what differs.
    async fn task(&mut self, t: Task) -> Result<bool, A2aError> {
        self.bind(&t.id, &t.context_id).await?;
        for a in &t.artifacts {
            if self.artifacts.iter().any(|known| known == a) {
                continue;
            }
            match self
                .artifacts
                .iter_mut()
                .find(|k| k.artifact_id == a.artifact_id)
            {
                Some(known) => *known = a.clone(),
                None => self.artifacts.push(a.clone()),
            }
            self.events.artifact(a.clone(), false, true).await?;
        }
        let status = t.status.unwrap_or_default();
        let state = TaskState::try_from(status.state).unwrap_or(TaskState::Unspecified);
        self.status(state, status.message).await
    }

    /// A direct reply when no task exists yet; else a message on the task.
    async fn message(&mut self, m: Message) -> Result<bool, A2aError> {
        if !self.has_task {
            self.events.reply(self.ours(m)).await?;
            return Ok(true);
        }
        self.events.send(AgentEvent::Message(self.ours(m))).await?;
        Ok(false)
    }

    async fn status(
        &mut self,
        state: TaskState,
        message: Option<Message>,
    ) -> Result<bool, A2aError> {
        if state == TaskState::Unspecified {
            return Err(A2aError::InvalidAgentResponse(
                "the upstream reported a task without a state".into(),
            ));
        }
        let message_id = message.as_ref().map(|m| m.message_id.clone());
        // A poll sees the same status again; SUBMITTED is where every task starts.
        let repeated = state == self.state
            && (message_id == self.last_status_message || state == TaskState::Submitted);
        if !repeated {
            self.events
                .status(state, message.map(|m| self.ours(m)))
                .await?;
            self.state = state;
            self.last_status_message = message_id;
        }
        Ok(is_settled(self.state))
    }

    /// GetTask with backoff until the upstream task settles.
    async fn poll(&mut self, client: &UpstreamClient) -> Result<(), A2aError> {
        let id = self
            .upstream
            .get()
            .map(|u| u.task_id.clone())
            .ok_or_else(|| {
                A2aError::InvalidAgentResponse(
                    "the upstream ended the exchange without a task or a message".into(),
                )
            })?;
        let (mut delay, mut failures) = (POLL_FIRST, 0);
        loop {
            tokio::time::sleep(delay).await;
            delay = (delay * 3 / 2).min(POLL_MAX);
            match client.get_task(&id).await {
                Ok(t) => {
                    failures = 0;
                    if self.task(t).await? {
                        return Ok(());
                    }
                }
                Err(A2aError::Unavailable(m)) if failures < POLL_FAILURES => {
                    failures += 1;
                    tracing::debug!(upstream_task = %id, error = %m, "poll failed; retrying");
                }
                Err(e) => return Err(e),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(task_id: &str, turn: u32, upstream_key: Option<&str>) -> AgentRequest {
        AgentRequest {
            task_id: task_id.into(),
            context_id: "c".into(),
            message: Default::default(),
            task: None,
            upstream: None,
            turn,
            upstream_key: upstream_key.map(Into::into),
            hops: 0,
        }
    }

    /// The task id is the base unless the task was created by a keyed send (review M7); later
    /// messages add `.N`.
    #[test]
    fn idempotency_keys_use_the_keyed_sends_base() {
        assert_eq!(idempotency_key(&request("t1", 1, None)), "t1");
        assert_eq!(idempotency_key(&request("t1", 3, None)), "t1.3");
        // Two task ids minted for retries of one keyed send: one upstream key.
        assert_eq!(idempotency_key(&request("t1", 1, Some("k"))), "k");
        assert_eq!(idempotency_key(&request("t2", 1, Some("k"))), "k");
        assert_eq!(idempotency_key(&request("t2", 2, Some("k"))), "k.2");
    }
}
