//! SendMessage and SendStreamingMessage: prepare a turn (validate, route, load the task being
//! continued), then run it in a task of its own so that neither a disconnecting client nor
//! `returnImmediately` stops the agent. The runner is the only writer of its task while it runs:
//! it creates the task on the agent's first event, commits every event (store first, then bus)
//! and stops at the first terminal or interrupted state or when canceled.

use a2a_process::telemetry::{self, KeyValue, SpanKind, TraceSpan};
use std::collections::BTreeMap;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use a2a_bus::BusEvent;
use a2a_store::{
    DispatchMark, InlinePush, KeyRequest, NewTask, StoreError, StoredEvent, TaskChange, TaskRecord,
    UpstreamRef,
};
use a2a_types::A2aError;
use a2a_types::state::{
    can_transition, is_interrupted, is_settled, is_terminal, state_of, trim_history,
};
use a2a_types::v1::{
    Message, Role, SendMessageRequest, SendMessageResponse, StreamResponse, Task,
    TaskArtifactUpdateEvent, TaskPushNotificationConfig, TaskState, TaskStatus,
    TaskStatusUpdateEvent, send_message_response, stream_response::Payload,
};
use a2a_types::wkt::Timestamp;

use futures::{FutureExt, StreamExt};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use super::follow::{Follow, settle};
use super::idempotency::{self, KeyHold, Keyed};
use super::quota::{Quota, QuotaGuard};
use super::{A2aService, EventStream, RequestContext, SeqEvent, store_error, validate};
use crate::agents::{Agent, AgentEvent, AgentEvents, AgentRequest, accepts};
use crate::upstream::queue::Priority;

/// Events an agent may have in flight before it waits for the runner.
const AGENT_EVENT_BUFFER: usize = 32;
/// Most events stored in one write (see [`Runner::stage`]).
const MAX_BURST: usize = AGENT_EVENT_BUFFER;

/// The runner's first answer; a runner that stopped without one failed inside.
fn first_answer(
    first: Result<Result<First, A2aError>, oneshot::error::RecvError>,
) -> Result<First, A2aError> {
    first.unwrap_or_else(|_| {
        Err(A2aError::Internal(
            "the task runner stopped before answering".into(),
        ))
    })
}

/// What the caller learns once the turn has started.
pub(crate) enum First {
    /// The agent answered with a message; no task exists.
    Message(Message),
    /// The task as created (or as continued), with its sequence number.
    Task { task: Task, seq: u64 },
}

tokio::task_local! {
    /// The `traceparent` of the request whose turn is running: `publish` puts it on every event
    /// the turn produces, however deep in the turn it is called.
    static TRACEPARENT: Option<String>;
}

/// One prepared turn of an agent on a task.
pub(super) struct Turn {
    pub agent: Arc<dyn Agent>,
    pub owner: String,
    /// The SERVER span of the request that started the turn, when it is traced: the turn's
    /// span is its child (no `traceparent` written and parsed back in between).
    pub parent: TraceSpan,
    /// Otherwise the request's `traceparent` (the client's, or one flagged not sampled).
    pub traceparent: Option<String>,
    pub request: AgentRequest,
    /// The sequence number of the task being continued; `None` for a new task.
    pub continues: Option<u64>,
    /// The task's fencing token when the turn started (0 for a new task): every write of the
    /// turn carries it, and is refused once a takeover moved it (review M4).
    pub epoch: u64,
    pub push_config: Option<TaskPushNotificationConfig>,
    /// The dialect of the send, which a `push_config` registered with it keeps.
    pub dialect: a2a_types::Dialect,
    pub cancel: CancellationToken,
    /// Whether this turn is new or taken over from a replica that died.
    pub resume: Resume,
    pub priority: Priority,
    /// The idempotency key this send holds, kept once the turn reaches its task.
    pub key: Option<KeyHold>,
    /// A blocking SendMessage waits for this turn: when the turn's first write already settles
    /// the task (echo's whole answer is one write), the runner answers with the settled
    /// snapshot instead of the task as created, and the caller has nothing left to follow.
    pub blocking: bool,
    /// The owner's running-turn unit (`running_turns_per_owner`): dropped with the turn, when
    /// its runner ends however it ends.
    pub _quota: QuotaGuard,
}

/// How a turn starts. A taken-over turn's task exists (`Turn::continues` is its sequence
/// number and `AgentRequest::task` its snapshot): the runner writes nothing before the agent
/// runs, and the turn comes back into the agent's queue where it was ([`Runner::admit`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Resume {
    /// A client's message: a new task, or the next turn of an interrupted one.
    No,
    /// Continue what the dead replica started (`Agent::resume`: an upstream agent re-attaches).
    Reattach,
    /// Run the turn from the start (`Agent::execute`): the dead replica had not sent it
    /// upstream, or the upstream answers a repeated send from the first.
    Redispatch,
}

/// The number of client messages in a task's history: the turn the last one started.
pub(super) fn turns_of(task: &Task) -> u32 {
    let users = task.history.iter().filter(|m| m.role == Role::User as i32);
    u32::try_from(users.count()).unwrap_or(u32::MAX)
}

pub(crate) struct SendOptions {
    pub history_length: Option<usize>,
    pub return_immediately: bool,
}

/// What a send turns into.
enum Prepared {
    Turn(Box<Turn>, SendOptions),
    /// A retry with the `Idempotency-Key` of a send that reached this task: answer from it.
    Replay(String, SendOptions),
}

impl A2aService {
    pub async fn send_message(
        &self,
        ctx: &RequestContext,
        req: SendMessageRequest,
    ) -> Result<SendMessageResponse, A2aError> {
        let blocking = !req
            .configuration
            .as_ref()
            .is_some_and(|c| c.return_immediately);
        // Held while this call waits (dropped with it, a client disconnect included).
        let _waiting = blocking
            .then(|| self.inner.quotas.acquire(Quota::BlockingSends, &ctx.owner))
            .transpose()?;
        let (mut turn, opts) = match self.prepare_turn(ctx, req).await? {
            Prepared::Turn(turn, opts) => (*turn, opts),
            Prepared::Replay(task_id, opts) => {
                return self.replay_send(ctx, &task_id, opts).await;
            }
        };
        turn.blocking = !opts.return_immediately;
        let task_id = turn.request.task_id.clone();
        let first = first_answer(self.start_turn(turn).await);
        let payload = match first? {
            First::Message(m) => send_message_response::Payload::Message(m),
            First::Task { mut task, seq } => {
                if !opts.return_immediately && !is_settled(state_of(&task)) {
                    let bus = self.subscribe_late(&task_id).await;
                    let events = self.follow_blocking(ctx, &task_id, seq, bus);
                    let limit = Duration::from_secs(self.inner.config.limits.blocking_timeout_secs);
                    // On timeout the caller gets the task as it is; it keeps running.
                    if let Ok(result) = tokio::time::timeout(limit, settle(&mut task, events)).await
                    {
                        result?;
                    }
                }
                trim_history(&mut task, opts.history_length);
                ctx.span
                    .set("a2a.task.state", state_of(&task).as_str_name());
                send_message_response::Payload::Task(task)
            }
        };
        Ok(SendMessageResponse {
            payload: Some(payload),
        })
    }

