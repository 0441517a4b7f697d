//! The conformance suite of [`AgentRegistryStore`]: every implementation instantiates it with
//! [`registry_conformance_suite!`](crate::registry_conformance_suite), so the in-memory
//! registry and the PostgreSQL one behave the same.

use crate::{AgentRegistryStore, RegistryChange};

/// Instantiates every registry case as a `#[tokio::test]` for the store built by `$make`.
#[macro_export]
macro_rules! registry_conformance_suite {
    ($make:expr) => {
        $crate::registry_conformance_suite!(@cases $make;
            registry_creates_lists_and_refuses_a_taken_name,
            registry_changes_are_guarded_by_the_etag,
            registry_version_moves_with_accepted_changes_only,
            registry_audits_every_accepted_change,
            registry_lists_by_name_up_to_the_limit);
    };
    (@cases $make:expr; $($case:ident),*) => {
        $(
            #[tokio::test]
            async fn $case() {
                let store = $make;
                $crate::suite::$case(&store).await;
            }
        )*
    };
}

fn create<'a>(name: &'a str, etag: &'a str) -> RegistryChange<'a> {
    RegistryChange::Create {
        name,
        entry: "{\"name\":\"x\"}",
        etag,
    }
}

pub async fn registry_creates_lists_and_refuses_a_taken_name(store: &impl AgentRegistryStore) {
    assert!(store.list(10).await.unwrap().is_empty());
    assert!(
        store
            .change(create("billing", "\"1\""), "token:a")
            .await
            .unwrap()
    );
    let taken = RegistryChange::Create {
        name: "billing",
        entry: "{\"other\":true}",
        etag: "\"2\"",
    };
    assert!(!store.change(taken, "token:b").await.unwrap());
    let listed = store.list(10).await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].name, "billing");
    assert_eq!(listed[0].entry, "{\"name\":\"x\"}");
    assert_eq!(listed[0].etag, "\"1\"");
}

pub async fn registry_changes_are_guarded_by_the_etag(store: &impl AgentRegistryStore) {
    assert!(store.change(create("billing", "\"1\""), "w").await.unwrap());
    let replace = |expect| RegistryChange::Replace {
        name: "billing",
        entry: "{\"v\":2}",
        etag: "\"2\"",
        expect,
    };
    // A stale ETag changes nothing.
    assert!(!store.change(replace("\"0\""), "w").await.unwrap());
    assert_eq!(store.list(10).await.unwrap()[0].etag, "\"1\"");
    assert!(store.change(replace("\"1\""), "w").await.unwrap());
    let now = &store.list(10).await.unwrap()[0];
    assert_eq!(
        (now.entry.as_str(), now.etag.as_str()),
        ("{\"v\":2}", "\"2\"")
    );
    // The replace of a missing agent, and deletes: guarded the same way.
    let missing = RegistryChange::Replace {
        name: "nobody",
        entry: "{}",
        etag: "\"9\"",
        expect: "\"1\"",
    };
    assert!(!store.change(missing, "w").await.unwrap());
    let delete = |expect| RegistryChange::Delete {
        name: "billing",
        expect,
    };
    assert!(!store.change(delete("\"1\""), "w").await.unwrap());
    assert!(store.change(delete("\"2\""), "w").await.unwrap());
    assert!(store.list(10).await.unwrap().is_empty());
    assert!(!store.change(delete("\"2\""), "w").await.unwrap());
}

pub async fn registry_version_moves_with_accepted_changes_only(store: &impl AgentRegistryStore) {
    let v0 = store.version().await.unwrap();
    assert!(store.change(create("a", "\"1\""), "w").await.unwrap());
    let v1 = store.version().await.unwrap();
    assert!(v1 > v0);
    assert!(!store.change(create("a", "\"1\""), "w").await.unwrap());
    let stale = RegistryChange::Delete {
        name: "a",
        expect: "\"0\"",
    };
    assert!(!store.change(stale, "w").await.unwrap());
    assert_eq!(
        store.version().await.unwrap(),
        v1,
        "refused changes leave it"
    );
    let delete = RegistryChange::Delete {
        name: "a",
        expect: "\"1\"",
    };
    assert!(store.change(delete, "w").await.unwrap());
    assert!(store.version().await.unwrap() > v1);
}

pub async fn registry_audits_every_accepted_change(store: &impl AgentRegistryStore) {
    assert!(
        store
            .change(create("a", "\"1\""), "token:0123")
            .await
            .unwrap()
    );
    assert!(
        !store
            .change(create("a", "\"1\""), "token:refused")
            .await
            .unwrap()
    );
    let replace = RegistryChange::Replace {
        name: "a",
        entry: "{}",
        etag: "\"2\"",
        expect: "\"1\"",
    };
    assert!(store.change(replace, "oidc:alice").await.unwrap());
    let delete = RegistryChange::Delete {
        name: "a",
        expect: "\"2\"",
    };
    assert!(store.change(delete, "oidc:bob").await.unwrap());
    let audit = store.audit(10).await.unwrap();
    let seen: Vec<(&str, &str, &str, Option<&str>)> = audit
        .iter()
        .map(|r| {
            (
                r.who.as_str(),
                r.action.as_str(),
                r.agent.as_str(),
                r.etag.as_deref(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            ("oidc:bob", "delete", "a", None),
            ("oidc:alice", "replace", "a", Some("\"2\"")),
            ("token:0123", "create", "a", Some("\"1\"")),
        ]
    );
    let now = chrono::Utc::now().timestamp_millis();
    assert!(
        audit.iter().all(|r| (now - r.at_ms).abs() < 60_000),
        "{audit:?}"
    );
    assert_eq!(store.audit(1).await.unwrap().len(), 1);
}

pub async fn registry_lists_by_name_up_to_the_limit(store: &impl AgentRegistryStore) {
    for name in ["c", "a", "b"] {
        assert!(store.change(create(name, "\"1\""), "w").await.unwrap());
    }
    let names = |v: Vec<crate::RegisteredAgent>| v.into_iter().map(|a| a.name).collect::<Vec<_>>();
    assert_eq!(names(store.list(10).await.unwrap()), ["a", "b", "c"]);
    assert_eq!(names(store.list(2).await.unwrap()), ["a", "b"]);
}
