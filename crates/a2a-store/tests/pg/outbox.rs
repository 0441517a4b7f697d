//! The outbox's deletes on PostgreSQL beyond the conformance suite: acknowledged rows are
//! deleted by the next write's own statement (no transaction of their own), skipping rows a
//! relay pass holds instead of waiting for its publish; with no write to ride on, alone.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use a2a_store::{OutboxRelay, TaskStore, Unpublished};
use async_trait::async_trait;

use super::{TestStore, new_task, working};

/// A relay that, while its pass holds the rows it claimed, hands `(t1, 2)` and `(t2, 2)` to
/// `outbox_published` with a create (`t4`) queued right behind, and acknowledges nothing.
struct WhileHeld<'a> {
    store: &'a TestStore,
    claimed: Mutex<Vec<String>>,
    deleted: Mutex<Option<u64>>,
}

#[async_trait]
impl OutboxRelay for WhileHeld<'_> {
    async fn relay(&self, commits: &[Unpublished]) -> Vec<bool> {
        let mut claimed = commits.iter().map(|c| c.task_id.clone()).collect();
        self.claimed.lock().unwrap().append(&mut claimed);
        let published = [("t1".to_owned(), 2), ("t2".to_owned(), 2)];
        // Polled first, the delete is queued before the create: the writer that takes the
        // create takes it along.
        let (deleted, created) = tokio::join!(
            self.store.outbox_published(&published),
            self.store.create(new_task("t4"))
        );
        created.unwrap();
        *self.deleted.lock().unwrap() = Some(deleted.unwrap());
        vec![false; commits.len()]
    }
}

#[tokio::test]
async fn published_rows_ride_on_the_next_write_and_skip_held_ones() {
    let pg = TestStore::new().await;
    // Creates without push configs leave no row (`a2a_store::outboxed`); their appends do.
    for id in ["t1", "t2", "t3"] {
        pg.create(new_task(id)).await.unwrap();
    }
    assert_eq!(pg.outbox_depth(100).await.unwrap().rows, 0);
    for id in ["t1", "t2", "t3"] {
        pg.append(id, 1, working(id)).await.unwrap();
    }
    assert_eq!(pg.outbox_depth(100).await.unwrap().rows, 3);

    // The relay pass holds t1's row (the oldest, limit 1). A delete that waited for it would
    // wait for this very pass: the bound turns that into a failure instead of a hang.
    let relay = WhileHeld {
        store: &pg,
        claimed: Mutex::new(Vec::new()),
        deleted: Mutex::new(None),
    };
    let pass = tokio::time::timeout(
        Duration::from_secs(10),
        pg.relay_outbox(Duration::ZERO, 1, usize::MAX, &relay),
    )
    .await
    .expect("the delete rode on the create and skipped the held row")
    .unwrap();
    assert_eq!(*relay.claimed.lock().unwrap(), ["t1"]);
    assert_eq!((pass.claimed, pass.relayed), (1, 0));
    assert_eq!(
        *relay.deleted.lock().unwrap(),
        Some(1),
        "t2 deleted; t1 held by the relay, left to it"
    );
    // t1 (not acknowledged by the relay) and t3; t4's create has none.
    assert_eq!(pg.outbox_depth(100).await.unwrap().rows, 2);

    // No write to ride on: deleted alone after the linger, counted the same way.
    let started = Instant::now();
    let deleted = pg
        .outbox_published(&[("t1".into(), 2), ("t3".into(), 2), ("nope".into(), 1)])
        .await
        .unwrap();
    assert_eq!(deleted, 2);
    assert!(
        started.elapsed() >= Duration::from_millis(100),
        "lingered first"
    );
    assert_eq!(pg.outbox_depth(100).await.unwrap().rows, 0);
}