    pub async fn send_streaming_message(
        &self,
        ctx: &RequestContext,
        req: SendMessageRequest,
    ) -> Result<EventStream, A2aError> {
        self.require_streaming()?;
        let permit = self.stream_permit(ctx)?;
        let turn = match self.prepare_turn(ctx, req).await? {
            Prepared::Turn(turn, _) => *turn,
            Prepared::Replay(task_id, _) => {
                let stream = self.replay_stream(ctx, &task_id).await?;
                return Ok(stream
                    .map(move |item| {
                        let _permit = &permit;
                        item
                    })
                    .boxed());
            }
        };
        let task_id = turn.request.task_id.clone();
        let bus = self.subscribe_bus(&task_id).await?;
        let first = first_answer(self.start_turn(turn).await);
        let (first_event, tail) = match first? {
            First::Message(m) => (
                SeqEvent {
                    seq: None,
                    event: StreamResponse {
                        payload: Some(Payload::Message(m)),
                    },
                },
                None,
            ),
            First::Task { task, seq } => {
                let tail = (!is_settled(state_of(&task)))
                    .then(|| self.follow_from(ctx, &task_id, seq, bus));
                let event = StreamResponse {
                    payload: Some(Payload::Task(task)),
                };
                (
                    SeqEvent {
                        seq: Some(seq),
                        event,
                    },
                    tail,
                )
            }
        };
        let head = futures::stream::once(async move { Ok(first_event) });
        let stream = match tail {
            Some(tail) => head.chain(tail).boxed(),
            None => head.boxed(),
        };
        Ok(stream
            .map(move |item| {
                let _permit = &permit;
                item
            })
            .boxed())
    }

    /// Validates the request, routes it, loads the task it continues and claims its message id.
    async fn prepare_turn(
        &self,
        ctx: &RequestContext,
        mut req: SendMessageRequest,
    ) -> Result<Prepared, A2aError> {
        // First: what cannot be printed as JSON is refused before anything computes with it.
        validate::finite_send(&req)?;
        #[cfg(feature = "test-panics")]
        if let Some(m) = &req.message {
            crate::panics::test_panic(m, "request");
        }
        let idempotency = &self.inner.config.idempotency;
        // The fingerprint is of the request as sent, before ids are minted below.
        let key = match idempotency::key_of(ctx, &req, idempotency.message_id) {
            Some(key) => Some((key.to_owned(), idempotency::fingerprint(&req)?)),
            None => None,
        };
        let limits = &self.inner.config.limits;
        let checked = validate::message(req.message.as_ref(), limits.max_parts)?;
        super::depth::check_request(checked, req.metadata.as_ref())?;
        // Taken, not copied: the request is done with once validated.
        let mut message = req.message.take().unwrap_or_default();
        let cfg = req.configuration.unwrap_or_default();
        let history_length =
            validate::history_length(cfg.history_length, "configuration.historyLength")?;
        let push_config = match cfg.task_push_notification_config {
            Some(p) => {
                self.require_push()?;
                validate::push_config(
                    &p,
                    "configuration.taskPushNotificationConfig.",
                    &self.inner.push_policy,
                )?;
                Some(p)
            }
            None => None,
        };

        let priority = Priority::from_metadata([message.metadata.as_ref(), req.metadata.as_ref()]);
        // Why the task cannot take this message (terminal, or not asking for input), said only
        // after the key is looked up: a keyed retry whose first send already moved the task on
        // (its answer lost with a replica) is answered from that send, not refused.
        let mut refusal = None;
        let (agent, task, continues, upstream, turn, epoch, upstream_key) =
            if message.task_id.is_empty() {
                let agent = self
                    .inner
                    .agents
                    .route(&req.tenant, &message, req.metadata.as_ref())?
                    .agent;
                if message.context_id.is_empty() {
                    message.context_id = uuid::Uuid::now_v7().to_string();
                } else {
                    validate::required_id(&message.context_id, "message.contextId")?;
                }
                message.task_id = uuid::Uuid::now_v7().to_string();
                // A keyed send's upstream key outlives the task id minted here (review M7).
                let upstream_key = key
                    .as_ref()
                    .map(|(key, _)| idempotency::upstream_key(&ctx.owner, key));
                (agent, None, None, None, 1, 0, upstream_key)
            } else {
                let rec = self.task_to_continue(ctx, &req.tenant, &message).await?;
                refusal = continuable(&rec.task).err();
                message.context_id = rec.task.context_id.clone();
                let agent = self.inner.agents.get(&rec.agent).ok_or_else(|| {
                    A2aError::Internal(format!(
                        "agent {:?} of the task is not configured",
                        rec.agent
                    ))
                })?;
                let turn = turns_of(&rec.task).saturating_add(1);
                let epoch = rec.dispatch.epoch;
                (
                    agent,
                    Some(rec.task),
                    Some(rec.seq),
                    rec.upstream,
                    turn,
                    epoch,
                    rec.upstream_key,
                )
            };
        ctx.span.set_all(|| {
            [
                KeyValue::new("a2a.task.id", message.task_id.clone()),
                KeyValue::new("gen_ai.conversation.id", message.context_id.clone()),
                KeyValue::new("a2a.agent", agent_names(agent.name()).agent),
            ]
        });
        if !req.tenant.is_empty() {
            ctx.span.set_str("a2a.tenant", &req.tenant);
        }
        if let (Some(auth), Some(principal)) = (&self.inner.auth, &ctx.principal) {
            let skills = agent.skills();
            auth.authorize_skills(principal, skills.iter().map(|s| s.id.as_str()))?;
        }
        let modes = agent.input_modes();
        if let Some(p) = message
            .parts
            .iter()
            .find(|p| !p.media_type.is_empty() && !accepts(&modes, &p.media_type))
        {
            return Err(A2aError::ContentTypeNotSupported {
                media_type: p.media_type.clone(),
                agent: agent.name().to_owned(),
            });
        }
        // The agent's limit protects it (an upstream) from all callers together; checked once
        // the send is known to be valid and routed, before anything is claimed or dispatched.
        if let Some(rate) = self.rate_limiter() {
            rate.check_agent(agent.name(), ctx.cost).await?;
        }
        let opts = SendOptions {
            history_length,
            return_immediately: cfg.return_immediately,
        };
        let key = match key {
            None => None,
            Some((key, fingerprint)) => {
                let claim = KeyRequest {
                    owner: ctx.owner.clone(),
                    key,
                    fingerprint,
                    task_id: message.task_id.clone(),
                    after_seq: continues.unwrap_or(0),
                    ttl: Duration::from_secs(idempotency.ttl_secs),
                };
                match self.claim_key(claim).await? {
                    Keyed::Dispatch(hold) => Some(hold),
                    Keyed::Replay(task_id) => return Ok(Prepared::Replay(task_id, opts)),
                }
            }
        };
        // Not a retry of a send that reached the task: refused (a key claimed above is freed
        // when its hold drops).
        if let Some(e) = refusal {
            return Err(e);
        }
        // After the key: a retry that is answered from its first send starts no turn. A refused
        // send drops its key hold, which frees the key.
        let bytes = prost::Message::encoded_len(&message) as u64;
        self.inner
            .quotas
            .check_stored(&*self.inner.store, &ctx.owner, continues.is_none(), bytes)
            .await?;
        let quota = self.inner.quotas.acquire(Quota::RunningTurns, &ctx.owner)?;
        let turn = Turn {
            agent,
            owner: ctx.owner.clone(),
            parent: ctx.span.clone(),
            traceparent: ctx.traceparent.clone(),
            request: AgentRequest {
                task_id: message.task_id.clone(),
                context_id: message.context_id.clone(),
                message,
                task,
                upstream,
                turn,
                upstream_key,
                hops: ctx.hops,
            },
            continues,
            epoch,
            push_config,
            dialect: ctx.dialect,
            cancel: CancellationToken::new(),
            resume: Resume::No,
            priority,
            key,
            blocking: false,
            _quota: quota,
        };
        Ok(Prepared::Turn(Box::new(turn), opts))
    }

