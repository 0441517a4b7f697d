use std::sync::Arc;

use a2a_types::A2aError;
use a2a_types::v1::{AgentSkill, Message};
use async_trait::async_trait;

use super::*;
use crate::agents::{Agent, AgentEvents, AgentRegistry, AgentRequest, AgentStatus, text_part};

/// An upstream-like agent with fixed skills and status.
struct Fake {
    name: &'static str,
    tags: Vec<&'static str>,
    status: AgentStatus,
}

#[async_trait]
impl Agent for Fake {
    fn name(&self) -> &str {
        self.name
    }
    fn description(&self) -> &str {
        "fake"
    }
    fn skills(&self) -> Vec<AgentSkill> {
        vec![AgentSkill {
            id: format!("{}-skill", self.name),
            tags: self.tags.iter().map(|t| t.to_string()).collect(),
            ..Default::default()
        }]
    }
    fn input_modes(&self) -> Vec<String> {
        vec!["*/*".into()]
    }
    fn output_modes(&self) -> Vec<String> {
        vec![]
    }
    fn status(&self) -> Option<AgentStatus> {
        Some(self.status)
    }
    async fn execute(&self, _: AgentRequest, _: AgentEvents) -> Result<(), A2aError> {
        Ok(())
    }
}

fn status(healthy: bool, availability: f64, load: f64) -> AgentStatus {
    AgentStatus {
        healthy,
        availability,
        load,
        weight: 1.0,
        queued: 0,
    }
}

fn registry(agents: Vec<Fake>) -> AgentRegistry {
    let mut r = AgentRegistry::builtin();
    for a in agents {
        r.add(Arc::new(a));
    }
    r
}

fn text(t: &str) -> Message {
    Message {
        message_id: "m".into(),
        parts: vec![text_part(t)],
        ..Default::default()
    }
}

fn with_meta(mut m: Message, key: &str, value: &str) -> Message {
    m.metadata = Some(serde_json::from_value(serde_json::json!({ key: value })).unwrap());
    m
}

#[test]
fn tenant_wins_and_an_unhealthy_tenant_is_unavailable() {
    let r = registry(vec![
        Fake {
            name: "billing",
            tags: vec!["invoice"],
            status: status(true, 1.0, 0.0),
        },
        Fake {
            name: "down",
            tags: vec![],
            status: status(false, 1.0, 0.0),
        },
    ]);
    let route = r.route("billing", &text("anything"), None).unwrap();
    assert_eq!(
        (route.agent.name(), route.reason),
        ("billing", Reason::Tenant)
    );
    assert!(matches!(
        r.route("down", &text("x"), None),
        Err(A2aError::Unavailable(_))
    ));
    assert!(matches!(
        r.route("nope", &text("x"), None),
        Err(A2aError::InvalidParams { .. })
    ));
}

#[test]
fn a_skill_hint_picks_the_agent_with_that_skill() {
    let r = registry(vec![
        Fake {
            name: "a",
            tags: vec!["x"],
            status: status(true, 1.0, 0.0),
        },
        Fake {
            name: "b",
            tags: vec!["y"],
            status: status(true, 1.0, 0.0),
        },
    ]);
    let route = r
        .route("", &with_meta(text("hello"), "skill", "b-skill"), None)
        .unwrap();
    assert_eq!(route.agent.name(), "b");
    assert_eq!(route.reason, Reason::SkillHint("b-skill".into()));
}

#[test]
fn scoring_weighs_match_availability_and_load() {
    let r = registry(vec![
        Fake {
            name: "busy",
            tags: vec!["invoice"],
            status: status(true, 1.0, 1.0),
        },
        Fake {
            name: "idle",
            tags: vec!["invoice"],
            status: status(true, 1.0, 0.0),
        },
        Fake {
            name: "sick",
            tags: vec!["invoice"],
            status: status(false, 1.0, 0.0),
        },
        Fake {
            name: "other",
            tags: vec!["weather"],
            status: status(true, 1.0, 0.0),
        },
    ]);
    let route = r.route("", &text("please pay this invoice"), None).unwrap();
    assert_eq!(route.agent.name(), "idle", "same match, less load");
    assert!(matches!(route.reason, Reason::Score { .. }));
    let route = r.route("", &text("nothing relevant"), None).unwrap();
    assert_eq!(
        (route.agent.name(), route.reason),
        ("echo", Reason::Default)
    );
}
