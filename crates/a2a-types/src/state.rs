//! Task-state rules and the one function that applies an event to a task snapshot. Both stores
//! and every stream follower use [`apply_event`], so a snapshot rebuilt from the event log is the
//! snapshot that was stored.

use crate::v1::{Message, StreamResponse, Task, TaskState, stream_response::Payload};

/// COMPLETED, FAILED, CANCELED, REJECTED: the task is immutable from here on.
pub fn is_terminal(state: TaskState) -> bool {
    matches!(
        state,
        TaskState::Completed | TaskState::Failed | TaskState::Canceled | TaskState::Rejected
    )
}

/// INPUT_REQUIRED, AUTH_REQUIRED: the task waits for the client.
pub fn is_interrupted(state: TaskState) -> bool {
    matches!(state, TaskState::InputRequired | TaskState::AuthRequired)
}

/// A blocking SendMessage returns, and a stream closes, once the task reaches such a state.
pub fn is_settled(state: TaskState) -> bool {
    is_terminal(state) || is_interrupted(state)
}

/// Whether an agent may move a task from `from` to `to`. The spec has no normative table; these
/// are the derived rules: terminal is final, UNSPECIFIED is never a stored state.
pub fn can_transition(from: TaskState, to: TaskState) -> bool {
    to != TaskState::Unspecified && !is_terminal(from)
}

/// The state a task snapshot is in (UNSPECIFIED when the status is missing).
pub fn state_of(task: &Task) -> TaskState {
    task.status
        .as_ref()
        .and_then(|s| TaskState::try_from(s.state).ok())
        .unwrap_or(TaskState::Unspecified)
}

/// The state an event moves its task to, if it is a status change.
pub fn event_state(event: &StreamResponse) -> Option<TaskState> {
    match event.payload.as_ref()? {
        Payload::Task(t) => Some(state_of(t)),
        Payload::StatusUpdate(u) => u
            .status
            .as_ref()
            .and_then(|s| TaskState::try_from(s.state).ok()),
        Payload::Message(_) | Payload::ArtifactUpdate(_) => None,
    }
}

/// Applies one event to a snapshot:
/// - a status update replaces the status; the message of the status it replaces moves to history;
/// - an artifact update with `append` extends the parts of the artifact with the same id, without
///   it replaces (or adds) that artifact;
/// - a message is appended to history; a task replaces the snapshot.
pub fn apply_event(task: &mut Task, event: &StreamResponse) {
    let Some(payload) = event.payload.as_ref() else {
        return;
    };
    match payload {
        Payload::Task(t) => *task = t.clone(),
        Payload::Message(m) => task.history.push(m.clone()),
        Payload::StatusUpdate(u) => {
            if let Some(old) = task.status.take().and_then(|s| s.message) {
                task.history.push(old);
            }
            task.status = u.status.clone();
        }
        Payload::ArtifactUpdate(u) => {
            let Some(artifact) = u.artifact.as_ref() else {
                return;
            };
            match task
                .artifacts
                .iter_mut()
                .find(|a| a.artifact_id == artifact.artifact_id)
            {
                Some(existing) if u.append => existing.parts.extend(artifact.parts.iter().cloned()),
                Some(existing) => *existing = artifact.clone(),
                None => task.artifacts.push(artifact.clone()),
            }
        }
    }
}

/// Records a client message on the task: the agent's pending status message (the question that
/// interrupted the task) moves to history first, so history stays chronological.
pub fn add_user_message(task: &mut Task, message: Message) {
    if let Some(status) = task.status.as_mut()
        && let Some(question) = status.message.take()
    {
        task.history.push(question);
    }
    task.history.push(message);
}

/// Keeps at most the `n` most recent history messages (`None` = all, `Some(0)` = none).
pub fn trim_history(task: &mut Task, history_length: Option<usize>) {
    if let Some(n) = history_length
        && task.history.len() > n
    {
        task.history.drain(..task.history.len() - n);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::v1::{
        Artifact, Message, Part, TaskArtifactUpdateEvent, TaskStatus, TaskStatusUpdateEvent,
        part::Content,
    };

    fn text(s: &str) -> Part {
        Part {
            content: Some(Content::Text(s.into())),
            ..Default::default()
        }
    }

    fn artifact_event(text_: &str, append: bool) -> StreamResponse {
        StreamResponse {
            payload: Some(Payload::ArtifactUpdate(TaskArtifactUpdateEvent {
                artifact: Some(Artifact {
                    artifact_id: "a".into(),
                    parts: vec![text(text_)],
                    ..Default::default()
                }),
                append,
                ..Default::default()
            })),
        }
    }

    #[test]
    fn appending_chunks_extends_one_artifact() {
        let mut task = Task::default();
        apply_event(&mut task, &artifact_event("1", false));
        apply_event(&mut task, &artifact_event("2", true));
        apply_event(&mut task, &artifact_event("3", true));
        assert_eq!(task.artifacts.len(), 1);
        assert_eq!(task.artifacts[0].parts.len(), 3);
        apply_event(&mut task, &artifact_event("x", false));
        assert_eq!(task.artifacts[0].parts, vec![text("x")]);
    }

    #[test]
    fn status_message_moves_to_history_when_replaced() {
        let mut task = Task::default();
        let status = |state: TaskState, msg: Option<Message>| StreamResponse {
            payload: Some(Payload::StatusUpdate(TaskStatusUpdateEvent {
                status: Some(TaskStatus {
                    state: state as i32,
                    message: msg,
                    timestamp: None,
                }),
                ..Default::default()
            })),
        };
        let ask = Message {
            message_id: "m".into(),
            ..Default::default()
        };
        apply_event(
            &mut task,
            &status(TaskState::InputRequired, Some(ask.clone())),
        );
        assert!(task.history.is_empty());
        apply_event(&mut task, &status(TaskState::Working, None));
        assert_eq!(task.history, vec![ask]);
        assert_eq!(state_of(&task), TaskState::Working);
    }

    #[test]
    fn state_classes() {
        assert!(is_terminal(TaskState::Canceled));
        assert!(!is_terminal(TaskState::InputRequired));
        assert!(is_settled(TaskState::AuthRequired));
        assert!(!can_transition(TaskState::Completed, TaskState::Working));
        assert!(can_transition(TaskState::InputRequired, TaskState::Working));
    }

    #[test]
    fn trims_to_most_recent() {
        let mut task = Task {
            history: (0..5)
                .map(|i| Message {
                    message_id: i.to_string(),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        };
        trim_history(&mut task, Some(2));
        let ids: Vec<_> = task.history.iter().map(|m| m.message_id.as_str()).collect();
        assert_eq!(ids, ["3", "4"]);
        trim_history(&mut task, Some(0));
        assert!(task.history.is_empty());
    }
}
