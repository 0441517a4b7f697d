//! The outbox relay (issue 27 item 1, review M5): what a commit must publish is in the store
//! (its outbox row, written by the commit's own statement) until the bus acknowledged it.
//!
//! - *Fast path*: the committing replica publishes right after its commit
//!   ([`A2aService::publish`]) and, once the bus acknowledged, hands `(task id, last seq)` to
//!   [`Outbox::published`]; one task deletes the rows so acknowledged in batches (on
//!   PostgreSQL inside the next write's own statement, so no transaction of their own while
//!   writes go on; alone after a short linger otherwise).
//! - *Left behind*: every replica relays, every [`RELAY_EVERY`], the rows older than
//!   `relay_after` (`A2A_OUTBOX_RELAY_AFTER_MS`): a replica killed between commit and publish,
//!   a publish that failed (Redis unreachable), a delete that failed. The store claims them with
//!   `FOR UPDATE SKIP LOCKED`, reads their events back (those above the inline limit are
//!   announced, not read), and deletes what the bus acknowledged, in one transaction.
//!
//! Delivery is at least once: a row relayed by another replica while its own replica was only
//! slow, or a delete lost after the publish, publishes its events again. Followers skip
//! sequence numbers they have, and the push worker's progress per config is the ledger's, so a
//! duplicate changes nothing. A store without an outbox (in memory) has no relay.

use std::sync::Arc;
use std::time::Duration;

use a2a_bus::{BusEvent, EventBus};
use a2a_store::{OutboxRelay, TaskStore, Unpublished};
use async_trait::async_trait;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// The outbox relay's settings (`A2A_OUTBOX_RELAY_AFTER_MS`, `A2A_REDIS_INLINE_MAX_BYTES`, which
/// `crate::config` reads).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutboxSettings {
    /// An outbox row this old is left behind: any replica relays it.
    pub relay_after: Duration,
    /// Events encoded larger than this many bytes are announced on the bus, not carried.
    pub inline_max: usize,
}

impl Default for OutboxSettings {
    fn default() -> Self {
        Self {
            relay_after: Duration::from_secs(5),
            inline_max: a2a_bus::DEFAULT_INLINE_MAX,
        }
    }
}

/// Acknowledged commits waiting for their rows' delete; beyond it an acknowledgement is
/// dropped (`a2a_outbox_ack_dropped_total`) and its row relayed again later, once.
const ACK_QUEUE: usize = 65_536;
/// Rows deleted per statement at most.
const DELETE_BATCH: usize = 4096;
/// How often each replica looks for rows left behind (and samples the outbox's depth).
pub const RELAY_EVERY: Duration = Duration::from_secs(1);
/// Rows one relay pass claims; passes follow each other while they come back full.
const RELAY_BATCH: usize = 256;
/// Passes per round at most, so a huge backlog is worked off over several rounds.
const PASSES_PER_ROUND: usize = 64;
/// The depth is counted up to this many rows (a bounded count during an outage).
const DEPTH_COUNT_UP_TO: u64 = 1_000_000;

/// This process's side of the outbox: the queue of acknowledged commits.
pub(crate) struct Outbox {
    acks: mpsc::Sender<(String, u64)>,
}

impl Outbox {
    /// Starts the deleter and the relay of rows left behind, until `shutdown`.
    pub fn start(
        store: Arc<dyn TaskStore>,
        bus: Arc<dyn EventBus>,
        settings: OutboxSettings,
        shutdown: CancellationToken,
    ) -> Self {
        let (acks, rx) = mpsc::channel(ACK_QUEUE);
        tokio::spawn(delete_acknowledged(store.clone(), rx, shutdown.clone()));
        tokio::spawn(relay_left_behind(store, bus, settings, shutdown));
        Self { acks }
    }

    /// The bus acknowledged the commit of `task_id` ending at `seq`: its row may go.
    pub fn published(&self, task_id: &str, seq: u64) {
        metrics::counter!("a2a_outbox_relayed_total", "path" => "commit").increment(1);
        if self.acks.try_send((task_id.to_owned(), seq)).is_err() {
            // The row stays and is relayed again once left behind: a duplicate, not a loss.
            metrics::counter!("a2a_outbox_ack_dropped_total").increment(1);
        }
    }
}

