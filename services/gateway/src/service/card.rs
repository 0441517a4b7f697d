//! The agent cards as the service reads them: the public card (for the catalogue), the
//! extended card of GetExtendedAgentCard and the per-agent cards. They are built, signed and
//! rebuilt by the application (`crate::cards`), which publishes each new set; the service holds
//! a read-only view of the latest ([`CardView`]), never the builder or the signer.

use std::collections::HashMap;
use std::sync::Arc;

use a2a_types::v1::{AgentCard, GetExtendedAgentCardRequest};
use a2a_types::{A2aError, Dialect};
use bytes::Bytes;
use chrono::{DateTime, Utc};
use sha2::{Digest, Sha256};

use super::{A2aService, RequestContext};

/// One served form of a card: its bytes (signed over exactly these members) and their strong
/// validator.
#[derive(Debug, Clone)]
pub struct CardShape {
    pub json: Bytes,
    /// Strong validator: a hash of `json`, quoted.
    pub etag: String,
}

impl CardShape {
    pub fn new(json: Bytes) -> Self {
        let etag = strong_etag(&json);
        Self { json, etag }
    }
}

/// A card serialised once in both shapes, with the validators HTTP caching needs.
#[derive(Debug, Clone)]
pub struct CardDocument {
    /// The card, carrying the signature of its own ProtoJSON form (what gRPC returns).
    pub card: AgentCard,
    /// The strict 1.0 card (ProtoJSON of `card`, signature included): no member the 1.0
    /// schema lacks. What 1.0 clients get (`A2A-Version: 1.x`, the 1.0 extended-card methods).
    pub v1: CardShape,
    /// The combined card (1.0 members and the 0.3 ones), signed over its own JCS form.
    pub v03: CardShape,
    /// When this card's content last changed (in this process: when it was first built, or
    /// rebuilt differently), in whole seconds as `Last-Modified` carries it.
    pub last_modified: DateTime<Utc>,
    pub max_age_secs: u64,
}

impl CardDocument {
    /// The shape a client of `dialect` reads.
    pub fn shape(&self, dialect: Dialect) -> &CardShape {
        match dialect {
            Dialect::V1 => &self.v1,
            Dialect::V03 => &self.v03,
        }
    }
}

/// A strong HTTP validator of `body`: 128 bits of its SHA-256, hex, quoted.
pub fn strong_etag(body: &[u8]) -> String {
    let digest = Sha256::digest(body);
    let hex: String = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
    format!("\"{hex}\"")
}

/// Every card the gateway serves, as one set (rebuilt together when an agent changes).
pub struct Cards {
    /// The card at `/.well-known/agent-card.json`.
    pub public: Arc<CardDocument>,
    /// `Some` when `[extended_card]` and `[auth]` are configured.
    pub extended: Option<Arc<CardDocument>>,
    /// Per upstream agent: its card rewritten to point at this gateway (tenant = its name),
    /// served at [`agent_card_path`].
    pub agents: HashMap<String, Arc<CardDocument>>,
}

/// The latest set of cards, read-only: the application's card loop publishes, readers take the
/// set current at the time (a request never sees half a rebuild).
#[derive(Clone)]
pub struct CardView(tokio::sync::watch::Receiver<Arc<Cards>>);

impl CardView {
    pub fn new(published: tokio::sync::watch::Receiver<Arc<Cards>>) -> Self {
        Self(published)
    }

    pub fn current(&self) -> Arc<Cards> {
        self.0.borrow().clone()
    }
}

/// Path of an agent's rewritten card.
pub fn agent_card_path(name: &str) -> String {
    format!("/agents/{name}/.well-known/agent-card.json")
}

impl A2aService {
    /// The public card, as last published: what 0.3's GetAgentCard answers a caller who may
    /// not read the extended card; the catalogue names its interfaces and its name.
    pub fn public_card(&self) -> Arc<CardDocument> {
        self.inner.cards.current().public.clone()
    }

    pub async fn get_extended_agent_card(
        &self,
        ctx: &RequestContext,
        req: GetExtendedAgentCardRequest,
    ) -> Result<AgentCard, A2aError> {
        Ok(self.extended_agent_card(ctx, req).await?.card.clone())
    }

    /// GetExtendedAgentCard with the validators HTTP caching needs (the REST binding's ETag,
    /// Last-Modified and conditional requests).
    pub async fn extended_agent_card(
        &self,
        ctx: &RequestContext,
        _req: GetExtendedAgentCardRequest,
    ) -> Result<Arc<CardDocument>, A2aError> {
        // The extended card is for callers who proved who they are (spec §7.5).
        if self.inner.skills.is_some() && !ctx.authenticated {
            return Err(A2aError::Unauthenticated(
                "the extended agent card requires authentication".into(),
            ));
        }
        let cards = self.inner.cards.current();
        let declared = cards
            .public
            .card
            .capabilities
            .as_ref()
            .and_then(|c| c.extended_agent_card)
            .unwrap_or(false);
        if !declared {
            return Err(match ctx.dialect {
                // 1.0 (spec §7.5): the capability is false, so the operation is unsupported.
                Dialect::V1 => A2aError::UnsupportedOperation(
                    "this agent has no extended agent card (capabilities.extendedAgentCard is \
                     false)"
                        .into(),
                ),
                // 0.3 has one error for it, AuthenticatedExtendedCardNotConfigured (-32007),
                // which 0.3 servers answer when the card does not declare
                // supportsAuthenticatedExtendedCard.
                Dialect::V03 => A2aError::ExtendedAgentCardNotConfigured,
            });
        }
        cards
            .extended
            .clone()
            .ok_or(A2aError::ExtendedAgentCardNotConfigured)
    }
}
