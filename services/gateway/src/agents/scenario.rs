//! `scenario` (tenant `scenario`): a scriptable agent for tests and benchmarks. The first data
//! part of the message is the script, `{"chunks": N, "delayMs": M, "padBytes": P, "end": E}` (all
//! optional; defaults 1, 0, 0, `"completed"`). It goes WORKING, emits N text chunks of one artifact
//! (`append` / `lastChunk`) M ms apart, each with a second text part of P bytes when P > 0 (large
//! payloads for tests of a bounded bus, up to 4 MiB), then ends as E: `completed`, `failed`, `rejected`,
//! `input-required` (the next message on the task completes it), `auth-required`, `message`
//! (reply with a Message, no task) or `hang` (stays WORKING until canceled, or until the
//! runner fails the turn at its maximum duration, `limits.max_turn_secs`). A test tool: off
//! outside embedded mode unless `builtin_agents` lists it.

use std::time::Duration;

use a2a_types::A2aError;
use a2a_types::v1::{AgentSkill, Artifact, TaskState, part::Content};
use async_trait::async_trait;

use super::{Agent, AgentEvents, AgentRequest, agent_message, text_part};

pub struct ScenarioAgent;

/// Bounds that keep one request from occupying the gateway without limit.
const MAX_CHUNKS: u64 = 100_000;
const MAX_DELAY_MS: u64 = 60_000;
const MAX_PAD_BYTES: u64 = 4 * 1024 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    Completed,
    Failed,
    Rejected,
    InputRequired,
    AuthRequired,
    Message,
    Hang,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Script {
    chunks: u64,
    delay_ms: u64,
    pad_bytes: u64,
    end: End,
}

impl Script {
    fn from_request(request: &AgentRequest) -> Result<Self, A2aError> {
        let mut script = Script {
            chunks: 1,
            delay_ms: 0,
            pad_bytes: 0,
            end: End::Completed,
        };
        let Some((index, data)) =
            request
                .message
                .parts
                .iter()
                .enumerate()
                .find_map(|(i, p)| match &p.content {
                    Some(Content::Data(v)) => Some((i, v)),
                    _ => None,
                })
        else {
            return Ok(script);
        };
        let field = |name: &str| format!("message.parts[{index}].data.{name}");
        let value = serde_json::to_value(data).map_err(|e| A2aError::Internal(e.to_string()))?;
        let Some(obj) = value.as_object() else {
            return Err(A2aError::invalid_params(
                format!("message.parts[{index}].data"),
                "the scenario script must be an object",
            ));
        };
        let number = |name: &str, max: u64| -> Result<Option<u64>, A2aError> {
            match obj.get(name) {
                None | Some(serde_json::Value::Null) => Ok(None),
                Some(v) => v
                    .as_f64()
                    .filter(|f| f.fract() == 0.0 && *f >= 0.0 && *f <= max as f64)
                    .map(|f| Some(f as u64))
                    .ok_or_else(|| {
                        A2aError::invalid_params(
                            field(name),
                            format!("must be an integer 0..={max}"),
                        )
                    }),
            }
        };
        if let Some(n) = number("chunks", MAX_CHUNKS)? {
            script.chunks = n;
        }
        if let Some(ms) = number("delayMs", MAX_DELAY_MS)? {
            script.delay_ms = ms;
        }
        if let Some(n) = number("padBytes", MAX_PAD_BYTES)? {
            script.pad_bytes = n;
        }
        if let Some(end) = obj.get("end") {
            script.end = match end.as_str() {
                Some("completed") => End::Completed,
                Some("failed") => End::Failed,
                Some("rejected") => End::Rejected,
                Some("input-required") => End::InputRequired,
                Some("auth-required") => End::AuthRequired,
                Some("message") => End::Message,
                Some("hang") => End::Hang,
                _ => {
                    return Err(A2aError::invalid_params(
                        field("end"),
                        "must be one of completed, failed, rejected, input-required, \
                         auth-required, message, hang",
                    ));
                }
            };
        }
        Ok(script)
    }
}

#[async_trait]
impl Agent for ScenarioAgent {
    fn name(&self) -> &str {
        "scenario"
    }

    fn description(&self) -> &str {
        "Scriptable test agent: streams N artifact chunks M ms apart, then ends as told"
    }

