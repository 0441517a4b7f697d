//! Building the cards: the public card from `[card]`, the agents' skills and modes and
//! `[auth]`; the extended card (`[extended_card]`, only with `[auth]`); each upstream agent's
//! card rewritten to point at this gateway. Every card served is signed here, last.

use std::sync::Arc;

use a2a_types::v1::{
    AgentCapabilities, AgentCard, AgentExtension, AgentInterface, AgentProvider, AgentSkill,
};
use bytes::Bytes;
use chrono::{DateTime, Timelike, Utc};

use crate::agents::AgentRegistry;
use crate::auth::Authenticator;
use crate::config::{CardConfig, ExtendedCardConfig, ExtensionConfig, FileConfig};
use crate::service::{CardDocument, CardShape, Cards};
use crate::signing::CardSigner;

/// Path of the JSON-RPC interface, relative to the public URL.
pub const JSONRPC_PATH: &str = "/a2a/jsonrpc";
/// Path of the HTTP+JSON interface, relative to the public URL.
pub const REST_PATH: &str = "/a2a/rest";

/// The interfaces in preference order: JSON-RPC first (every SDK speaks it), then HTTP+JSON,
/// then gRPC, whose URL is `host:port` (served on the same port, h2c).
fn interfaces(public_url: &str, tenant: &str) -> Vec<AgentInterface> {
    let iface = |url: String, binding: &str| AgentInterface {
        url,
        protocol_binding: binding.into(),
        tenant: tenant.to_owned(),
        protocol_version: a2a_types::PROTOCOL_VERSION.into(),
    };
    let mut out = vec![
        iface(format!("{public_url}{JSONRPC_PATH}"), "JSONRPC"),
        iface(format!("{public_url}{REST_PATH}"), "HTTP+JSON"),
    ];
    if let Ok(url) = url::Url::parse(public_url)
        && let (Some(host), Some(port)) = (url.host_str(), url.port_or_known_default())
    {
        out.push(iface(format!("{host}:{port}"), "GRPC"));
    }
    out
}

/// The bindings this gateway serves the 0.3 dialect on, at the 1.0 interfaces' own URLs (gRPC:
/// the 0.3 service `a2a.v1.A2AService` on the same port).
const BINDINGS_03: &[&str] = &["JSONRPC", "HTTP+JSON", "GRPC"];

/// The 0.3-readable JSON of a card (the legacy well-known path, requests without `A2A-Version`
/// or with `0.3`, the 0.3 extended-card methods): the 1.0 card with the 0.3 fields merged in
/// (`url`, `preferredTransport`, `additionalInterfaces`, `protocolVersion`,
/// `supportsAuthenticatedExtendedCard`, OpenAPI-style schemes, `security`), so that 0.3 clients
/// and 1.0 clients that fetch the card without the header both read it; see
/// `a2a_types::v03::card`. 1.0 clients that send `A2A-Version: 1.x` get the strict 1.0 card.
fn combined_json(card: &AgentCard) -> serde_json::Value {
    a2a_types::v03::card::combined(card, BINDINGS_03)
}

/// What the cards are built from; built once at start, it builds every set of cards after.
pub struct Builder {
    card: CardConfig,
    extensions: Vec<ExtensionConfig>,
    extended: Option<ExtendedCardConfig>,
    /// How push deliveries are signed, when push is offered with signing keys.
    push_signature: Option<AgentExtension>,
    public_url: String,
    agents: AgentRegistry,
    /// `None` without `[auth]`: no security schemes, no extended card.
    auth: Option<Arc<Authenticator>>,
    /// Signs every card served (`None` without signing keys: cards go out unsigned).
    signer: Option<CardSigner>,
}

impl Builder {
    pub fn new(
        config: &FileConfig,
        agents: AgentRegistry,
        public_url: &str,
        auth: Option<Arc<Authenticator>>,
    ) -> Self {
        Self {
            card: config.card.clone(),
            extensions: config.extensions.clone(),
            extended: config.extended_card.clone(),
            push_signature: push_signature_extension(config, public_url),
            public_url: public_url.to_owned(),
            agents,
            auth,
            signer: CardSigner::new(&config.push.keys, public_url),
        }
    }

    /// The agents the cards describe (the rebuild loop watches their changes).
    pub fn agents(&self) -> &AgentRegistry {
        &self.agents
    }