    /// The task a message continues: the caller's, with a matching context (whether it can
    /// take the message is [`continuable`]).
    async fn task_to_continue(
        &self,
        ctx: &RequestContext,
        tenant: &str,
        message: &Message,
    ) -> Result<TaskRecord, A2aError> {
        validate::required_id(&message.task_id, "message.taskId")?;
        let rec = self
            .inner
            .store
            .get(&ctx.owner, &message.task_id, None)
            .await
            .map_err(|e| store_error(&message.task_id, e))?
            .filter(|r| tenant.is_empty() || r.agent == tenant)
            .ok_or_else(|| A2aError::task_not_found(&message.task_id))?;
        if !message.context_id.is_empty() && message.context_id != rec.task.context_id {
            return Err(A2aError::invalid_params(
                "message.contextId",
                format!(
                    "does not match the context {} of task {}",
                    rec.task.context_id, rec.task.id
                ),
            ));
        }
        Ok(rec)
    }

    /// Claims the task for this process and spawns the runner.
    pub(super) fn start_turn(&self, turn: Turn) -> oneshot::Receiver<Result<First, A2aError>> {
        let (tx, rx) = oneshot::channel();
        let task_id = turn.request.task_id.clone();
        if self.claim_turn(&task_id, &turn) {
            self.spawn_turn(turn, tx);
            return rx;
        }
        if turn.continues.is_none() {
            let _ = tx.send(Err(already_processing(&task_id)));
            return rx;
        }
        // A message that continues an interrupted task, whose previous turn is still finishing:
        // that turn has committed its interrupted state (the caller may already have it), and
        // only its publish and bookkeeping remain, which take longer while Redis is unreachable.
        // Waiting for it here, instead of refusing, keeps the message from failing for a turn
        // the caller has seen end. A turn that truly runs on (another message won the race)
        // still gets the refusal, and the sequence guard stops any stale write.
        let svc = self.clone();
        tokio::spawn(async move {
            let deadline = tokio::time::Instant::now() + FINISHING_TURN_WAIT;
            while !svc.claim_turn(&task_id, &turn) {
                if tokio::time::Instant::now() >= deadline {
                    let _ = tx.send(Err(already_processing(&task_id)));
                    return;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            svc.spawn_turn(turn, tx);
        });
        rx
    }

    /// Marks `turn`'s task as running in this process; false when a turn of it already runs.
    fn claim_turn(&self, task_id: &str, turn: &Turn) -> bool {
        let mut running = self.inner.running.lock().unwrap_or_else(|e| e.into_inner());
        if running.contains_key(task_id) {
            return false;
        }
        running.insert(task_id.to_owned(), turn.cancel.clone());
        true
    }

    /// Runs a claimed turn in a task of its own, which releases the claim when the turn ends.
    fn spawn_turn(&self, turn: Turn, tx: oneshot::Sender<Result<First, A2aError>>) {
        let task_id = turn.request.task_id.clone();
        let svc = self.clone();
        // The turn outlives its request: its span is a child of the request's SERVER span
        // (named by the request's traceparent), and the events it publishes carry the turn's
        // context. Without traces, events carry the client's traceparent as it came.
        let span = turn_span(&turn);
        let trace = span.traceparent().or_else(|| turn.traceparent.clone());
        let owner = turn.owner.clone();
        let epoch = turn.epoch;
        tokio::spawn(async move {
            // Boxed: a turn's future is large (it holds every state of the runner), and tokio
            // copies a spawned future into its task and copies its stage again as it ends; a box
            // is copied as a pointer.
            let run = Box::pin(svc.run_turn(turn, tx));
            // A panic in the runner (the agent's own is caught inside) would leave the task
            // claimed here and WORKING under this replica's lease for good: it fails the task.
            let panicked = AssertUnwindSafe(span.in_span(TRACEPARENT.scope(trace, run)))
                .catch_unwind()
                .await
                .is_err();
            span.end();
            if panicked {
                svc.fail_after_panic(&task_id, &owner, epoch).await;
            }
            svc.inner
                .running
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&task_id);
        });
    }

    /// After its runner panicked: the task (if it exists and has not ended) ends FAILED, so it
    /// is never left running with no runner. The caller waiting for the turn's first answer
    /// gets an internal error (its channel closed); the turn's key and quota went with it.
    /// Fenced by the turn's `epoch`: a task taken over meanwhile is the other replica's.
    async fn fail_after_panic(&self, task_id: &str, owner: &str, epoch: u64) {
        tracing::error!(task_id, "the task runner panicked; the task fails");
        metrics::counter!("a2a_panics_total", "where" => "turn").increment(1);
        let store = &self.inner.store;
        for _ in 0..3 {
            let rec = match store.get(owner, task_id, Some(0)).await {
                Ok(Some(rec)) if !is_terminal(state_of(&rec.task)) => rec,
                Ok(_) => return,
                Err(e) => {
                    tracing::error!(task_id, error = %e, "cannot read the task of a panicked runner");
                    return;
                }
            };
            let event = StreamResponse {
                payload: Some(Payload::StatusUpdate(TaskStatusUpdateEvent {
                    task_id: task_id.to_owned(),
                    context_id: rec.task.context_id.clone(),
                    status: Some(TaskStatus {
                        state: TaskState::Failed as i32,
                        message: Some(Message {
                            message_id: uuid::Uuid::now_v7().to_string(),
                            context_id: rec.task.context_id.clone(),
                            task_id: task_id.to_owned(),
                            role: Role::Agent as i32,
                            parts: vec![crate::agents::text_part(
                                "the gateway failed while running this task (internal error)"
                                    .to_owned(),
                            )],
                            ..Default::default()
                        }),
                        timestamp: Some(Timestamp::now()),
                    }),
                    metadata: None,
                })),
            };
            let change = TaskChange {
                user_message: None,
                event,
            };
            match store
                .append_fenced(task_id, rec.seq, Some(epoch), vec![change])
                .await
            {
                Ok((events, _)) => {
                    self.publish(task_id, events.into_iter().map(|e| (e.seq, e.event)))
                        .await;
                    return;
                }
                // Written meanwhile (a cancel): read it again.
                Err(StoreError::Conflict { .. }) => continue,
                Err(StoreError::Fenced(_)) => {
                    tracing::warn!(
                        task_id,
                        "the task of the panicked runner was taken over by another replica: left to it"
                    );
                    return;
                }
                Err(e) => {
                    tracing::error!(task_id, error = %e, "cannot fail the task of a panicked runner");
                    return;
                }
            }
        }
    }

    async fn run_turn(&self, mut turn: Turn, first_tx: oneshot::Sender<Result<First, A2aError>>) {
        let key = turn.key.take();
        let _timer = crate::metrics::TurnTimer::start(turn.agent.name());
        let (tx, mut rx) = mpsc::channel(AGENT_EVENT_BUFFER);
        let events = AgentEvents::new(tx, turn.cancel.clone());
        let mut runner = Runner {
            svc: self,
            turn: &turn,
            first_tx: Some(first_tx),
            key,
            current: None,
            pending: Vec::new(),
            upstream: None,
            fenced: false,
        };
        let taken_over = turn.resume != Resume::No;
        match (turn.continues, taken_over, &turn.request.task) {
            (Some(seq), true, Some(task)) => runner.current = Some(Current::of(task, seq)),
            (Some(seq), _, _) => {
                let change = TaskChange {
                    user_message: Some(turn.request.message.clone()),
                    event: runner.status_event(TaskState::Working, None),
                };
                match runner.commit(seq, vec![change]).await {
                    Ok((task, seq)) => runner.announce(task, seq),
                    Err(e) => return runner.fail(e).await,
                }
            }
            (None, _, _) => {}
        }
        // Held until the turn ends: the agent's running slot.
        let _permit = match runner.admit().await {
            Ok(permit) => permit,
            Err(_) if turn.cancel.is_cancelled() => {
                if let Err(e) = runner.settle(TaskState::Canceled, None).await {
                    tracing::error!(task_id = %turn.request.task_id, error = %e, "cannot record the cancel");
                }
                return;
            }
            Err(e) => return runner.fail(e).await,
        };
        if turn.resume != Resume::Reattach
            && let Err(e) = runner.mark_sending().await
        {
            return runner.fail(e).await;
        }
        // The turn's bound (`max_turn_secs`) runs from here: the agent starts on it.
        let max_turn = self.max_turn(turn.agent.name());
        let deadline = async move {
            match max_turn {
                Some(limit) => tokio::time::sleep(limit).await,
                None => std::future::pending().await,
            }
        };
        tokio::pin!(deadline);
        let mut timed_out = false;
        // The agent runs inside this task (no second spawn per turn); a panic in it fails the
        // task instead of killing the runner.
        let run = match turn.resume {
            Resume::Reattach => turn.agent.resume(turn.request.clone(), events),
            Resume::No | Resume::Redispatch => turn.agent.execute(turn.request.clone(), events),
        };
        let agent_run = AssertUnwindSafe(run)
            .catch_unwind()
            .map(|r| r.unwrap_or_else(|_| Err(A2aError::Internal("the agent panicked".into()))));
        tokio::pin!(agent_run);
        let mut agent_result: Option<Result<(), A2aError>> = None;
        loop {
            tokio::select! {
                biased;
                _ = turn.cancel.cancelled() => {
                    let (state, text) = match max_turn.filter(|_| timed_out) {
                        Some(limit) => (TaskState::Failed, Some(format!(
                            "the turn of agent {} exceeded its maximum duration of {} s and was \
                             stopped",
                            turn.agent.name(),
                            limit.as_secs()
                        ))),
                        None => (TaskState::Canceled, None),
                    };
                    if timed_out && !runner.exists() {
                        // Nothing was answered yet: the caller gets the error itself.
                        let text = text.unwrap_or_default();
                        runner.fail(A2aError::Unavailable(text)).await;
                        break;
                    }
                    if let Err(e) = runner.settle(state, text).await {
                        tracing::error!(task_id = %turn.request.task_id, error = %e, "cannot record the end of the turn");
                    }
                    break;
                }
                // Ends the turn as a cancel does (an upstream agent forwards it upstream),
                // but the task fails, saying why.
                () = &mut deadline, if !timed_out => {
                    timed_out = true;
                    tracing::warn!(task_id = %turn.request.task_id, agent = turn.agent.name(), "turn exceeded its maximum duration");
                    metrics::counter!("a2a_turns_timed_out_total", "agent" => turn.agent.name().to_owned())
                        .increment(1);
                    turn.cancel.cancel();
                }
                event = rx.recv() => match event {
                    Some(event) => {
                        let mut outcome = runner.on_event(event).await;
                        // The events the agent has produced meanwhile go into the same write.
                        while matches!(outcome, Ok(false)) && runner.pending.len() < MAX_BURST {
                            let Ok(event) = rx.try_recv() else { break };
                            outcome = runner.on_event(event).await;
                        }
                        let outcome = match outcome {
                            Ok(done) => runner.flush().await.map(|()| done),
                            Err(e) => Err(e),
                        };
                        match outcome {
                            Ok(false) => {}
                            Ok(true) => break,
                            Err(e) => {
                                runner.fail(e).await;
                                break;
                            }
                        }
                    }
                    // Every event handle is gone: the agent has returned.
                    None => {
                        let result = match agent_result.take() {
                            Some(r) => r,
                            None => (&mut agent_run).await,
                        };
                        runner.on_agent_end(result).await;
                        break;
                    }
                },
                // Keep the result; the loop ends once the events it sent are drained.
                result = &mut agent_run, if agent_result.is_none() => agent_result = Some(result),
            }
        }
    }

    /// The events of `task_id` after `after_seq` until it settles, from the bus subscription
    /// `bus` (taken before the snapshot that `after_seq` belongs to).
    pub(super) fn follow_from(
        &self,
        ctx: &RequestContext,
        task_id: &str,
        after_seq: u64,
        bus: futures::stream::BoxStream<'static, a2a_bus::BusItem>,
    ) -> EventStream {
        self.follow_until(ctx, task_id, after_seq, bus, self.inner.shutdown.clone())
    }

    /// What a blocking send waits on: like [`follow_from`](Self::follow_from), but it does not
    /// end at shutdown. A stream ends there (its client resumes elsewhere), while a blocking
    /// send cut short would answer a task that has not settled as if it had; its turn is
    /// drained anyway, so the send answers once the turn settles (or the process exits at the
    /// drain bound, and a client with an `Idempotency-Key` retries on another replica).
    pub(super) fn follow_blocking(
        &self,
        ctx: &RequestContext,
        task_id: &str,
        after_seq: u64,
        bus: futures::stream::BoxStream<'static, a2a_bus::BusItem>,
    ) -> EventStream {
        self.follow_until(ctx, task_id, after_seq, bus, CancellationToken::new())
    }

    fn follow_until(
        &self,
        ctx: &RequestContext,
        task_id: &str,
        after_seq: u64,
        bus: futures::stream::BoxStream<'static, a2a_bus::BusItem>,
        shutdown: CancellationToken,
    ) -> EventStream {
        Follow {
            store: self.inner.store.clone(),
            bus,
            owner: ctx.owner.clone(),
            task_id: task_id.to_owned(),
            after_seq,
            shutdown,
            watch: self.inner.watch.clone(),
        }
        .into_stream()
    }

    /// A bus subscription taken *after* the snapshot the follower starts from, for a blocking
    /// send: most turns settle in their first write (the runner then answers with the settled
    /// task), so subscribing before the turn starts, as a stream must, would cost every send a
    /// channel that is never read. Events published between the snapshot and the subscription
    /// are in the log: the subscription starts with [`BusItem::Lagged`], which makes the
    /// follower read the log once before it waits on the bus. Without a bus the follower
    /// goes on with the log and the process's safety net alone (the task already runs: failing
    /// the send would hide it from its caller).
    ///
    /// [`BusItem::Lagged`]: a2a_bus::BusItem::Lagged
    async fn subscribe_late(
        &self,
        task_id: &str,
    ) -> futures::stream::BoxStream<'static, a2a_bus::BusItem> {
        let read_log = futures::stream::once(async { a2a_bus::BusItem::Lagged });
        match self.inner.bus.subscribe(task_id).await {
            Ok(bus) => read_log.chain(bus).boxed(),
            Err(e) => {
                tracing::warn!(task_id, error = %e, "event bus unavailable; the send follows the task's log");
                read_log.chain(futures::stream::pending()).boxed()
            }
        }
    }

