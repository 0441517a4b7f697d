//! Readiness on its own connection (`pg::health`): a saturated request pool does not make the
//! store unready, and the schema gate holds until `_sqlx_migrations` is this binary's.

use std::time::{Duration, Instant};

use a2a_store::{PgOptions, PgTaskStore, StoreError, TaskStore};
use a2a_testing::TestDatabase;

#[tokio::test]
async fn ping_answers_while_the_request_pool_is_exhausted() {
    let db = TestDatabase::create().await;
    let options = PgOptions {
        pool_size: 2,
        acquire_timeout: Duration::from_secs(5),
        ..PgOptions::default()
    };
    let store = PgTaskStore::connect_lazy(db.url(), &options).unwrap();
    store.migrate().await.unwrap();
    // Every request connection taken (the writers hold theirs only while writing).
    let mut held = Vec::new();
    while held.len() < 2 {
        held.push(store.pool().acquire().await.unwrap());
    }
    let start = Instant::now();
    store
        .ping()
        .await
        .expect("ready although the request pool is exhausted");
    assert!(
        start.elapsed() < Duration::from_secs(2),
        "{:?}",
        start.elapsed()
    );
    drop(held);
}

#[tokio::test]
async fn ping_is_unready_until_the_schema_matches() {
    let db = TestDatabase::create().await;
    let store = PgTaskStore::connect_lazy(db.url(), &PgOptions::default()).unwrap();
    let schema_error = |r: Result<(), StoreError>| match r {
        Err(StoreError::Unavailable(m))
            if m.starts_with(a2a_store::pg::health::SCHEMA_MISMATCH) =>
        {
            m
        }
        other => panic!("expected a schema mismatch, got {other:?}"),
    };
    assert!(schema_error(store.ping().await).contains("no migration was applied"));
    store.migrate().await.unwrap();
    // A newer release's migration: this binary does not know it.
    sqlx::query(
        "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time) \
         VALUES (999999, 'from the future', true, '\\x00', 0)",
    )
    .execute(store.pool())
    .await
    .unwrap();
    assert!(schema_error(store.ping().await).contains("does not know ([999999])"));
    sqlx::query("DELETE FROM _sqlx_migrations WHERE version = 999999")
        .execute(store.pool())
        .await
        .unwrap();
    store.ping().await.expect("ready once the schema matches");
    // Checked until it passes once: a later migration by a newer release keeps it ready.
    sqlx::query(
        "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time) \
         VALUES (999999, 'from the future', true, '\\x00', 0)",
    )
    .execute(store.pool())
    .await
    .unwrap();
    store.ping().await.expect("still ready");
}
