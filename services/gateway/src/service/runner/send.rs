//! The send entry points (SendMessage, SendStreamingMessage) and the preparation of a turn:
//! validation, routing, the task it continues, its idempotency key and the owner's quotas.

use std::time::Duration;

use a2a_process::telemetry::KeyValue;
use a2a_store::{KeyRequest, TaskRecord};
use a2a_types::A2aError;
use a2a_types::state::{is_interrupted, is_settled, is_terminal, state_of, trim_history};
use a2a_types::v1::{
    Message, SendMessageRequest, SendMessageResponse, StreamResponse, Task, send_message_response,
    stream_response::Payload,
};
use futures::StreamExt;
use tokio_util::sync::CancellationToken;

use super::super::follow::settle;
use super::super::idempotency::{self, Keyed};
use super::super::quota::Quota;
use super::super::{A2aService, EventStream, RequestContext, SeqEvent, store_error, validate};
use super::spawn::agent_names;
use super::{First, Resume, SendOptions, Turn, first_answer, turns_of};
use crate::agents::queue::Priority;
use crate::agents::{AgentRequest, accepts};

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
        // Boxed once here: a send's state machine is the largest of the service's futures, and
        // unboxed it would make every binding's handler future as large, which the router's
        // layers then copy several times per request (one move of this box instead).
        Box::pin(self.send_message_now(ctx, req)).await
    }

    async fn send_message_now(
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
                    let limit = self.inner.config.blocking_timeout;
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
        // Boxed for the reason `send_message` is.
        Box::pin(self.send_streaming_message_now(ctx, req)).await
    }

    async fn send_streaming_message_now(
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
            crate::test_panics::test_panic(m, "request");
        }
        let config = &self.inner.config;
        // The fingerprint is of the request as sent, before ids are minted below.
        let key = match idempotency::key_of(ctx, &req, config.message_id_keys) {
            Some(key) => Some((key.to_owned(), idempotency::fingerprint(&req)?)),
            None => None,
        };
        let checked = validate::message(req.message.as_ref(), config.max_parts)?;
        super::super::depth::check_request(checked, req.metadata.as_ref())?;
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
                    &config.push_policy,
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
        if let (Some(policy), Some(principal)) = (&self.inner.skills, &ctx.principal) {
            let skills = agent.skills();
            policy.authorize(principal, skills.iter().map(|s| s.id.as_str()))?;
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
        if let Some(limit) = &self.inner.agent_limit {
            limit.check(agent.name(), ctx.cost).await?;
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
                    ttl: Duration::from_secs(config.idempotency_ttl_secs),
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
