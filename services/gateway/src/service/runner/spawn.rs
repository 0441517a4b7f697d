//! Running a turn: the task is claimed in this process (one turn at a time), the turn runs in a
//! task of its own under its span, and its agent runs inside it, raced against the turn's
//! cancel and its maximum duration, its events handed to the [`Runner`].

use std::collections::BTreeMap;
use std::panic::AssertUnwindSafe;
use std::time::Duration;

use a2a_process::telemetry::{self, KeyValue, SpanKind, TraceSpan};
use a2a_store::{StoreError, TaskChange};
use a2a_types::A2aError;
use a2a_types::state::{is_terminal, state_of};
use a2a_types::v1::{
    Message, Role, StreamResponse, TaskState, TaskStatus, TaskStatusUpdateEvent,
    stream_response::Payload,
};
use a2a_types::wkt::Timestamp;
use futures::FutureExt;
use tokio::sync::{mpsc, oneshot};

use super::super::A2aService;
use super::state::{Current, Runner};
use super::{AGENT_EVENT_BUFFER, First, MAX_BURST, Resume, TRACEPARENT, Turn};
use crate::agents::AgentEvents;

impl A2aService {
    /// Claims the task for this process and spawns the runner.
    pub(in crate::service) fn start_turn(
        &self,
        turn: Turn,
    ) -> oneshot::Receiver<Result<First, A2aError>> {
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
            // is copied as a pointer. Made here, in the task: boxing it before the spawn, in a
            // wrapper future, measured five copies of the whole state per turn instead of one.
            let run = Box::pin(svc.run_turn(turn, tx));
            // A panic in the runner (the agent's own is caught inside) would leave the task
            // claimed here and WORKING under this replica's lease for good: it fails the task.
            let panicked = AssertUnwindSafe(span.in_span(TRACEPARENT.scope(trace, run)))
                .catch_unwind()
                .await
                .is_err();
            span.end();
            if panicked {
                // Boxed too: inline, its state would make every turn's task larger.
                Box::pin(svc.fail_after_panic(&task_id, &owner, epoch)).await;
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
                    self.publish(task_id, events).await;
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
            create_unknown: false,
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
            // A create whose outcome is unknown is settled by `fail` even when canceled.
            Err(_) if turn.cancel.is_cancelled() && !runner.create_unknown => {
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
        let max_turn = self.inner.config.turns.of(turn.agent.name());
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

/// How long a message continuing an interrupted task waits for the task's previous turn to
/// finish in this process (see `A2aService::start_turn`).
const FINISHING_TURN_WAIT: Duration = Duration::from_secs(5);

fn already_processing(task_id: &str) -> A2aError {
    A2aError::UnsupportedOperation(format!("task {task_id} is already processing a message"))
}
