//! Retention of the delivery log, as the worker runs it: one pass deletes the rows older than
//! the configured retention and counts them on `/metrics`; retention 0 keeps everything.

use std::time::Duration;

use a2a_store::pg::PgDeliveryStore;
use a2a_worker::config::WorkerConfig;
use a2a_worker::retention::prune_once;

fn retention(hours: &str) -> Duration {
    let env = [
        ("A2A_DATABASE_URL", "postgres://x/y"),
        ("A2A_WORKER_LOG_RETENTION_HOURS", hours),
    ];
    WorkerConfig::load(a2a_testing::env_of(&env))
        .unwrap()
        .log_retention
}

#[tokio::test]
async fn a_pass_prunes_old_rows_and_counts_them() {
    let db = a2a_testing::TestDatabase::create().await;
    let store = PgDeliveryStore::connect_lazy(db.url(), 2, Duration::from_secs(3)).unwrap();
    store.migrate().await.unwrap();
    let hour = 3600.0;
    a2a_testing::insert_delivery_log_rows(
        store.pool(),
        "old",
        &[50.0 * hour, 49.0 * hour, 48.5 * hour],
    )
    .await;
    a2a_testing::insert_delivery_log_rows(store.pool(), "young", &[47.0 * hour, 0.0]).await;

    let handle = a2a_process::metrics::install("a2a-worker-test", "0");
    let before = pruned_total(&handle);
    assert_eq!(prune_once(&store, retention("0"), 2).await.unwrap(), 0);
    assert_eq!(store.logged_attempts("old").await.unwrap().len(), 3);

    assert_eq!(prune_once(&store, retention("48"), 2).await.unwrap(), 3);
    assert!(store.logged_attempts("old").await.unwrap().is_empty());
    assert_eq!(store.logged_attempts("young").await.unwrap().len(), 2);
    assert_eq!(pruned_total(&handle) - before, 3.0);
}

/// `a2a_worker_log_pruned_total` now (the recorder is the test process's: other tests may
/// have counted before, so the test looks at the difference).
fn pruned_total(handle: &metrics_exporter_prometheus::PrometheusHandle) -> f64 {
    a2a_process::metrics::render(handle)
        .lines()
        .find_map(|l| l.strip_prefix("a2a_worker_log_pruned_total "))
        .map_or(0.0, |v| v.parse().unwrap())
}