    pub(crate) async fn subscribe_bus(
        &self,
        task_id: &str,
    ) -> Result<futures::stream::BoxStream<'static, a2a_bus::BusItem>, A2aError> {
        self.inner.bus.subscribe(task_id).await.map_err(|e| {
            tracing::warn!(task_id, error = %e, "event bus unavailable");
            A2aError::Unavailable("the event bus is unreachable; retry later".into())
        })
    }

    /// Publishes the events of one commit, in order, under one span (a burst of events is one
    /// write, so it is one publish too): the fast path of the outbox relay (`outbox.rs`), so
    /// `events` must be all the events of the commit, the last one ending it.
    pub(crate) async fn publish(
        &self,
        task_id: &str,
        events: impl IntoIterator<Item = (u64, Arc<StreamResponse>)>,
    ) {
        let mut events = events.into_iter().peekable();
        let Some(&(first, _)) = events.peek() else {
            return;
        };
        // In process, a publish is a channel send: not worth a span (the events carry the
        // turn's context instead).
        let span = if self.inner.bus.is_remote() {
            TraceSpan::start_in_current("publish", SpanKind::Producer, || {
                vec![
                    KeyValue::new("a2a.task.id", task_id.to_owned()),
                    KeyValue::new("a2a.seq", first as i64),
                ]
            })
        } else {
            TraceSpan::NONE
        };
        // Consumers (the push worker) continue the trace from the publish.
        let trace = span
            .traceparent()
            .or_else(|| TRACEPARENT.try_with(Clone::clone).ok().flatten());
        let events: Vec<BusEvent> = events
            .map(|(seq, event)| BusEvent {
                task_id: task_id.to_owned(),
                seq,
                event,
                trace: trace.clone(),
            })
            .collect();
        let last = events.last().map_or(first, |e| e.seq);
        let publish = async {
            #[cfg(feature = "failpoints")]
            crate::failpoints::relay_stall().await;
            // The events are committed, and so is their outbox row: acknowledged, the row goes;
            // not, it stays and is relayed later (followers that miss them read the log).
            match self.inner.bus.publish_all(events).await {
                Ok(()) => {
                    if let Some(outbox) = self.inner.outbox.get() {
                        outbox.published(task_id, last);
                    }
                }
                Err(e) => {
                    metrics::counter!("a2a_outbox_publish_failures_total").increment(1);
                    tracing::warn!(task_id, seq = first, error = %e,
                        "publish failed; the outbox relays it later, followers poll the log");
                }
            }
        };
        span.in_span(publish).await;
        span.end();
    }
}