/// Deletes the rows of acknowledged commits, everything queued at once in one statement.
async fn delete_acknowledged(
    store: Arc<dyn TaskStore>,
    mut rx: mpsc::Receiver<(String, u64)>,
    shutdown: CancellationToken,
) {
    let mut batch = Vec::new();
    loop {
        // On shutdown the queue is drained first: fewer rows for the others to relay again.
        let first = tokio::select! {
            biased;
            first = rx.recv() => first,
            _ = shutdown.cancelled() => rx.try_recv().ok(),
        };
        let Some(first) = first else { return };
        batch.push(first);
        while batch.len() < DELETE_BATCH {
            match rx.try_recv() {
                Ok(ack) => batch.push(ack),
                Err(_) => break,
            }
        }
        if let Err(e) = store.outbox_published(&batch).await {
            // The rows stay: relayed again once left behind (a duplicate publish).
            tracing::warn!(rows = batch.len(), error = %e, "cannot delete published outbox rows");
        }
        batch.clear();
    }
}

/// Every [`RELAY_EVERY`]: relays the rows left behind, then samples the outbox's depth.
async fn relay_left_behind(
    store: Arc<dyn TaskStore>,
    bus: Arc<dyn EventBus>,
    settings: OutboxSettings,
    shutdown: CancellationToken,
) {
    let relay = BusRelay { bus };
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(RELAY_EVERY) => {}
        }
        relay_round(store.as_ref(), &relay, settings).await;
        match store.outbox_depth(DEPTH_COUNT_UP_TO).await {
            Ok(depth) => {
                metrics::gauge!("a2a_outbox_rows").set(depth.rows as f64);
                metrics::gauge!("a2a_outbox_oldest_seconds").set(depth.oldest_secs);
            }
            Err(e) => tracing::debug!(error = %e, "cannot read the outbox's depth"),
        }
    }
}

/// One round: passes while they come back full (at most [`PASSES_PER_ROUND`]); returns the
/// rows relayed.
pub(crate) async fn relay_round(
    store: &dyn TaskStore,
    relay: &dyn OutboxRelay,
    settings: OutboxSettings,
) -> u64 {
    let mut relayed = 0;
    for _ in 0..PASSES_PER_ROUND {
        match store
            .relay_outbox(
                settings.relay_after,
                RELAY_BATCH,
                settings.inline_max,
                relay,
            )
            .await
        {
            Ok(pass) => {
                relayed += pass.relayed;
                if pass.relayed > 0 {
                    metrics::counter!("a2a_outbox_relayed_total", "path" => "left_behind")
                        .increment(pass.relayed);
                }
                if pass.claimed > pass.relayed {
                    metrics::counter!("a2a_outbox_relay_failures_total")
                        .increment(pass.claimed - pass.relayed);
                }
                // Not full, or the bus refused some: try again next round.
                if pass.claimed < RELAY_BATCH as u64 || pass.relayed < pass.claimed {
                    break;
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "the outbox relay failed; retrying next round");
                break;
            }
        }
    }
    if relayed > 0 {
        tracing::info!(
            commits = relayed,
            "relayed commits left behind in the outbox (a replica died before publishing, or \
             the bus was unreachable)"
        );
    }
    relayed
}

/// Publishes read-back commits on the bus: the commits of one task in order, tasks at once.
pub(crate) struct BusRelay {
    pub bus: Arc<dyn EventBus>,
}

#[async_trait]
impl OutboxRelay for BusRelay {
    async fn relay(&self, commits: &[Unpublished]) -> Vec<bool> {
        // The store answers them ordered by task, then sequence number.
        let mut groups: Vec<&[Unpublished]> = Vec::new();
        let mut start = 0;
        for i in 1..=commits.len() {
            if i == commits.len() || commits[i].task_id != commits[start].task_id {
                groups.push(&commits[start..i]);
                start = i;
            }
        }
        let results = futures::future::join_all(groups.into_iter().map(|group| async move {
            let mut acked = Vec::with_capacity(group.len());
            let mut failed = false;
            for commit in group {
                if failed || commit.events.is_empty() {
                    // After a failure the later commits of the task wait for the next round
                    // (in order); a commit whose task is gone has nothing to publish.
                    acked.push(!failed);
                    continue;
                }
                let events = commit
                    .events
                    .iter()
                    .map(|(seq, event)| match event {
                        Some(event) => BusEvent {
                            task_id: commit.task_id.clone(),
                            seq: *seq,
                            event: event.clone(),
                            trace: None,
                            // The row does not say: the worker finds out.
                            push: true,
                        },
                        None => BusEvent::announcement(commit.task_id.clone(), *seq),
                    })
                    .collect();
                match self.bus.publish_all(events).await {
                    Ok(()) => acked.push(true),
                    Err(e) => {
                        tracing::debug!(task_id = %commit.task_id, error = %e, "relaying an outbox row failed");
                        failed = true;
                        acked.push(false);
                    }
                }
            }
            acked
        }))
        .await;
        results.into_iter().flatten().collect()
    }
}
