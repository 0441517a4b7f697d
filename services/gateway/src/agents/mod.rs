//! Agents: what a task is routed to. Built-in agents live here; upstream A2A agents
//! (`crate::upstream`) implement the same trait. An agent reports progress through [`AgentEvents`]; the service's task runner turns
//! each event into a stored, published task event, so agents never touch the store or the bus.

mod echo;
pub mod queue;
pub mod routing;
mod scenario;

use std::collections::HashMap;
use std::sync::Arc;

use a2a_store::UpstreamRef;
use a2a_types::A2aError;
use a2a_types::v1::{AgentCard, AgentSkill, Artifact, Message, Task, TaskState};
use async_trait::async_trait;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

pub use echo::EchoAgent;
pub use scenario::ScenarioAgent;

/// One turn of work: a new task, or a client message continuing an interrupted one.
#[derive(Debug, Clone)]
pub struct AgentRequest {
    pub task_id: String,
    pub context_id: String,
    /// The client's message (with task and context ids filled in).
    pub message: Message,
    /// The task snapshot when the message continues an existing task (or a turn is resumed).
    pub task: Option<Task>,
    /// The upstream agent's ids of the task, once known.
    pub upstream: Option<UpstreamRef>,
    /// Which message of the task this turn answers (1 = the first): with the task id, it names
    /// the turn the same way on every replica (an upstream's idempotency key).
    pub turn: u32,
    /// What the turn's upstream idempotency key derives from instead of the task id: for a
    /// task created by a keyed send, a digest of the caller's (owner, key)
    /// (`service::idempotency::upstream_key`), stored with the task.
    pub upstream_key: Option<String>,
    /// The `A2A-Hop-Count` of the request that started the turn (0 for a taken-over turn):
    /// an upstream send carries one more.
    pub hops: u32,
}

#[derive(Debug, Clone, PartialEq)]
pub enum AgentEvent {
    /// A direct reply; only valid as the first and only event of a new task's turn.
    Message(Message),
    Status {
        state: TaskState,
        message: Option<Message>,
    },
    Artifact {
        artifact: Artifact,
        append: bool,
        last_chunk: bool,
    },
    /// An upstream agent named its task: the runner creates the gateway task (if it does not
    /// exist yet) and stores these ids beside it.
    Upstream(UpstreamRef),
}

/// The agent's side of a turn: a bounded channel to the task runner and the turn's cancellation.
#[derive(Clone)]
pub struct AgentEvents {
    tx: mpsc::Sender<AgentEvent>,
    cancel: CancellationToken,
}

impl AgentEvents {
    pub(crate) fn new(tx: mpsc::Sender<AgentEvent>, cancel: CancellationToken) -> Self {
        Self { tx, cancel }
    }

    /// Sends one event; fails once the runner has stopped listening (task settled or canceled),
    /// which tells the agent to stop.
    pub async fn send(&self, event: AgentEvent) -> Result<(), A2aError> {
        self.tx
            .send(event)
            .await
            .map_err(|_| A2aError::Internal("the task runner stopped listening".into()))
    }

    pub async fn status(&self, state: TaskState, message: Option<Message>) -> Result<(), A2aError> {
        self.send(AgentEvent::Status { state, message }).await
    }

    pub async fn artifact(
        &self,
        artifact: Artifact,
        append: bool,
        last_chunk: bool,
    ) -> Result<(), A2aError> {
        self.send(AgentEvent::Artifact {
            artifact,
            append,
            last_chunk,
        })
        .await
    }

    pub async fn reply(&self, message: Message) -> Result<(), A2aError> {
        self.send(AgentEvent::Message(message)).await
    }

    /// Resolves when the task is canceled (upstream agents forward the cancel from here).
    pub async fn cancelled(&self) {
        self.cancel.cancelled().await
    }

    /// The turn's cancellation, for work that must outlive the turn's future (the runner drops
    /// the agent's future on cancel).
    pub fn cancel_token(&self) -> CancellationToken {
        self.cancel.clone()
    }
}

/// What routing knows of an agent that can be unavailable (upstream agents).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AgentStatus {
    pub healthy: bool,
    /// Recent call success, 0..1.
    pub availability: f64,
    /// Running plus queued turns over the concurrency limit (0 = idle).
    pub load: f64,
    pub weight: f64,
    /// Turns waiting for a slot (`a2a_upstream_queue_depth`).
    pub queued: usize,
}

