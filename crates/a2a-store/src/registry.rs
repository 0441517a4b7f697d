//! The upstream agents registered at run time (the gateway's admin API, `/admin/v1/agents`):
//! the [`AgentRegistryStore`] trait, its in-memory implementation, and (with the `postgres`
//! feature) the table every replica shares.
//!
//! *Invariant*: every change is guarded (a create by the name being free, a replace or delete
//! by the entry's current ETag), and an accepted change moves the [`version`] and writes its
//! audit record in the same atomic step; a refused one changes nothing.
//! *Boundary*: the store keeps entries as opaque JSON text; what an entry means (and that it
//! holds no secret) is the gateway's business.
//!
//! [`version`]: AgentRegistryStore::version

use std::collections::{BTreeMap, VecDeque};
use std::sync::Mutex;

use async_trait::async_trait;

use crate::StoreResult;

#[cfg(feature = "postgres")]
mod pg;
#[cfg(feature = "postgres")]
pub use pg::PgAgentRegistry;

/// One agent registered at run time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegisteredAgent {
    pub name: String,
    /// The entry as JSON text (the gateway's `[[agents]]` field names).
    pub entry: String,
    /// Its strong ETag (`If-Match`).
    pub etag: String,
}

/// One change, with its guard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RegistryChange<'a> {
    /// Applies only if no agent has the name.
    Create {
        name: &'a str,
        entry: &'a str,
        etag: &'a str,
    },
    /// Applies only if the agent's ETag is still `expect`.
    Replace {
        name: &'a str,
        entry: &'a str,
        etag: &'a str,
        expect: &'a str,
    },
    /// Applies only if the agent's ETag is still `expect`.
    Delete { name: &'a str, expect: &'a str },
}

impl RegistryChange<'_> {
    /// The audit record's `action`.
    pub fn action(&self) -> &'static str {
        match self {
            Self::Create { .. } => "create",
            Self::Replace { .. } => "replace",
            Self::Delete { .. } => "delete",
        }
    }

    pub fn name(&self) -> &str {
        match self {
            Self::Create { name, .. } | Self::Replace { name, .. } | Self::Delete { name, .. } => {
                name
            }
        }
    }

    /// The ETag the agent has after the change (none once deleted).
    pub fn etag(&self) -> Option<&str> {
        match self {
            Self::Create { etag, .. } | Self::Replace { etag, .. } => Some(etag),
            Self::Delete { .. } => None,
        }
    }
}

/// Who changed what, when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditRecord {
    /// Unix milliseconds.
    pub at_ms: i64,
    /// The caller as the gateway names it (`token:<digest prefix>`, `oidc:<subject>`).
    pub who: String,
    /// `create`, `replace` or `delete`.
    pub action: String,
    pub agent: String,
    /// The agent's ETag after the change (none after a delete).
    pub etag: Option<String>,
}

#[async_trait]
pub trait AgentRegistryStore: Send + Sync + 'static {
    /// A counter that moves with every accepted change (and only then): a replica re-reads
    /// [`AgentRegistryStore::list`] when it differs from the one it applied.
    async fn version(&self) -> StoreResult<i64>;

    /// The agents, by name, at most `limit`.
    async fn list(&self, limit: usize) -> StoreResult<Vec<RegisteredAgent>>;

    /// Applies `change` if its guard holds, with its audit record (`who`) and a version bump,
    /// atomically. `Ok(false)`: the guard did not hold (the name is taken, or the ETag moved)
    /// and nothing changed.
    async fn change(&self, change: RegistryChange<'_>, who: &str) -> StoreResult<bool>;

    /// The most recent audit records, newest first, at most `limit`.
    async fn audit(&self, limit: usize) -> StoreResult<Vec<AuditRecord>>;
}

/// The in-memory registry (embedded mode): this process's agents, lost at a restart. It keeps
/// the last [`MemoryAgentRegistry::AUDIT_KEPT`] audit records.
#[derive(Default)]
pub struct MemoryAgentRegistry {
    inner: Mutex<MemoryInner>,
}

#[derive(Default)]
struct MemoryInner {
    agents: BTreeMap<String, RegisteredAgent>,
    version: i64,
    audit: VecDeque<AuditRecord>,
}

impl MemoryAgentRegistry {
    /// The audit records kept (the oldest are dropped beyond).
    pub const AUDIT_KEPT: usize = 1000;

    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, MemoryInner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[async_trait]
impl AgentRegistryStore for MemoryAgentRegistry {
    async fn version(&self) -> StoreResult<i64> {
        Ok(self.lock().version)
    }

    async fn list(&self, limit: usize) -> StoreResult<Vec<RegisteredAgent>> {
        Ok(self.lock().agents.values().take(limit).cloned().collect())
    }

    async fn change(&self, change: RegistryChange<'_>, who: &str) -> StoreResult<bool> {
        let mut inner = self.lock();
        let agent = |name: &str, entry: &str, etag: &str| RegisteredAgent {
            name: name.to_owned(),
            entry: entry.to_owned(),
            etag: etag.to_owned(),
        };
        let current = inner.agents.get(change.name()).map(|a| a.etag.as_str());
        let done = match change {
            RegistryChange::Create { name, entry, etag } if current.is_none() => {
                inner
                    .agents
                    .insert(name.to_owned(), agent(name, entry, etag));
                true
            }
            RegistryChange::Replace {
                name,
                entry,
                etag,
                expect,
            } if current == Some(expect) => {
                inner
                    .agents
                    .insert(name.to_owned(), agent(name, entry, etag));
                true
            }
            RegistryChange::Delete { name, expect } if current == Some(expect) => {
                inner.agents.remove(name);
                true
            }
            _ => false,
        };
        if done {
            inner.version += 1;
            if inner.audit.len() >= Self::AUDIT_KEPT {
                inner.audit.pop_front();
            }
            inner.audit.push_back(AuditRecord {
                at_ms: chrono::Utc::now().timestamp_millis(),
                who: who.to_owned(),
                action: change.action().to_owned(),
                agent: change.name().to_owned(),
                etag: change.etag().map(str::to_owned),
            });
        }
        Ok(done)
    }

    async fn audit(&self, limit: usize) -> StoreResult<Vec<AuditRecord>> {
        Ok(self
            .lock()
            .audit
            .iter()
            .rev()
            .take(limit)
            .cloned()
            .collect())
    }
}

#[cfg(test)]
mod tests {
    crate::registry_conformance_suite!(super::MemoryAgentRegistry::new());

    use super::*;

    #[tokio::test]
    async fn the_audit_log_keeps_the_most_recent_records() {
        let registry = MemoryAgentRegistry::new();
        for i in 0..MemoryAgentRegistry::AUDIT_KEPT + 5 {
            let name = format!("a{i}");
            let change = RegistryChange::Create {
                name: &name,
                entry: "{}",
                etag: "\"1\"",
            };
            assert!(registry.change(change, "token:x").await.unwrap());
        }
        let audit = registry.audit(usize::MAX).await.unwrap();
        assert_eq!(audit.len(), MemoryAgentRegistry::AUDIT_KEPT);
        assert_eq!(
            audit[0].agent,
            format!("a{}", MemoryAgentRegistry::AUDIT_KEPT + 4)
        );
    }
}
