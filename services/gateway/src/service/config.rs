//! What the A2A operations need of the configuration, and nothing else: the limits the service
//! enforces, the capabilities it honours (streaming, push), the extensions it checks, the push
//! policy, the quotas and the idempotency window. `crate::config` assembles it from the file
//! and the environment (`FileConfig::service`); the service never sees the whole configuration.

use std::collections::BTreeMap;
use std::time::Duration;

use super::quota::QuotaConfig;

#[derive(Debug, Clone)]
pub struct ServiceConfig {
    /// `capabilities.streaming`: without it SendStreamingMessage and SubscribeToTask are
    /// refused.
    pub streaming: bool,
    /// `capabilities.pushNotifications` as the gateway offers it: without it every push
    /// operation is refused.
    pub push_notifications: bool,
    /// The extensions the card declares (`[[extensions]]`): a request must activate the required
    /// ones, and gets the activated ones it may use echoed back.
    pub extensions: Vec<DeclaredExtension>,
    /// Which webhook URLs push configs may name (`[push] allowed_hosts`).
    pub push_policy: a2a_push::AddressPolicy,
    /// Open streams in this process at most (`[limits] max_streams`).
    pub max_streams: usize,
    /// Parts of one message at most (`[limits] max_parts`).
    pub max_parts: usize,
    /// How long a blocking SendMessage waits for its task to settle (`[limits]
    /// blocking_timeout_secs`).
    pub blocking_timeout: Duration,
    /// The bound on one turn ([`TurnLimits`]).
    pub turns: TurnLimits,
    /// How long an `Idempotency-Key` is remembered (`[idempotency] ttl_secs`).
    pub idempotency_ttl_secs: u64,
    /// A send's `messageId` is also its idempotency key (`[idempotency] message_id`).
    pub message_id_keys: bool,
    /// `[limits.quotas]`: what one owner may hold at once.
    pub quotas: QuotaConfig,
}

/// An extension the card declares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeclaredExtension {
    pub uri: String,
    /// A request without it activated is refused (ExtensionSupportRequired).
    pub required: bool,
}

/// How long one turn of an agent may run, in seconds (0: unbounded): an agent's own
/// `[[agents]] max_turn_secs`, else `[limits] builtin_max_turn_secs`, else `[limits]
/// max_turn_secs`.
#[derive(Debug, Clone, Default)]
pub struct TurnLimits {
    /// `[[agents]] max_turn_secs`, by agent (the file's upstream agents that set one).
    pub agents: BTreeMap<String, u64>,
    /// `[limits] builtin_max_turn_secs`, by built-in agent.
    pub builtin: BTreeMap<String, u64>,
    /// `[limits] max_turn_secs`: every other agent.
    pub default_secs: u64,
}

impl TurnLimits {
    /// The bound on one turn of `agent`; `None` when it is 0.
    pub fn of(&self, agent: &str) -> Option<Duration> {
        let secs = self
            .agents
            .get(agent)
            .or_else(|| self.builtin.get(agent))
            .copied()
            .unwrap_or(self.default_secs);
        (secs > 0).then(|| Duration::from_secs(secs))
    }
}
