//! The service's own configuration ([`ServiceConfig`]), assembled here from the file's sections
//! (with the environment applied): the service is given what its operations need and never the
//! whole configuration (`config` → `service`, never back).

use std::time::Duration;

use super::FileConfig;
use crate::service::{DeclaredExtension, ServiceConfig, TurnLimits};

impl FileConfig {
    /// What the A2A operations need of this configuration. `[push] allowed_hosts` must have
    /// been checked (as parsing and the environment's overlay do).
    pub fn service(&self) -> ServiceConfig {
        let limits = &self.limits;
        ServiceConfig {
            streaming: self.card.streaming,
            push_notifications: self.card.push_notifications,
            extensions: self
                .extensions
                .iter()
                .map(|e| DeclaredExtension {
                    uri: e.uri.clone(),
                    required: e.required,
                })
                .collect(),
            push_policy: a2a_push::AddressPolicy::from_entries(&self.push.allowed_hosts)
                .expect("[push] allowed_hosts was validated when the config was loaded"),
            max_streams: limits.max_streams,
            max_parts: limits.max_parts,
            blocking_timeout: Duration::from_secs(limits.blocking_timeout_secs),
            turns: TurnLimits {
                agents: self
                    .agents
                    .iter()
                    .filter_map(|a| Some((a.name.clone(), a.max_turn_secs?)))
                    .collect(),
                builtin: limits.builtin_max_turn_secs.clone(),
                default_secs: limits.max_turn_secs,
            },
            idempotency_ttl_secs: self.idempotency.ttl_secs,
            message_id_keys: self.idempotency.message_id,
            quotas: limits.quotas.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::FileConfig;

    #[test]
    fn a_turn_is_bounded_by_its_agent_then_the_built_ins_then_the_default() {
        let file = FileConfig::parse(
            r#"
            [limits]
            max_turn_secs = 60
            builtin_max_turn_secs = { scenario = 0 }
            [[agents]]
            name = "bounded"
            card_url = "http://127.0.0.1:1"
            max_turn_secs = 5
            [[agents]]
            name = "unbounded"
            card_url = "http://127.0.0.1:2"
            "#,
        )
        .unwrap();
        let turns = file.service().turns;
        assert_eq!(turns.of("bounded"), Some(Duration::from_secs(5)));
        assert_eq!(turns.of("unbounded"), Some(Duration::from_secs(60)));
        assert_eq!(turns.of("echo"), Some(Duration::from_secs(60)));
        assert_eq!(turns.of("scenario"), None, "0 is no bound");
    }

    #[test]
    fn the_service_gets_the_files_capabilities_and_extensions() {
        let file = FileConfig::parse(
            r#"
            [card]
            streaming = false
            [[extensions]]
            uri = "https://example.com/ext/required"
            required = true
            [idempotency]
            ttl_secs = 60
            message_id = true
            "#,
        )
        .unwrap();
        let svc = file.service();
        assert!(!svc.streaming);
        assert_eq!(svc.extensions.len(), 1);
        assert!(svc.extensions[0].required);
        assert_eq!((svc.idempotency_ttl_secs, svc.message_id_keys), (60, true));
        assert_eq!(svc.max_streams, file.limits.max_streams);
    }
}
