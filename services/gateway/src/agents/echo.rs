//! `echo`, the default agent: completes at once with one artifact holding the input parts.

use a2a_types::A2aError;
use a2a_types::v1::{AgentSkill, Artifact, TaskState};
use async_trait::async_trait;

use super::{Agent, AgentEvents, AgentRequest};

pub struct EchoAgent;

#[async_trait]
impl Agent for EchoAgent {
    fn name(&self) -> &str {
        "echo"
    }

    fn description(&self) -> &str {
        "Completes every task at once with an artifact that echoes the input parts"
    }

    fn skills(&self) -> Vec<AgentSkill> {
        vec![AgentSkill {
            id: "echo".into(),
            name: "Echo".into(),
            description: "Returns the message parts unchanged as the artifact `echo`".into(),
            tags: vec!["echo".into(), "test".into()],
            examples: vec!["hello".into()],
            ..Default::default()
        }]
    }

    fn input_modes(&self) -> Vec<String> {
        vec!["text/*".into(), "application/json".into()]
    }

    fn output_modes(&self) -> Vec<String> {
        self.input_modes()
    }

    async fn execute(&self, request: AgentRequest, events: AgentEvents) -> Result<(), A2aError> {
        let artifact = Artifact {
            artifact_id: "echo".into(),
            name: "echo".into(),
            parts: request.message.parts,
            ..Default::default()
        };
        events.artifact(artifact, false, true).await?;
        events.status(TaskState::Completed, None).await
    }
}
