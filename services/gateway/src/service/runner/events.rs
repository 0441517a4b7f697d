//! The agent's events as task events: checked (printable, not too deep, a legal transition,
//! an artifact with an id and parts) and staged for the [`Runner`]'s next write.

use a2a_types::A2aError;
use a2a_types::state::{can_transition, is_settled};
use a2a_types::v1::{Role, StreamResponse, TaskArtifactUpdateEvent, stream_response::Payload};

use super::super::{depth, validate};
use super::First;
use super::state::Runner;
use crate::agents::AgentEvent;

impl Runner<'_> {
    /// Handles one agent event; `Ok(true)` when the turn is over.
    pub(super) async fn on_event(&mut self, event: AgentEvent) -> Result<bool, A2aError> {
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
        if depth::agent_event_too_deep(message, artifact) {
            metrics::counter!("a2a_agent_events_refused_total", "agent" => self.turn.agent.name().to_owned(), "reason" => "too_deep")
                .increment(1);
            return Err(A2aError::InvalidAgentResponse(format!(
                "agent {} sent an event whose values nest more than {} levels deep",
                self.turn.agent.name(),
                depth::MAX_VALUE_DEPTH
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
}