impl A2aService {
    /// The bound on one turn of `agent`: its `[[agents]] max_turn_secs`, else
    /// `[limits] builtin_max_turn_secs`, else `[limits] max_turn_secs`; `None` when that is 0.
    fn max_turn(&self, agent: &str) -> Option<Duration> {
        let config = &self.inner.config;
        let secs = config
            .agents
            .iter()
            .find(|a| a.name == agent)
            .and_then(|a| a.max_turn_secs)
            .or_else(|| config.limits.builtin_max_turn_secs.get(agent).copied())
            .unwrap_or(config.limits.max_turn_secs);
        (secs > 0).then(|| Duration::from_secs(secs))
    }
}

/// The span of one turn (disabled while traces are off): child of the request's span, a root
/// for a taken-over turn whose request is gone.
fn turn_span(turn: &Turn) -> TraceSpan {
    // Sampled as the request that started it was: traced, or its traceparent's flag.
    if !turn.parent.is_traced() && !telemetry::sample_continuation(turn.traceparent.as_deref()) {
        return TraceSpan::NONE;
    }
    let names = agent_names(turn.agent.name());
    let attributes = vec![
        KeyValue::new("a2a.task.id", turn.request.task_id.clone()),
        KeyValue::new("gen_ai.conversation.id", turn.request.context_id.clone()),
        KeyValue::new("a2a.agent", names.agent),
        KeyValue::new("a2a.turn", i64::from(turn.request.turn)),
        KeyValue::new("a2a.resumed", turn.resume != Resume::No),
    ];
    if turn.parent.is_traced() {
        turn.parent
            .start_child(names.turn, SpanKind::Internal, attributes)
    } else {
        TraceSpan::start_from(
            turn.traceparent.as_deref(),
            names.turn,
            SpanKind::Internal,
            attributes,
        )
    }
}

/// An agent's name and its turn span's name (`turn <agent>`), as `&'static str`s: span names
/// and attribute values that are static are not copied for every span.
pub(crate) struct AgentNames {
    pub agent: &'static str,
    pub turn: &'static str,
}

/// The [`AgentNames`] of `agent`, made once per agent name and kept for the process's life
/// (agents are configured, so there are few).
pub(crate) fn agent_names(agent: &str) -> &'static AgentNames {
    static NAMES: std::sync::RwLock<BTreeMap<String, &'static AgentNames>> =
        std::sync::RwLock::new(BTreeMap::new());
    if let Some(names) = NAMES.read().unwrap_or_else(|e| e.into_inner()).get(agent) {
        return names;
    }
    let mut all = NAMES.write().unwrap_or_else(|e| e.into_inner());
    all.entry(agent.to_owned()).or_insert_with(|| {
        Box::leak(Box::new(AgentNames {
            agent: Box::leak(agent.into()),
            turn: Box::leak(format!("turn {agent}").into_boxed_str()),
        }))
    })
}

/// State of one running turn.
struct Runner<'a> {
    svc: &'a A2aService,
    turn: &'a Turn,
    first_tx: Option<oneshot::Sender<Result<First, A2aError>>>,
    /// The send's idempotency key: kept once the task exists (or the message continuing it is
    /// recorded); dropped with the runner otherwise, which frees it.
    key: Option<KeyHold>,
    /// What the runner needs of its task once it exists (the snapshot goes to the caller).
    current: Option<Current>,
    /// Events staged for the next write.
    pending: Vec<StreamResponse>,
    /// Upstream ids reported before the task existed.
    upstream: Option<UpstreamRef>,
    /// A write was refused because another replica took the task over: the turn stops here
    /// and writes nothing more (its agent, and so its upstream call, is dropped).
    fenced: bool,
}

/// However the runner ends: the owner's remembered open-task figure drops the task it counted
/// when the turn left it terminal as stored, or (a new task) never stored it
/// ([`super::quota::Quotas::task_closed`]).
impl Drop for Runner<'_> {
    fn drop(&mut self) {
        let closed = match &self.current {
            Some(current) => is_terminal(current.state),
            None => self.turn.continues.is_none(),
        };
        if closed {
            self.svc.inner.quotas.task_closed(&self.turn.owner);
        }
    }
}

/// What a runner keeps of its task's last snapshot.
#[derive(Debug, Clone, Copy)]
struct Current {
    seq: u64,
    state: TaskState,
    /// When its status last changed, Unix milliseconds (where a taken-over turn queues).
    since_ms: i64,
}

/// Whether `task` can take another message: it asks for input (interrupted), and is not over.
fn continuable(task: &Task) -> Result<(), A2aError> {
    let state = state_of(task);
    if is_terminal(state) {
        return Err(A2aError::UnsupportedOperation(format!(
            "task {} is {} and accepts no more messages; start a new task in context {}",
            task.id,
            state.as_str_name(),
            task.context_id
        )));
    }
    if !is_interrupted(state) {
        return Err(A2aError::UnsupportedOperation(format!(
            "task {} is {}; it accepts a message once it asks for input",
            task.id,
            state.as_str_name()
        )));
    }
    Ok(())
}

