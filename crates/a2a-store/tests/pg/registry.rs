//! The agent registry's conformance suite on PostgreSQL, and what only a shared table shows:
//! two processes racing for one name or one ETag, one wins.

use a2a_store::{
    AgentRegistryStore, AuditRecord, PgAgentRegistry, PgOptions, PgTaskStore, RegisteredAgent,
    RegistryChange, StoreResult,
};
use a2a_testing::TestDatabase;
use async_trait::async_trait;

/// A registry on a fresh, migrated database (dropped with it).
struct TestRegistry {
    registry: PgAgentRegistry,
    db: TestDatabase,
}

impl TestRegistry {
    async fn new() -> Self {
        let db = TestDatabase::create().await;
        let store = PgTaskStore::connect_lazy(db.url(), &PgOptions::default()).unwrap();
        store.migrate().await.unwrap();
        let registry = PgAgentRegistry::connect_lazy(db.url()).unwrap();
        Self { registry, db }
    }

    /// Another process's registry on the same database.
    fn twin(&self) -> PgAgentRegistry {
        PgAgentRegistry::connect_lazy(self.db.url()).unwrap()
    }
}

#[async_trait]
impl AgentRegistryStore for TestRegistry {
    async fn version(&self) -> StoreResult<i64> {
        self.registry.version().await
    }
    async fn list(&self, limit: usize) -> StoreResult<Vec<RegisteredAgent>> {
        self.registry.list(limit).await
    }
    async fn change(&self, change: RegistryChange<'_>, who: &str) -> StoreResult<bool> {
        self.registry.change(change, who).await
    }
    async fn audit(&self, limit: usize) -> StoreResult<Vec<AuditRecord>> {
        self.registry.audit(limit).await
    }
}

mod conformance {
    a2a_store::registry_conformance_suite!(super::TestRegistry::new().await);
}

#[tokio::test]
async fn concurrent_changes_from_two_processes_have_one_winner() {
    let a = TestRegistry::new().await;
    let b = a.twin();
    let create = |etag| RegistryChange::Create {
        name: "billing",
        entry: "{}",
        etag,
    };
    let (x, y) = tokio::join!(
        a.change(create("\"a\""), "a"),
        b.change(create("\"b\""), "b")
    );
    assert_ne!(x.unwrap(), y.unwrap(), "exactly one create wins");
    let etag = a.list(10).await.unwrap()[0].etag.clone();
    let replace = |new| RegistryChange::Replace {
        name: "billing",
        entry: "{}",
        etag: new,
        expect: &etag,
    };
    let (x, y) = tokio::join!(
        a.change(replace("\"a2\""), "a"),
        b.change(replace("\"b2\""), "b")
    );
    assert_ne!(
        x.unwrap(),
        y.unwrap(),
        "exactly one replace under one ETag wins"
    );
    assert_eq!(b.version().await.unwrap(), a.version().await.unwrap());
    assert_eq!(a.audit(10).await.unwrap().len(), 2);
}