    /// The cards from the agents as they are now; a card whose content is what it was in
    /// `previous` keeps its `last_modified`.
    pub fn build(&self, previous: Option<&Cards>) -> Cards {
        let c = &self.card;
        let (agents, public_url) = (&self.agents, self.public_url.as_str());
        let auth = self.auth.as_deref();
        let signer = self.signer.as_ref();
        let policy = auth.map(Authenticator::skill_policy);
        let with_requirements = |mut skill: AgentSkill| {
            if let Some(policy) = &policy {
                skill.security_requirements = policy.card_requirements(&skill.id);
            }
            skill
        };
        let skills: Vec<AgentSkill> = agents
            .iter()
            .flat_map(|a| a.skills())
            .map(with_requirements)
            .collect();
        let mut input_modes: Vec<String> = Vec::new();
        let mut output_modes: Vec<String> = Vec::new();
        for agent in agents.iter() {
            for m in agent.input_modes() {
                if !input_modes.contains(&m) {
                    input_modes.push(m);
                }
            }
            for m in agent.output_modes() {
                if !output_modes.contains(&m) {
                    output_modes.push(m);
                }
            }
        }
        let (security_schemes, security_requirements) =
            auth.map(Authenticator::card).unwrap_or_default();
        let card = AgentCard {
            name: c.name.clone(),
            description: c.description.clone(),
            supported_interfaces: interfaces(public_url, ""),
            provider: c.provider_organization.as_ref().map(|org| AgentProvider {
                organization: org.clone(),
                url: c.provider_url.clone().unwrap_or_default(),
            }),
            version: c.version.clone(),
            documentation_url: c.documentation_url.clone(),
            capabilities: Some(AgentCapabilities {
                streaming: Some(c.streaming),
                push_notifications: Some(c.push_notifications),
                extensions: self
                    .extensions
                    .iter()
                    .map(|e| AgentExtension {
                        uri: e.uri.clone(),
                        description: e.description.clone(),
                        required: e.required,
                        params: None,
                    })
                    .chain(self.push_signature.clone())
                    .chain(std::iter::once(idempotency_extension()))
                    .collect(),
                // Only for callers who proved who they are: without `[auth]` there are none,
                // so no extended card is declared (or served), whatever `[card]` and
                // `[extended_card]` say.
                extended_agent_card: Some(
                    auth.is_some() && (c.extended_agent_card || self.extended.is_some()),
                ),
            }),
            security_schemes,
            security_requirements,
            default_input_modes: input_modes,
            default_output_modes: output_modes,
            skills,
            signatures: Vec::new(),
            icon_url: c.icon_url.clone(),
        };
        if auth.is_none()
            && previous.is_none()
            && (c.extended_agent_card || self.extended.is_some())
        {
            tracing::warn!(
                "an extended agent card is configured but [auth] is not: without authenticated \
                 callers it is neither declared nor served"
            );
        }
        let extended = auth.and(self.extended.as_ref()).map(|x| {
            let mut card = card.clone();
            if let Some(d) = &x.description {
                card.description = d.clone();
            }
            card.skills
                .extend(x.skills.iter().map(AgentSkill::from).map(with_requirements));
            let before = previous.and_then(|p| p.extended.as_deref());
            Arc::new(document(card, signer, c.cache_max_age_secs, before))
        });
        let agents = agents
            .iter()
            .filter_map(|a| {
                let upstream = a.upstream_card()?;
                let card = rewritten(&upstream, a.name(), public_url, &card);
                let before = previous.and_then(|p| p.agents.get(a.name())).map(|d| &**d);
                let doc = document(card, signer, c.cache_max_age_secs, before);
                Some((a.name().to_owned(), Arc::new(doc)))
            })
            .collect();
        Cards {
            public: Arc::new(document(
                card,
                signer,
                c.cache_max_age_secs,
                previous.map(|p| &*p.public),
            )),
            extended,
            agents,
        }
    }
}

/// The document of `card`; it keeps `previous`'s `last_modified` if the content is the same.
fn document(
    card: AgentCard,
    signer: Option<&CardSigner>,
    max_age_secs: u64,
    previous: Option<&CardDocument>,
) -> CardDocument {
    let mut doc = at(card, signer, max_age_secs, Utc::now());
    if let Some(p) = previous.filter(|p| p.v1.etag == doc.v1.etag && p.v03.etag == doc.v03.etag) {
        doc.last_modified = p.last_modified;
    }
    doc
}