impl Current {
    fn of(task: &Task, seq: u64) -> Self {
        Self {
            seq,
            state: state_of(task),
            since_ms: task
                .status
                .as_ref()
                .and_then(|s| s.timestamp)
                .map_or(0, |t| t.as_millis()),
        }
    }
}

impl Runner<'_> {
    fn task_id(&self) -> &str {
        &self.turn.request.task_id
    }

    fn status_event(&self, state: TaskState, message: Option<Message>) -> StreamResponse {
        StreamResponse {
            payload: Some(Payload::StatusUpdate(TaskStatusUpdateEvent {
                task_id: self.task_id().to_owned(),
                context_id: self.turn.request.context_id.clone(),
                status: Some(TaskStatus {
                    state: state as i32,
                    message,
                    timestamp: Some(Timestamp::now()),
                }),
                metadata: None,
            })),
        }
    }

    /// Whether the task exists or is about to (events are staged for it).
    fn exists(&self) -> bool {
        self.current.is_some() || !self.pending.is_empty()
    }

    /// The task's state after the staged events.
    fn state(&self) -> TaskState {
        let staged = self.pending.iter().rev().find_map(|e| match &e.payload {
            Some(Payload::StatusUpdate(u)) => u.status.as_ref().map(|s| s.state()),
            _ => None,
        });
        staged.unwrap_or_else(|| {
            self.current
                .as_ref()
                .map_or(TaskState::Submitted, |c| c.state)
        })
    }

    /// Tells the waiting caller that the task exists (once), as `task` at `seq`.
    fn announce(&mut self, task: Task, seq: u64) {
        if let Some(key) = self.key.take() {
            key.keep();
        }
        if let Some(tx) = self.first_tx.take() {
            let _ = tx.send(Ok(First::Task { task, seq }));
        }
    }

    /// Staged events as store changes.
    fn take_pending(&mut self) -> Vec<TaskChange> {
        std::mem::take(&mut self.pending)
            .into_iter()
            .map(|event| TaskChange {
                user_message: None,
                event,
            })
            .collect()
    }

    /// Creates the task (sequence 1) with the staged events after it and the send's inline push
    /// config, in one write: a task is never stored without the config its send asked for (a
    /// replica gone between two writes would leave the task running on elsewhere, its webhook
    /// never told). A config past its quota refuses the send: nothing is stored, and the caller
    /// gets the quota error.
    async fn create(&mut self) -> Result<(), A2aError> {
        let req = &self.turn.request;
        let task = Task {
            id: req.task_id.clone(),
            context_id: req.context_id.clone(),
            status: Some(TaskStatus {
                state: TaskState::Submitted as i32,
                message: None,
                timestamp: Some(Timestamp::now()),
            }),
            artifacts: Vec::new(),
            history: vec![req.message.clone()],
            metadata: None,
        };
        // A blocking send whose task this write settles is answered with the settled snapshot
        // (any snapshot at its sequence number is a correct start for the caller, which follows
        // from there if it is not settled after all); otherwise with the task as created.
        let answer_settled =
            self.turn.blocking && self.first_tx.is_some() && is_settled(self.state());
        let created = (!answer_settled).then(|| task.clone());
        let changes = self.take_pending();
        // The config's id is fixed here, so a retry of the write stores the same config.
        let push = self.turn.push_config.as_ref().map(|cfg| InlinePush {
            config: TaskPushNotificationConfig {
                tenant: String::new(),
                id: if cfg.id.is_empty() {
                    uuid::Uuid::now_v7().to_string()
                } else {
                    cfg.id.clone()
                },
                task_id: req.task_id.clone(),
                ..cfg.clone()
            },
            dialect: self.turn.dialect,
            quota: self.svc.push_quota(),
        });
        let new = NewTask {
            upstream_key: req.upstream_key.clone(),
            owner: self.turn.owner.clone(),
            agent: self.turn.agent.name().to_owned(),
            task,
            push,
        };
        let (events, snapshot) = self.create_through_outage(new, changes).await?;
        crate::metrics::committed(self.turn.agent.name(), true, &events);
        let last = events.last().map_or(1, |e| e.seq);
        self.svc
            .publish(self.task_id(), events.into_iter().map(|e| (e.seq, e.event)))
            .await;
        // The caller starts from the task as created, and the later events reach it as events;
        // or, as above, from the settled snapshot.
        self.current = Some(Current::of(&snapshot, last));
        match created {
            Some(task) => self.announce(task, 1),
            None => self.announce(snapshot, last),
        }
        if let Some(ids) = self.upstream.take() {
            self.record_upstream(ids).await?;
        }
        Ok(())
    }

    /// The task's create. One with an inline push config is retried while the store is
    /// unreachable, as the config's own write was when it came second (a send's config is not
    /// dropped for a PostgreSQL restart); one without fails at once, as a new request does
    /// then. A retry refused as a duplicate found its own earlier attempt, committed although
    /// its answer was lost (the task id was minted for this send): it reads it back.
    async fn create_through_outage(
        &self,
        new: NewTask,
        changes: Vec<TaskChange>,
    ) -> Result<(Vec<StoredEvent>, Task), A2aError> {
        let store = &self.svc.inner.store;
        if new.push.is_none() {
            let created = store.create_with(new, changes).await;
            return created.map_err(|e| store_error(self.task_id(), e));
        }
        let (result, retried) = through_outage(
            self.task_id(),
            "the task's write with its push config",
            || store.create_with(new.clone(), changes.clone()),
        )
        .await;
        match result {
            Ok(done) => Ok(done),
            Err(StoreError::Duplicate(_)) if retried => self.read_back(0).await,
            Err(e) => Err(store_error(self.task_id(), e)),
        }
    }

    /// The task's events after `after_seq` and its snapshot, as the store holds them: what a
    /// write whose answer was lost had committed.
    async fn read_back(&self, after_seq: u64) -> Result<(Vec<StoredEvent>, Task), A2aError> {
        let store = &self.svc.inner.store;
        let owner = &self.turn.owner;
        let rec = store
            .get(owner, self.task_id(), None)
            .await
            .map_err(|e| store_error(self.task_id(), e))?
            .ok_or_else(|| A2aError::task_not_found(self.task_id()))?;
        let mut events = store
            .events_after(owner, self.task_id(), after_seq)
            .await
            .map_err(|e| store_error(self.task_id(), e))?;
        // Read apart from the snapshot: what a later writer appended between the two reads is
        // left to it.
        events.retain(|e| e.seq <= rec.seq);
        Ok((events, rec.task))
    }

    async fn record_upstream(&mut self, ids: UpstreamRef) -> Result<(), A2aError> {
        self.svc
            .inner
            .store
            .set_upstream(self.task_id(), ids)
            .await
            .map_err(|e| store_error(self.task_id(), e))
    }

    /// Waits for a running slot when the agent has a queue. A turn that has to wait makes its
    /// task visible first (SUBMITTED), so the caller is answered and can cancel it, and records
    /// its priority for a takeover; a full queue is refused before the task exists. A turn taken
    /// over is readmitted where it was: its priority, and the time its task last changed (when
    /// it was queued, for a turn never sent).
    async fn admit(&mut self) -> Result<Option<crate::upstream::queue::Permit>, A2aError> {
        use crate::upstream::queue::Admission;
        let Some(queue) = self.turn.agent.queue() else {
            return Ok(None);
        };
        let since_ms = match (&self.current, self.turn.resume) {
            (Some(current), Resume::Reattach | Resume::Redispatch) => Some(current.since_ms),
            _ => None,
        };
        let admission = match since_ms {
            Some(ms) => queue.readmit(self.turn.priority, ms),
            None => queue.admit(self.turn.priority)?,
        };
        let rx = match admission {
            Admission::Now(permit) => return Ok(Some(permit)),
            Admission::Queued(rx) => rx,
        };
        tracing::debug!(task_id = %self.task_id(), priority = self.turn.priority.as_str(), "turn queued");
        if self.current.is_none() {
            self.create().await?;
        }
        if self.turn.resume == Resume::No {
            let mark = DispatchMark::Queued {
                priority: self.turn.priority.rank(),
            };
            // Without it a takeover dispatches the turn at NORMAL priority: not worth failing it.
            if let Err(e) = self
                .svc
                .inner
                .store
                .mark_dispatch(self.task_id(), mark)
                .await
            {
                tracing::warn!(task_id = %self.task_id(), error = %e, "cannot record the queued turn's priority");
            }
        }
        tokio::select! {
            permit = rx => permit
                .map(Some)
                .map_err(|_| A2aError::Internal("the dispatch queue closed".into())),
            _ = self.turn.cancel.cancelled() => Err(A2aError::Internal("canceled while queued".into())),
        }
    }

    /// Records, before an upstream agent is sent the turn of an existing task, that its sending
    /// begins: a replica taking the task over can then tell a turn never sent (it dispatches it)
    /// from one whose outcome upstream it cannot know. (A new task's first turn that needed no
    /// wait is sent before the task exists; nothing is left to take over if the replica dies
    /// then.)
    ///
    /// Nothing is sent while this replica's dispatch lease has lapsed (it waits for a renewal),
    /// and the mark carries the turn's epoch: a task taken over meanwhile is not sent from here.
    async fn mark_sending(&mut self) -> Result<(), A2aError> {
        if !self.turn.agent.is_remote() {
            return Ok(());
        }
        if !self.svc.inner.lease.wait_live(&self.turn.cancel).await {
            return Err(A2aError::Internal("canceled while the lease lapsed".into()));
        }
        if self.current.is_none() {
            return Ok(());
        }
        let mark = DispatchMark::Sending {
            turn: self.turn.request.turn,
            epoch: self.turn.epoch,
        };
        let marked = self
            .svc
            .inner
            .store
            .mark_dispatch(self.task_id(), mark)
            .await;
        marked.map_err(|e| self.store_failure(e))
    }

    /// A store error of this turn's write as the turn's error; a fenced one (the task was taken
    /// over) is remembered, so the turn stops without writing anything more.
    fn store_failure(&mut self, e: StoreError) -> A2aError {
        if matches!(e, StoreError::Fenced(_)) {
            self.fenced = true;
        }
        store_error(self.task_id(), e)
    }

    /// Stores changes as one write, then publishes their events; the snapshot after them and
    /// its sequence number.
    async fn commit(
        &mut self,
        expected_seq: u64,
        changes: Vec<TaskChange>,
    ) -> Result<(Task, u64), A2aError> {
        #[cfg(feature = "test-panics")]
        crate::panics::test_panic(&self.turn.request.message, "turn");
        let (events, snapshot) = self.append_through_outage(expected_seq, changes).await?;
        crate::metrics::committed(self.turn.agent.name(), false, &events);
        let last = events.last().map_or(expected_seq, |e| e.seq);
        self.svc
            .publish(self.task_id(), events.into_iter().map(|e| (e.seq, e.event)))
            .await;
        self.current = Some(Current::of(&snapshot, last));
        Ok((snapshot, last))
    }

    /// The turn's write, fenced by the turn's epoch, retried while the store is unreachable (a
    /// PostgreSQL restart, a short outage) for up to [`STORE_OUTAGE_PATIENCE`]: the turn then
    /// goes on where it was. Failing
    /// at once would fail the task with a write that cannot be stored either, leaving it
    /// WORKING on a replica that holds its lease, so never taken over. A retry that finds the
    /// sequence moved by exactly this write's events found its own earlier attempt, committed
    /// although its answer was lost (this runner is the task's only writer): it reads it back.
    async fn append_through_outage(
        &mut self,
        expected_seq: u64,
        changes: Vec<TaskChange>,
    ) -> Result<(Vec<StoredEvent>, Task), A2aError> {
        let store = &self.svc.inner.store;
        let written = changes.len() as u64;
        let epoch = Some(self.turn.epoch);
        let (result, retried) = through_outage(self.task_id(), "the turn's write", || {
            store.append_fenced(self.task_id(), expected_seq, epoch, changes.clone())
        })
        .await;
        match result {
            Ok(done) => Ok(done),
            Err(StoreError::Conflict { actual, .. })
                if retried && actual == expected_seq + written =>
            {
                self.read_back(expected_seq).await
            }
            Err(e) => Err(self.store_failure(e)),
        }
    }

    /// Stages `event` for the next write. Events an agent produces in a burst (an echo's whole
    /// answer, chunks sent faster than the store commits) are stored together: one write, one
    /// commit and one sequence-guard check instead of one each.
    fn stage(&mut self, event: StreamResponse) {
        self.pending.push(event);
    }

    /// Writes the staged events (creating the task first if needed).
    async fn flush(&mut self) -> Result<(), A2aError> {
        match &self.current {
            _ if self.pending.is_empty() => Ok(()),
            None => self.create().await,
            Some(current) => {
                let seq = current.seq;
                let changes = self.take_pending();
                self.commit(seq, changes).await.map(drop)
            }
        }
    }

    /// Stores `event` on the task now (creating it first if needed).
    async fn apply(&mut self, event: StreamResponse) -> Result<(), A2aError> {
        self.stage(event);
        self.flush().await
    }

    /// Ends the turn in `state` (used for cancel and agent failures).
    async fn settle(&mut self, state: TaskState, text: Option<String>) -> Result<(), A2aError> {
        // Taken over: the end of the turn is the other replica's to write.
        if !self.exists() || self.fenced {
            return Ok(());
        }
        let message = text.map(|t| Message {
            message_id: uuid::Uuid::now_v7().to_string(),
            context_id: self.turn.request.context_id.clone(),
            task_id: self.task_id().to_owned(),
            role: Role::Agent as i32,
            parts: vec![crate::agents::text_part(t)],
            ..Default::default()
        });
        let event = self.status_event(state, message);
        self.apply(event).await
    }

    /// Handles one agent event; `Ok(true)` when the turn is over.
    async fn on_event(&mut self, event: AgentEvent) -> Result<bool, A2aError> {
        let req = &self.turn.request;
        // An upstream over gRPC can send what no JSON reader of the task could print: the
        // turn fails, saying where, instead of storing a task nobody can read.
        let non_finite = match &event {
            AgentEvent::Message(m) => validate::non_finite_message(m, "message"),
            AgentEvent::Status {
                message: Some(m), ..
            } => validate::non_finite_message(m, "status.message"),
            AgentEvent::Artifact { artifact, .. } => {
                validate::non_finite_artifact(artifact, "artifact")
            }
            _ => None,
        };
        if let Some(field) = non_finite {
            metrics::counter!("a2a_agent_events_refused_total", "agent" => self.turn.agent.name().to_owned(), "reason" => "non_finite")
                .increment(1);
            return Err(A2aError::InvalidAgentResponse(format!(
                "agent {} sent an event whose {field} {}",
                self.turn.agent.name(),
                validate::NON_FINITE
            )));
        }
        let (message, artifact) = match &event {
            AgentEvent::Message(m)
            | AgentEvent::Status {
                message: Some(m), ..
            } => (Some(m), None),
            AgentEvent::Artifact { artifact, .. } => (None, Some(artifact)),
            _ => (None, None),
        };
        if super::depth::agent_event_too_deep(message, artifact) {
            metrics::counter!("a2a_agent_events_refused_total", "agent" => self.turn.agent.name().to_owned(), "reason" => "too_deep")
                .increment(1);
            return Err(A2aError::InvalidAgentResponse(format!(
                "agent {} sent an event whose values nest more than {} levels deep",
                self.turn.agent.name(),
                super::depth::MAX_VALUE_DEPTH
            )));
        }
        let stream_event = match event {
            AgentEvent::Upstream(ids) => {
                // Creating the task records them; an existing task records them now.
                self.upstream = Some(ids);
                match self.current {
                    None => self.create().await?,
                    Some(_) => self.flush().await?,
                }
                if let Some(ids) = self.upstream.take() {
                    self.record_upstream(ids).await?;
                }
                return Ok(false);
            }
            AgentEvent::Message(mut m) if !self.exists() => {
                m.context_id = req.context_id.clone();
                m.task_id.clear();
                m.role = Role::Agent as i32;
                if let Some(tx) = self.first_tx.take() {
                    let _ = tx.send(Ok(First::Message(m)));
                }
                return Ok(true);
            }
            AgentEvent::Message(mut m) => {
                m.context_id = req.context_id.clone();
                m.task_id = req.task_id.clone();
                StreamResponse {
                    payload: Some(Payload::Message(m)),
                }
            }
            AgentEvent::Status { state, message } => {
                let from = self.state();
                if !can_transition(from, state) {
                    return Err(A2aError::InvalidAgentResponse(format!(
                        "agent {} moved task {} from {} to {}",
                        self.turn.agent.name(),
                        req.task_id,
                        from.as_str_name(),
                        state.as_str_name()
                    )));
                }
                self.status_event(state, message)
            }
            AgentEvent::Artifact {
                artifact,
                append,
                last_chunk,
            } => {
                if artifact.artifact_id.is_empty() || artifact.parts.is_empty() {
                    return Err(A2aError::InvalidAgentResponse(format!(
                        "agent {} sent an artifact without an id or parts",
                        self.turn.agent.name()
                    )));
                }
                StreamResponse {
                    payload: Some(Payload::ArtifactUpdate(TaskArtifactUpdateEvent {
                        task_id: req.task_id.clone(),
                        context_id: req.context_id.clone(),
                        artifact: Some(artifact),
                        append,
                        last_chunk,
                        metadata: None,
                    })),
                }
            }
        };
        // What an upstream sends is stored only if it prints (an enum number outside its enum
        // does not): the check costs one serialisation into nothing, for remote agents only.
        if self.turn.agent.is_remote()
            && let Err(e) = serde_json::to_writer(std::io::sink(), &stream_event)
        {
            metrics::counter!("a2a_agent_events_refused_total", "agent" => self.turn.agent.name().to_owned(), "reason" => "unprintable")
                .increment(1);
            return Err(A2aError::InvalidAgentResponse(format!(
                "agent {} sent an event with no JSON form: {e}",
                self.turn.agent.name()
            )));
        }
        self.stage(stream_event);
        Ok(is_settled(self.state()))
    }

    /// The agent returned without settling the task.
    async fn on_agent_end(&mut self, outcome: Result<(), A2aError>) {
        let error = match outcome {
            Ok(()) if !self.exists() => A2aError::InvalidAgentResponse(format!(
                "agent {} ended its turn without a reply",
                self.turn.agent.name()
            )),
            Ok(()) => A2aError::InvalidAgentResponse(format!(
                "agent {} ended its turn without a final state",
                self.turn.agent.name()
            )),
            Err(e) => e,
        };
        self.fail(error).await;
    }

    /// Whether the stored task is already terminal (ended by another writer).
    async fn ended_elsewhere(&self) -> bool {
        let store = &self.svc.inner.store;
        matches!(
            store.get(&self.turn.owner, self.task_id(), Some(0)).await,
            Ok(Some(rec)) if is_terminal(state_of(&rec.task))
        )
    }

    /// Reports `error` to the caller if the task does not exist yet, else ends the task FAILED.
    async fn fail(&mut self, error: A2aError) {
        if self.fenced {
            tracing::warn!(task_id = %self.task_id(), agent = self.turn.agent.name(), epoch = self.turn.epoch, "the turn stops: another replica took its task over (stale dispatch epoch); nothing more is written or sent from here");
            metrics::counter!("a2a_turns_fenced_total", "agent" => self.turn.agent.name().to_owned())
                .increment(1);
            if let Some(tx) = self.first_tx.take() {
                let _ = tx.send(Err(error));
            }
            return;
        }
        if !self.exists()
            && let Some(tx) = self.first_tx.take()
        {
            let _ = tx.send(Err(error));
            return;
        }
        if self.ended_elsewhere().await {
            // A CancelTask on another replica wrote the task's end while this turn ran: its
            // write conflicted, and there is nothing to fail.
            tracing::info!(task_id = %self.task_id(), error = %error, "the turn stops: its task was ended concurrently");
            return;
        }
        tracing::warn!(task_id = %self.task_id(), error = %error, "task failed");
        if let Err(e) = self
            .settle(TaskState::Failed, Some(error.to_string()))
            .await
        {
            tracing::error!(task_id = %self.task_id(), error = %e, "cannot record the failure");
        }
    }
}

