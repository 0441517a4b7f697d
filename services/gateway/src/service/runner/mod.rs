//! SendMessage and SendStreamingMessage: prepare a turn (validate, route, load the task being
//! continued), then run it in a task of its own so that neither a disconnecting client nor
//! `returnImmediately` stops the agent. The runner is the only writer of its task while it runs:
//! it creates the task on the agent's first event, commits every event (store first, then bus)
//! and stops at the first terminal or interrupted state or when canceled.
//!
//! - `send`: the entry points and the turn's preparation (validation, routing, the task
//!   continued, the idempotency key, the quotas).
//! - `spawn`: claiming the task in this process, spawning the turn and running its agent.
//! - `subscribe`: what callers follow a turn through (bus subscriptions, the task's log), and
//!   the publish of each commit.
//! - `state`, `commit`, `events`: the single writer of a running turn's task (`Runner`): what
//!   it knows of the task and how the turn ends (fenced, failed, canceled); its writes (the
//!   create with the inline push config, fenced appends, store outages); the agent's events
//!   turned into task events.

mod commit;
mod events;
mod send;
mod spawn;
mod state;
mod subscribe;
#[cfg(test)]
mod tests;

use std::sync::Arc;
use std::time::Duration;

use a2a_process::telemetry::TraceSpan;
use a2a_store::StoreError;
use a2a_types::A2aError;
use a2a_types::v1::{Message, Role, Task, TaskPushNotificationConfig};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use super::idempotency::KeyHold;
use super::quota::QuotaGuard;
use crate::agents::queue::Priority;
use crate::agents::{Agent, AgentRequest};

/// Events an agent may have in flight before it waits for the runner.
const AGENT_EVENT_BUFFER: usize = 32;
/// Most events stored in one write (see `Runner::stage`).
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
/// runs, and the turn comes back into the agent's queue where it was (`Runner::admit`).
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