#[async_trait]
pub trait Agent: Send + Sync + 'static {
    fn name(&self) -> &str;
    fn description(&self) -> &str;
    fn skills(&self) -> Vec<AgentSkill>;
    /// Media types accepted in message parts (`type/*` and `*/*` wildcards allowed).
    fn input_modes(&self) -> Vec<String>;
    fn output_modes(&self) -> Vec<String>;
    /// Runs one turn. An error before the first event is returned to the caller; after it, the
    /// task ends FAILED with the error's message.
    async fn execute(&self, request: AgentRequest, events: AgentEvents) -> Result<(), A2aError>;

    /// Continues a turn that another replica was running when it died (`request.task` is the
    /// stored snapshot). Built-in agents run in the process that died, so their turn is lost:
    /// the task ends FAILED.
    async fn resume(&self, request: AgentRequest, _events: AgentEvents) -> Result<(), A2aError> {
        Err(A2aError::Internal(format!(
            "the gateway replica running task {} stopped; agent {} cannot resume it",
            request.task_id,
            self.name()
        )))
    }

    /// Whether turns run on another server (an upstream agent): the runner then records when it
    /// begins sending one, so that a takeover can tell a turn never sent from one being sent.
    fn is_remote(&self) -> bool {
        false
    }

    /// Whether a turn may be sent again after a takeover without running twice (the upstream
    /// honours the idempotency key every send carries).
    fn resends_idempotently(&self) -> bool {
        false
    }

    /// Health, availability and load for routing; `None` = always available, never scored
    /// (built-in agents).
    fn status(&self) -> Option<AgentStatus> {
        None
    }

    /// The bounded, prioritised queue turns wait in; `None` = no limit.
    fn queue(&self) -> Option<Arc<queue::DispatchQueue>> {
        None
    }

    /// The A2A version the agent speaks (an upstream may speak 0.3; the gateway translates).
    fn protocol(&self) -> &str {
        a2a_types::PROTOCOL_VERSION
    }

    /// The upstream's own card (the source of the agent's rewritten card).
    fn upstream_card(&self) -> Option<AgentCard> {
        None
    }

    /// Resolves once the agent is ready to be routed to or has tried (at most `limit`).
    async fn wait_ready(&self, _limit: std::time::Duration) {}
}

/// Whether `media_type` (parameters ignored, case-insensitive) matches one of `modes`.
pub fn accepts(modes: &[String], media_type: &str) -> bool {
    let wanted = media_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    let (wanted_type, _) = wanted.split_once('/').unwrap_or((&wanted, ""));
    modes.iter().any(|m| {
        let m = m.to_ascii_lowercase();
        m == "*/*"
            || m == wanted
            || m.strip_suffix("/*")
                .is_some_and(|prefix| prefix == wanted_type)
    })
}

/// The agents this gateway routes to, by name, with the default for messages without a tenant.
///
/// The table is shared by every clone and changes at run time (the admin API adds and
/// removes upstream agents): readers take a snapshot.
#[derive(Clone)]
pub struct AgentRegistry {
    table: Arc<std::sync::RwLock<Table>>,
    default: String,
    /// Built-in agents left out by `builtin_agents`: a message naming one is refused saying so.
    disabled: Vec<String>,
    /// Bumped whenever an agent's card or health changes (cards are rebuilt from it).
    changes: Arc<watch::Sender<u64>>,
}

impl AgentRegistry {
    /// The built-in agents: `echo` (the default) and `scenario`.
    pub fn builtin() -> Self {
        Self::with_builtins(&Self::BUILTIN.map(str::to_owned))
    }

    /// The built-in agents named in `enabled` (`builtin_agents`); `echo` stays the default
    /// name, so a registry without it needs `set_default`.
    pub fn with_builtins(enabled: &[String]) -> Self {
        let mut r = Self {
            table: Arc::default(),
            default: "echo".into(),
            disabled: Vec::new(),
            changes: Arc::new(watch::channel(0).0),
        };
        let builtins: [Arc<dyn Agent>; 2] = [Arc::new(EchoAgent), Arc::new(ScenarioAgent)];
        for agent in builtins {
            if enabled.iter().any(|n| n == agent.name()) {
                r.add(agent);
            } else {
                r.disabled.push(agent.name().to_owned());
            }
        }
        r
    }