/// How long a turn waits for an unreachable task store before its write fails (see
/// `Runner::append_through_outage`); longer than a database restart or failover.
const STORE_OUTAGE_PATIENCE: Duration = Duration::from_secs(60);

/// Runs a store call that must not be lost (a turn's write, freeing an idempotency key),
/// retrying it while the store is unreachable (a PostgreSQL restart, a short outage) for up to
/// [`STORE_OUTAGE_PATIENCE`]; the result, and whether it was retried. `what` names the call in
/// the log.
pub(super) async fn through_outage<T, F, Fut>(
    task_id: &str,
    what: &str,
    mut call: F,
) -> (Result<T, StoreError>, bool)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, StoreError>>,
{
    let deadline = tokio::time::Instant::now() + STORE_OUTAGE_PATIENCE;
    let mut pause = Duration::from_millis(100);
    let mut retried = false;
    loop {
        match call().await {
            Err(StoreError::Unavailable(e)) if tokio::time::Instant::now() < deadline => {
                tracing::warn!(task_id, error = %e, "task store unavailable; {what} is retried");
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(1));
                retried = true;
            }
            other => return (other, retried),
        }
    }
}

/// How long a message continuing an interrupted task waits for the task's previous turn to
/// finish in this process (see `A2aService::start_turn`).
const FINISHING_TURN_WAIT: Duration = Duration::from_secs(5);

fn already_processing(task_id: &str) -> A2aError {
    A2aError::UnsupportedOperation(format!("task {task_id} is already processing a message"))
}
