//! API keys stored in PostgreSQL: `a2a-gateway keys create|list|revoke` (the real binary) and a
//! gateway that accepts the created key on every binding until it is revoked.

use std::process::Command;

use a2a_types::A2aError;

use crate::auth::{BINDINGS, client, send};
use crate::harness::TestGateway;

const CONFIG: &str = r#"
[auth.schemes.key]
scheme = { apiKeySecurityScheme = { location = "header", name = "X-API-Key" } }
keys = [{ id = "file-key", key = "from-the-file" }]
"#;

fn keys(url: &str, args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_a2a-gateway"))
        .arg("keys")
        .args(args)
        .env("A2A_DATABASE_URL", url)
        .env_remove("A2A_CONFIG")
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

#[tokio::test]
async fn database_keys_are_created_listed_used_and_revoked() {
    let db = a2a_testing::TestDatabase::create().await;
    let gw = TestGateway::with_database(CONFIG, db.url()).await;
    let (ok, out, err) = keys(db.url(), &["create", "ci"]);
    assert!(ok, "{err}");
    let key = out.lines().next().unwrap().trim().to_owned();
    assert!(key.starts_with("a2a_") && key.len() == 68, "{out}");
    let (ok, _, err) = keys(db.url(), &["create", "ci"]);
    assert!(!ok && err.contains("already exists"), "{err}");
    let (ok, listed, _) = keys(db.url(), &["list"]);
    assert!(
        ok && listed.contains("ci\t") && !listed.contains(&key),
        "{listed}"
    );

    for kind in BINDINGS {
        send(&client(&gw, kind, Some(("x-api-key", &key))))
            .await
            .unwrap();
        send(&client(&gw, kind, Some(("x-api-key", "from-the-file"))))
            .await
            .unwrap();
    }
    let (ok, out, err) = keys(db.url(), &["revoke", "ci"]);
    assert!(ok && out.contains("key ci revoked"), "{out}{err}");
    for kind in BINDINGS {
        let err = send(&client(&gw, kind, Some(("x-api-key", &key))))
            .await
            .unwrap_err();
        assert!(
            matches!(err.as_a2a(), Some(A2aError::Unauthenticated(_))),
            "{kind:?}: {err}"
        );
    }
    let (ok, _, _) = keys(db.url(), &["revoke", "ci"]);
    assert!(!ok, "a revoked key cannot be revoked twice");
}

/// A database key with the same id as a configured one is another owner.
#[tokio::test]
async fn a_database_key_and_a_configured_key_with_one_id_are_different_owners() {
    let db = a2a_testing::TestDatabase::create().await;
    let gw = TestGateway::with_database(CONFIG, db.url()).await;
    let (ok, out, err) = keys(db.url(), &["create", "file-key"]);
    assert!(ok, "{err}");
    let key = out.lines().next().unwrap().trim().to_owned();
    for kind in BINDINGS {
        let from_db = client(&gw, kind, Some(("x-api-key", &key)));
        let from_file = client(&gw, kind, Some(("x-api-key", "from-the-file")));
        crate::auth::assert_separate_owners(&from_db, &from_file, &format!("{kind:?}")).await;
    }
}