    /// Whether `name` is a built-in agent this gateway leaves out (`builtin_agents`).
    pub fn is_disabled(&self, name: &str) -> bool {
        self.disabled.iter().any(|n| n == name)
    }

    /// Names of the built-in agents (upstream agents may not reuse them).
    pub const BUILTIN: [&str; 2] = ["echo", "scenario"];

    pub fn add(&mut self, agent: Arc<dyn Agent>) {
        let name = agent.name().to_owned();
        self.disabled.retain(|n| *n != name);
        self.insert(agent);
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Table> {
        self.table.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Table> {
        self.table.write().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds (or replaces) an agent at run time; the cards are rebuilt.
    pub fn insert(&self, agent: Arc<dyn Agent>) {
        let name = agent.name().to_owned();
        {
            let mut t = self.write();
            if t.agents.insert(name.clone(), agent).is_none() {
                t.order.push(name);
            }
            t.rebuild();
        }
        self.changes.send_modify(|v| *v += 1);
    }

    /// Removes an agent at run time (no new turn reaches it; running turns hold their own
    /// reference and finish); the cards are rebuilt.
    pub fn remove(&self, name: &str) -> Option<Arc<dyn Agent>> {
        let removed = {
            let mut t = self.write();
            t.order.retain(|n| n != name);
            let removed = t.agents.remove(name);
            t.rebuild();
            removed
        };
        self.changes.send_modify(|v| *v += 1);
        removed
    }

    /// The name of the default agent.
    pub fn default_name(&self) -> &str {
        &self.default
    }

    /// Where agents report card and health changes.
    pub fn change_sender(&self) -> watch::Sender<u64> {
        self.changes.as_ref().clone()
    }

    pub fn changes(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }

    pub fn set_default(&mut self, name: &str) -> Result<(), String> {
        if self.is_disabled(name) {
            return Err(format!(
                "default agent {name:?} is a built-in agent that builtin_agents leaves out"
            ));
        }
        if !self.read().agents.contains_key(name) {
            return Err(format!("default agent {name:?} is not a known agent"));
        }
        self.default = name.to_owned();
        Ok(())
    }

    pub fn default_agent(&self) -> Option<Arc<dyn Agent>> {
        self.read().agents.get(&self.default).cloned()
    }

    pub fn get(&self, name: &str) -> Option<Arc<dyn Agent>> {
        self.read().agents.get(name).cloned()
    }

    /// Agents in registration order (a snapshot).
    pub fn iter(&self) -> impl Iterator<Item = Arc<dyn Agent>> + use<> {
        let snapshot = self.read().snapshot.clone();
        (0..snapshot.len()).map(move |i| snapshot[i].clone())
    }
}

/// The agents by name, and their registration order.
#[derive(Default)]
struct Table {
    agents: HashMap<String, Arc<dyn Agent>>,
    order: Vec<String>,
    /// The agents in `order`, rebuilt on every change: routing reads it for each message
    /// without a HashMap lookup or an allocation per agent.
    snapshot: Arc<[Arc<dyn Agent>]>,
}

impl Table {
    fn rebuild(&mut self) {
        self.snapshot = self
            .order
            .iter()
            .filter_map(|n| self.agents.get(n).cloned())
            .collect();
    }
}

/// A text part (used by the built-in agents).
pub fn text_part(text: impl Into<String>) -> a2a_types::v1::Part {
    a2a_types::v1::Part {
        content: Some(a2a_types::v1::part::Content::Text(text.into())),
        ..Default::default()
    }
}

/// A message from the agent in the request's context.
pub fn agent_message(request: &AgentRequest, text: impl Into<String>) -> Message {
    Message {
        message_id: uuid::Uuid::now_v7().to_string(),
        context_id: request.context_id.clone(),
        task_id: request.task_id.clone(),
        role: a2a_types::v1::Role::Agent as i32,
        parts: vec![text_part(text)],
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn media_type_matching() {
        let modes = vec!["text/*".to_owned(), "application/json".to_owned()];
        assert!(accepts(&modes, "text/plain"));
        assert!(accepts(&modes, "Text/Markdown; charset=utf-8"));
        assert!(accepts(&modes, "application/json"));
        assert!(!accepts(&modes, "application/x-unsupported-tck-type"));
        assert!(!accepts(&modes, "image/png"));
        assert!(accepts(&["*/*".to_owned()], "image/png"));
    }
}