/// Every card the gateway serves (root, per agent, extended; on every binding) is built here,
/// and signed here, last: the signatures cover exactly what is served, each shape over its own
/// canonical form.
fn at(
    card: AgentCard,
    signer: Option<&CardSigner>,
    max_age_secs: u64,
    now: DateTime<Utc>,
) -> CardDocument {
    let combined = combined_json(&card);
    let (card, combined) = crate::signing::signed(card, combined, signer);
    let v1 = serde_json::to_vec(&card).expect("an AgentCard serialises");
    CardDocument {
        card,
        v1: CardShape::new(Bytes::from(v1)),
        v03: CardShape::new(combined),
        last_modified: now.with_nanosecond(0).unwrap_or(now),
        max_age_secs,
    }
}

/// Declares `Idempotency-Key` support, so that clients (and gateways in front of this one) can
/// tell a retry will be answered from the first request.
fn idempotency_extension() -> AgentExtension {
    AgentExtension {
        uri: crate::service::IDEMPOTENCY_EXTENSION.into(),
        description: "SendMessage and SendStreamingMessage honour an Idempotency-Key header \
                      (gRPC metadata idempotency-key): a retry with the same key and request is \
                      answered from the first one; the same key with another request is refused"
            .into(),
        required: false,
        params: None,
    }
}

/// An upstream's card as the gateway publishes it: the upstream's name, description, skills and
/// modes, but the gateway's interfaces (tenant = the agent's name), capabilities and security
/// (clients authenticate to the gateway, not to the upstream). The upstream's signatures covered
/// the card it published, not this one, so they are replaced by the gateway's.
fn rewritten(upstream: &AgentCard, name: &str, public_url: &str, gateway: &AgentCard) -> AgentCard {
    let mut capabilities = gateway.capabilities.clone().unwrap_or_default();
    capabilities.extended_agent_card = Some(false);
    AgentCard {
        name: upstream.name.clone(),
        description: upstream.description.clone(),
        supported_interfaces: interfaces(public_url, name),
        provider: upstream.provider.clone(),
        version: upstream.version.clone(),
        documentation_url: upstream.documentation_url.clone(),
        capabilities: Some(capabilities),
        security_schemes: gateway.security_schemes.clone(),
        security_requirements: gateway.security_requirements.clone(),
        default_input_modes: upstream.default_input_modes.clone(),
        default_output_modes: upstream.default_output_modes.clone(),
        skills: upstream.skills.clone(),
        signatures: Vec::new(),
        icon_url: upstream.icon_url.clone(),
    }
}

/// Advertises how push deliveries are signed, when signing keys are configured: where the JWKS
/// is, which header carries the JWT and its algorithm. Not required: clients need not act on it.
fn push_signature_extension(config: &FileConfig, public_url: &str) -> Option<AgentExtension> {
    let keys = &config.push.keys;
    // An embedded gateway always has a key (it signs the cards); the extension is about push.
    if !config.card.push_notifications {
        return None;
    }
    let alg = keys.signing_alg()?;
    let params = serde_json::json!({
        "jwksUri": format!("{public_url}{}", a2a_push::JWKS_PATH),
        "header": a2a_push::SIGNATURE_HEADER,
        "alg": format!("{alg:?}"),
        "issuer": public_url,
    });
    Some(AgentExtension {
        uri: a2a_push::SIGNATURE_EXTENSION_URI.into(),
        description: "Push notifications carry a JWT (claims iss, aud = webhook URL, iat, exp, \
                      jti, taskId, bodySha256) signed by a key of the JWKS at jwksUri"
            .into(),
        required: false,
        params: serde_json::from_value(params).ok(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn last_modified_moves_only_when_the_content_changes() {
        let card = |name: &str| AgentCard {
            name: name.into(),
            ..Default::default()
        };
        let then = DateTime::parse_from_rfc3339("2026-01-02T03:04:05.678Z")
            .unwrap()
            .with_timezone(&Utc);
        let old = at(card("a"), None, 60, then);
        assert_eq!(old.last_modified.to_rfc3339(), "2026-01-02T03:04:05+00:00");
        let same = document(card("a"), None, 60, Some(&old));
        assert_eq!(same.last_modified, old.last_modified);
        let changed = document(card("b"), None, 60, Some(&old));
        assert!(changed.last_modified > old.last_modified);
        assert_eq!(changed.last_modified.nanosecond(), 0, "whole seconds");
    }
}
