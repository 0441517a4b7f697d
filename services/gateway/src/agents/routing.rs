//! Which agent a new message goes to:
//!
//! 1. the request's `tenant` names the agent;
//! 2. else the `skill` key of the message's (or the request's) metadata names a skill id, and
//!    the best available agent that has that skill takes it;
//! 3. else every healthy upstream agent is scored on the message: skill/tag match 0.5,
//!    availability 0.3, free capacity 0.2 (times the agent's weight); the best agent with any
//!    match takes it;
//! 4. else the default agent.
//!
//! The decision and its reason are logged (`routing.agent`, `routing.reason`, which a tracing
//! exporter records as attributes).

use std::collections::HashSet;
use std::fmt;
use std::sync::Arc;

use a2a_types::A2aError;
use a2a_types::v1::{AgentSkill, Message, part::Content};
use a2a_types::wkt::{Struct, value::Kind};

use super::{Agent, AgentRegistry, AgentStatus};

/// The metadata key of a skill hint.
pub const SKILL_KEY: &str = "skill";

/// Score weights (the seeds' weighting).
const W_MATCH: f64 = 0.5;
const W_AVAILABILITY: f64 = 0.3;
const W_LOAD: f64 = 0.2;

#[derive(Debug, Clone, PartialEq)]
pub enum Reason {
    Tenant,
    SkillHint(String),
    Score { score: f64, matched: f64 },
    Default,
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Tenant => f.write_str("tenant"),
            Self::SkillHint(s) => write!(f, "skill hint {s:?}"),
            Self::Score { score, matched } => {
                write!(f, "best score {score:.3} (skill match {matched:.2})")
            }
            Self::Default => f.write_str("default agent"),
        }
    }
}

pub struct Route {
    pub agent: Arc<dyn Agent>,
    pub reason: Reason,
}

/// Available: built-in agents always, upstream agents while healthy.
fn available(agent: &dyn Agent) -> bool {
    agent.status().is_none_or(|s| s.healthy)
}

fn unavailable(name: &str) -> A2aError {
    A2aError::Unavailable(format!(
        "agent {name} is unavailable (its health check is failing); retry later"
    ))
}

fn score(status: Option<AgentStatus>, matched: f64) -> f64 {
    let s = status.unwrap_or(AgentStatus {
        healthy: true,
        availability: 1.0,
        load: 0.0,
        weight: 1.0,
        queued: 0,
    });
    s.weight
        * (W_MATCH * matched + W_AVAILABILITY * s.availability + W_LOAD * (1.0 - s.load.min(1.0)))
}

/// Lower-case words of the message's text parts.
fn words(message: &Message) -> HashSet<String> {
    message
        .parts
        .iter()
        .filter_map(|p| match &p.content {
            Some(Content::Text(t)) => Some(t),
            _ => None,
        })
        .flat_map(|t| t.split(|c: char| !(c.is_alphanumeric() || c == '-' || c == '_')))
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// The best skill's share of terms (its id and tags; a tag of several words matches when all
/// of them appear) found in the message.
fn skill_match(skills: &[AgentSkill], words: &HashSet<String>) -> f64 {
    skills
        .iter()
        .map(|s| {
            let terms: Vec<&str> = std::iter::once(s.id.as_str())
                .chain(s.tags.iter().map(String::as_str))
                .filter(|t| !t.is_empty())
                .collect();
            if terms.is_empty() {
                return 0.0;
            }
            let hits = terms
                .iter()
                .filter(|t| {
                    t.split_whitespace()
                        .all(|w| words.contains(&w.to_lowercase()))
                })
                .count();
            hits as f64 / terms.len() as f64
        })
        .fold(0.0, f64::max)
}

fn skill_hint<'a>(message: &'a Message, metadata: Option<&'a Struct>) -> Option<&'a str> {
    [message.metadata.as_ref(), metadata]
        .into_iter()
        .flatten()
        .find_map(|m| match m.fields.get(SKILL_KEY)?.kind.as_ref()? {
            Kind::StringValue(s) if !s.is_empty() => Some(s.as_str()),
            _ => None,
        })
}

impl AgentRegistry {
    /// Routes a message that starts a task (see the module documentation).
    pub fn route(
        &self,
        tenant: &str,
        message: &Message,
        metadata: Option<&Struct>,
    ) -> Result<Route, A2aError> {
        let route = self.decide(tenant, message, metadata)?;
        let name = route.agent.name();
        if matches!(route.reason, Reason::Tenant) {
            tracing::debug!(routing.agent = name, routing.reason = %route.reason, "routed");
        } else {
            tracing::info!(routing.agent = name, routing.reason = %route.reason, "routed");
        }
        Ok(route)
    }

    fn decide(
        &self,
        tenant: &str,
        message: &Message,
        metadata: Option<&Struct>,
    ) -> Result<Route, A2aError> {
        if !tenant.is_empty() {
            let agent = self.get(tenant).ok_or_else(|| {
                let why = if self.is_disabled(tenant) {
                    format!(
                        "the built-in agent {tenant:?} is not enabled on this gateway \
                         (builtin_agents)"
                    )
                } else {
                    format!("no agent named {tenant:?}")
                };
                A2aError::invalid_params("tenant", why)
            })?;
            if !available(agent.as_ref()) {
                return Err(unavailable(tenant));
            }
            return Ok(Route {
                agent,
                reason: Reason::Tenant,
            });
        }
        if let Some(hint) = skill_hint(message, metadata) {
            let best = self
                .iter()
                .filter(|a| available(a.as_ref()))
                .filter(|a| a.skills().iter().any(|s| s.id.eq_ignore_ascii_case(hint)))
                .max_by(|a, b| score(a.status(), 1.0).total_cmp(&score(b.status(), 1.0)));
            if let Some(agent) = best {
                return Ok(Route {
                    agent: agent.clone(),
                    reason: Reason::SkillHint(hint.to_owned()),
                });
            }
        }
        // The message's words are read only when some agent can be scored (an upstream agent
        // with a health status): a gateway of built-in agents routes without them.
        let mut message_words = None;
        let best = self
            .iter()
            .filter_map(|a| {
                let status = a.status().filter(|s| s.healthy)?;
                Some((a, status))
            })
            .map(|(a, status)| {
                let words = message_words.get_or_insert_with(|| words(message));
                let matched = skill_match(&a.skills(), words);
                (a, matched, score(Some(status), matched))
            })
            .filter(|(_, matched, _)| *matched > 0.0)
            .max_by(|x, y| x.2.total_cmp(&y.2));
        if let Some((agent, matched, score)) = best {
            return Ok(Route {
                agent: agent.clone(),
                reason: Reason::Score { score, matched },
            });
        }
        let agent = self
            .default_agent()
            .ok_or_else(|| A2aError::Internal("the default agent is not configured".into()))?;
        if !available(agent.as_ref()) {
            return Err(unavailable(agent.name()));
        }
        Ok(Route {
            agent,
            reason: Reason::Default,
        })
    }
}

#[cfg(test)]
mod tests;
