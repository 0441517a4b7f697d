//! `GET /agents`: the catalogue of the agents this gateway fronts, built-in and upstream, as
//! the caller may reach them.
//!
//! Visibility: without `[auth]` every agent is listed. With it the caller must have
//! authenticated (the binding's pipeline refuses anyone else with 401, as for every other
//! operation), and an agent is listed only when the caller meets the `skill_requirements` of
//! each of its skills, the same check a message to that agent must pass: nobody learns of an
//! agent they could not use. The anonymous view is the public card, which lists the skills
//! but neither the agents nor their health.

use a2a_types::v1::AgentSkill;
use bytes::Bytes;
use serde::Serialize;

use super::card::{agent_card_path, strong_etag};
use super::{A2aService, RequestContext};

/// The document and its strong validator (a hash of the bytes: it changes with health, skills
/// and what the caller may see).
pub struct Catalogue {
    pub json: Bytes,
    pub etag: String,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Document {
    agents: Vec<Entry>,
}

/// One agent. `bindings` are the bindings a client reaches it by at this gateway (with
/// `tenant` = its name, or through the per-agent card's interfaces); `protocol` is the A2A
/// version the agent itself speaks (the gateway translates 0.3).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Entry {
    name: String,
    description: String,
    card_url: String,
    tenant: String,
    default: bool,
    health: &'static str,
    protocol: String,
    bindings: Vec<&'static str>,
    skills: Vec<AgentSkill>,
}

impl A2aService {
    /// The catalogue as `ctx`'s caller may see it.
    pub fn agent_catalogue(&self, ctx: &RequestContext) -> Catalogue {
        let inner = &self.inner;
        let public_url = &inner.public_url;
        let default = inner.agents.default_agent();
        let bindings: Vec<&'static str> = self
            .agent_card()
            .card
            .supported_interfaces
            .iter()
            .filter_map(|i| match i.protocol_binding.as_str() {
                "JSONRPC" => Some("JSONRPC"),
                "HTTP+JSON" => Some("HTTP+JSON"),
                "GRPC" => Some("GRPC"),
                _ => None,
            })
            .collect();
        let agents = inner
            .agents
            .iter()
            .filter(|agent| match (&inner.auth, &ctx.principal) {
                (Some(auth), Some(principal)) => {
                    let skills = agent.skills();
                    auth.authorize_skills(principal, skills.iter().map(|s| s.id.as_str()))
                        .is_ok()
                }
                // Admission lets no unauthenticated caller through while auth is on.
                (Some(_), None) => false,
                (None, _) => true,
            })
            .map(|agent| {
                let upstream = agent.upstream_card();
                let card_path = match upstream {
                    Some(_) => agent_card_path(agent.name()),
                    None if agent.is_remote() => agent_card_path(agent.name()),
                    None => crate::bindings::card::WELL_KNOWN_PATH.to_owned(),
                };
                let description = upstream
                    .as_ref()
                    .map(|c| c.description.clone())
                    .unwrap_or_else(|| agent.description().to_owned());
                let skills = agent
                    .skills()
                    .into_iter()
                    .map(|mut skill| {
                        if let Some(auth) = &inner.auth {
                            skill.security_requirements = auth.skill_card_requirements(&skill.id);
                        }
                        skill
                    })
                    .collect();
                Entry {
                    name: agent.name().to_owned(),
                    description,
                    card_url: format!("{public_url}{card_path}"),
                    tenant: agent.name().to_owned(),
                    default: default.as_ref().is_some_and(|d| d.name() == agent.name()),
                    health: match agent.status() {
                        Some(s) if !s.healthy => "unhealthy",
                        _ => "healthy",
                    },
                    protocol: agent.protocol().to_owned(),
                    bindings: bindings.clone(),
                    skills,
                }
            })
            .collect();
        let json = serde_json::to_vec(&Document { agents }).expect("the catalogue serialises");
        let etag = strong_etag(&json);
        Catalogue {
            json: json.into(),
            etag,
        }
    }
}
