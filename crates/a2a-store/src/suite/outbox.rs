//! Outbox cases of the conformance suite (issue 27 item 1): every commit is remembered as still
//! to be published, in the commit's own transaction, until it is acknowledged; what is left
//! behind is relayed by whoever claims it first, and only once at a time.

use std::sync::Mutex;
use std::time::Duration;

use a2a_types::v1::TaskState;
use async_trait::async_trait;

use super::{new_task, new_task_with_push, status};
use crate::{OutboxRelay, PushQuota, RelayPass, StoreError, TaskStore, Unpublished};

/// What a [`Recorder`] saw of one commit.
type Seen = (String, u64, Vec<(u64, bool)>);

/// A relay that records what it is given and acknowledges it or not; when `nested` is set, it
/// runs a second relay pass on the store from inside its own (as another replica would, at the
/// same moment) and records what that one claimed.
struct Recorder<'a> {
    ack: bool,
    seen: Mutex<Vec<Unpublished>>,
    nested: Option<&'a dyn TaskStore>,
    nested_pass: Mutex<Option<RelayPass>>,
}

impl<'a> Recorder<'a> {
    fn new(ack: bool, nested: Option<&'a dyn TaskStore>) -> Self {
        Self {
            ack,
            seen: Mutex::new(Vec::new()),
            nested,
            nested_pass: Mutex::new(None),
        }
    }

    /// Per commit: task id, last sequence number, and per event whether it was read back.
    fn seen(&self) -> Vec<Seen> {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .map(|c| {
                let events = c.events.iter().map(|(s, e)| (*s, e.is_some())).collect();
                (c.task_id.clone(), c.seq, events)
            })
            .collect()
    }
}

#[async_trait]
impl OutboxRelay for Recorder<'_> {
    async fn relay(&self, commits: &[Unpublished]) -> Vec<bool> {
        if let Some(store) = self.nested {
            let other = Recorder::new(true, None);
            let pass = store
                .relay_outbox(Duration::ZERO, 100, usize::MAX, &other)
                .await
                .unwrap();
            *self.nested_pass.lock().unwrap() = Some(pass);
        }
        self.seen.lock().unwrap().extend(commits.iter().cloned());
        vec![self.ack; commits.len()]
    }
}

/// What a store with an outbox keeps: a row per commit (create or append, one or several
/// events), none for a refused write nor for the create of a task without push configs
/// ([`crate::outboxed`]); deleted once published; relayed when old enough, with the
/// commit's events read back in order (those above the inline limit not read); claimed by one
/// relay at a time; kept when the relay's publish failed. A store without an outbox relays
/// nothing.
pub async fn outbox_keeps_what_was_not_published(store: &dyn TaskStore) {
    let idle = Recorder::new(true, None);
    if !store.has_outbox() {
        let pass = store
            .relay_outbox(Duration::ZERO, 100, usize::MAX, &idle)
            .await
            .unwrap();
        assert_eq!(pass, RelayPass::default());
        assert!(idle.seen().is_empty());
        return;
    }
    // t1: created (seq 1: no row, no push config), then two events in one commit (2..=3); t2:
    // created with a push config and a change (1..=2); t3: created without one (no row); t4:
    // created with a push config, then published and acknowledged.
    let created = store
        .create(new_task("alice", "t1", "c1", 1_000))
        .await
        .unwrap();
    assert!(!crate::outboxed(&created));
    store
        .append_all(
            "t1",
            1,
            vec![
                status("t1", TaskState::Working, 2_000),
                status("t1", TaskState::Completed, 3_000),
            ],
        )
        .await
        .unwrap();
    let (created, _) = store
        .create_with(
            new_task_with_push("alice", "t2", "cfg", PushQuota::NONE),
            vec![status("t2", TaskState::Working, 2_000)],
        )
        .await
        .unwrap();
    assert!(crate::outboxed(&created[0]));
    store
        .create(new_task("alice", "t3", "c1", 1_000))
        .await
        .unwrap();
    store
        .create(new_task_with_push("alice", "t4", "cfg", PushQuota::NONE))
        .await
        .unwrap();
    // A refused write (a stale sequence number) leaves no row.
    let stale = store
        .append("t2", 1, status("t2", TaskState::Failed, 4_000))
        .await;
    assert!(
        matches!(stale, Err(StoreError::Conflict { .. })),
        "{stale:?}"
    );
    assert_eq!(store.outbox_depth(100).await.unwrap().rows, 3);

    assert_eq!(
        store
            .outbox_published(&[("t4".into(), 1), ("t3".into(), 1), ("nope".into(), 9)])
            .await
            .unwrap(),
        1,
        "acknowledged rows go; unknown ones are ignored"
    );
    assert_eq!(store.outbox_depth(100).await.unwrap().rows, 2);

    // Too young to be left behind: the committing replica still has them.
    let young = Recorder::new(true, None);
    let pass = store
        .relay_outbox(Duration::from_secs(3600), 100, usize::MAX, &young)
        .await
        .unwrap();
    assert_eq!(pass, RelayPass::default());

    // Left behind, and the bus refuses: read back in order, kept. Another relay running at the
    // same moment claims none of them.
    let refused = Recorder::new(false, Some(store));
    let pass = store
        .relay_outbox(Duration::ZERO, 100, usize::MAX, &refused)
        .await
        .unwrap();
    assert_eq!(
        pass,
        RelayPass {
            claimed: 2,
            relayed: 0
        }
    );
    assert_eq!(
        refused.seen(),
        vec![
            ("t1".to_owned(), 3, vec![(2, true), (3, true)]),
            ("t2".to_owned(), 2, vec![(1, true), (2, true)]),
        ]
    );
    assert_eq!(
        *refused.nested_pass.lock().unwrap(),
        Some(RelayPass::default()),
        "claimed rows are skipped by other relays"
    );
    assert_eq!(store.outbox_depth(100).await.unwrap().rows, 2);

    // Events above the inline limit are not read back; acknowledged, the rows go.
    let small = Recorder::new(true, None);
    let pass = store
        .relay_outbox(Duration::ZERO, 100, 1, &small)
        .await
        .unwrap();
    assert_eq!(
        pass,
        RelayPass {
            claimed: 2,
            relayed: 2
        }
    );
    assert_eq!(
        small.seen(),
        vec![
            ("t1".to_owned(), 3, vec![(2, false), (3, false)]),
            ("t2".to_owned(), 2, vec![(1, false), (2, false)]),
        ]
    );
    let depth = store.outbox_depth(100).await.unwrap();
    assert_eq!(depth.rows, 0);
    assert_eq!(depth.oldest_secs, 0.0);
}