    fn skills(&self) -> Vec<AgentSkill> {
        vec![AgentSkill {
            id: "scenario".into(),
            name: "Scenario".into(),
            description: "Driven by a data part {\"chunks\": N, \"delayMs\": M, \"end\": E}".into(),
            tags: vec!["test".into(), "streaming".into()],
            examples: vec![r#"{"chunks": 5, "delayMs": 10, "end": "completed"}"#.into()],
            ..Default::default()
        }]
    }

    fn input_modes(&self) -> Vec<String> {
        vec!["text/plain".into(), "application/json".into()]
    }

    fn output_modes(&self) -> Vec<String> {
        vec!["text/plain".into()]
    }

    async fn execute(&self, request: AgentRequest, events: AgentEvents) -> Result<(), A2aError> {
        if request.task.is_some() {
            // A follow-up on an interrupted task completes it.
            let reply = agent_message(&request, "thanks, the task is complete");
            return events.status(TaskState::Completed, Some(reply)).await;
        }
        let script = Script::from_request(&request)?;
        if script.end == End::Message {
            return events
                .reply(agent_message(&request, "a direct reply, no task"))
                .await;
        }
        events.status(TaskState::Working, None).await?;
        for i in 0..script.chunks {
            if i > 0 && script.delay_ms > 0 {
                tokio::time::sleep(Duration::from_millis(script.delay_ms)).await;
            }
            let mut parts = vec![text_part(format!("chunk {i}"))];
            if script.pad_bytes > 0 {
                // Bounded by MAX_PAD_BYTES above.
                parts.push(text_part("x".repeat(script.pad_bytes as usize)));
            }
            let artifact = Artifact {
                artifact_id: "scenario-output".into(),
                name: "output".into(),
                parts,
                ..Default::default()
            };
            events
                .artifact(artifact, i > 0, i + 1 == script.chunks)
                .await?;
        }
        let (state, text) = match script.end {
            End::Completed => (TaskState::Completed, None),
            End::Failed => (TaskState::Failed, Some("the scenario asked to fail")),
            End::Rejected => (TaskState::Rejected, Some("the scenario asked to reject")),
            End::InputRequired => (
                TaskState::InputRequired,
                Some("send another message on this task to complete it"),
            ),
            End::AuthRequired => (TaskState::AuthRequired, Some("credentials required")),
            End::Hang => {
                events.cancelled().await;
                return Ok(());
            }
            End::Message => unreachable!("handled before the task started"),
        };
        let message = text.map(|t| agent_message(&request, t));
        events.status(state, message).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use a2a_types::v1::{Message, Part};

    fn request_with(data: serde_json::Value) -> AgentRequest {
        AgentRequest {
            upstream_key: None,
            task_id: "t".into(),
            context_id: "c".into(),
            message: Message {
                parts: vec![
                    text_part("go"),
                    Part {
                        content: Some(Content::Data(serde_json::from_value(data).unwrap())),
                        ..Default::default()
                    },
                ],
                ..Default::default()
            },
            task: None,
            upstream: None,
            turn: 1,
            hops: 0,
        }
    }

    #[test]
    fn parses_scripts_with_defaults() {
        let s = Script::from_request(&request_with(serde_json::json!({"chunks": 5}))).unwrap();
        assert_eq!((s.chunks, s.delay_ms, s.end), (5, 0, End::Completed));
        let s = Script::from_request(&request_with(
            serde_json::json!({"delayMs": 10, "end": "input-required"}),
        ))
        .unwrap();
        assert_eq!((s.chunks, s.delay_ms, s.end), (1, 10, End::InputRequired));
        let s =
            Script::from_request(&request_with(serde_json::json!({"padBytes": 1048576}))).unwrap();
        assert_eq!(s.pad_bytes, 1 << 20);
    }

    #[test]
    fn rejects_bad_scripts_naming_the_field() {
        let err =
            Script::from_request(&request_with(serde_json::json!({"end": "explode"}))).unwrap_err();
        assert!(
            matches!(err, A2aError::InvalidParams { ref field, .. } if field == "message.parts[1].data.end")
        );
        let err =
            Script::from_request(&request_with(serde_json::json!({"chunks": -1}))).unwrap_err();
        assert!(
            matches!(err, A2aError::InvalidParams { ref field, .. } if field == "message.parts[1].data.chunks")
        );
        assert!(Script::from_request(&request_with(serde_json::json!({"chunks": 1.5}))).is_err());
        let err = Script::from_request(&request_with(serde_json::json!({"padBytes": 5 << 20})))
            .unwrap_err();
        assert!(
            matches!(err, A2aError::InvalidParams { ref field, .. } if field == "message.parts[1].data.padBytes")
        );
    }
}
