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
            .public_card()
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
            .filter(|agent| self.visible(agent, ctx))
            .map(|agent| {
                let upstream = agent.upstream_card();
                let card_path = card_path_of(&agent);
                let description = upstream
                    .as_ref()
                    .map(|c| c.description.clone())
                    .unwrap_or_else(|| agent.description().to_owned());
                let skills = agent
                    .skills()
                    .into_iter()
                    .map(|mut skill| {
                        if let Some(policy) = &inner.skills {
                            skill.security_requirements = policy.card_requirements(&skill.id);
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

/// Where an agent's card is served at this gateway: its per-agent card for an upstream agent,
/// the root card for a built-in one.
fn card_path_of(agent: &std::sync::Arc<dyn crate::agents::Agent>) -> String {
    if agent.upstream_card().is_some() || agent.is_remote() {
        agent_card_path(agent.name())
    } else {
        a2a_types::WELL_KNOWN_AGENT_CARD_PATH.to_owned()
    }
}

/// The AI Catalog media type (AI Catalog draft, *Media Type*).
pub const AI_CATALOG_MEDIA_TYPE: &str = "application/ai-catalog+json";
/// The entry `type` of an A2A Agent Card (AI Catalog draft, *Catalog Entry*).
pub const A2A_CARD_MEDIA_TYPE: &str = "application/a2a-agent-card+json";

/// `/.well-known/ai-catalog.json` (AI Catalog draft, `specVersion` 1.0): the same agents as
/// `GET /agents`, each an entry naming its card.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct AiCatalog {
    spec_version: &'static str,
    host: AiHost,
    entries: Vec<AiEntry>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct AiHost {
    display_name: String,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct AiEntry {
    identifier: String,
    display_name: String,
    #[serde(rename = "type")]
    kind: &'static str,
    url: String,
}

impl A2aService {
    /// Whether `ctx`'s caller may see (and so reach) `agent`: every agent without `[auth]`; with
    /// it, those whose every skill's requirements the caller meets.
    fn visible(
        &self,
        agent: &std::sync::Arc<dyn crate::agents::Agent>,
        ctx: &RequestContext,
    ) -> bool {
        match (&self.inner.skills, &ctx.principal) {
            (Some(policy), Some(principal)) => {
                let skills = agent.skills();
                policy
                    .authorize(principal, skills.iter().map(|s| s.id.as_str()))
                    .is_ok()
            }
            // Admission lets no unauthenticated caller through while auth is on.
            (Some(_), None) => false,
            (None, _) => true,
        }
    }

    /// The AI Catalog as `ctx`'s caller may see it: one `application/a2a-agent-card+json`
    /// entry per routable agent, its `identifier` the agent's card URL (an absolute URI, unique
    /// per gateway and agent), its `displayName` the name clients route to (`tenant`).
    pub fn ai_catalog(&self, ctx: &RequestContext) -> Catalogue {
        let inner = &self.inner;
        let public_url = &inner.public_url;
        let entries = inner
            .agents
            .iter()
            .filter(|agent| self.visible(agent, ctx))
            .map(|agent| {
                let url = format!("{public_url}{}", card_path_of(&agent));
                AiEntry {
                    identifier: url.clone(),
                    display_name: agent.name().to_owned(),
                    kind: A2A_CARD_MEDIA_TYPE,
                    url,
                }
            })
            .collect();
        let doc = AiCatalog {
            spec_version: "1.0",
            host: AiHost {
                display_name: self.public_card().card.name.clone(),
            },
            entries,
        };
        let json = serde_json::to_vec(&doc).expect("the catalog serialises");
        let etag = strong_etag(&json);
        Catalogue {
            json: json.into(),
            etag,
        }
    }
}
