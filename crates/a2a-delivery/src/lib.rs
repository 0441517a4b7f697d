//! Push-notification delivery: the one implementation behind `a2a-worker` (entries from the
//! Redis consumer group, state in PostgreSQL) and the embedded gateway (entries from its
//! in-process bus, state beside its in-memory store).
//!
//! Layout: [`pipeline`] (entries → per-task ordered batches under a lease), [`deliver`]
//! (retries, delivery log, dead letters), [`webhook`] (one signed HTTP attempt behind the SSRF
//! guard), [`payload`] (what a webhook of each dialect receives), [`metrics`], [`retry`]; [`memory`] and [`embedded`] are the in-process side. Where
//! entries come from and where delivery state lives are the two traits below, [`Acknowledge`]
//! and [`DeliveryStore`].
//!
//! *Invariant*: the ledger, not the stream, is the record of what must go out: the task's event
//! log and its delivery progress (`push_progress` on PostgreSQL). An entry is acknowledged once
//! the progress that covers it is held under the task's lease (or the task has nothing to
//! deliver); whatever an entry was lost for (trimmed, a Redis restart, a crash after the
//! acknowledgement), the reconciliation sweep ([`DeliveryStore::behind`]) finds the task behind
//! its log and delivers the rest in order. Every event of a task with push configs reaches each
//! webhook at least once, or a dead letter says why not.

pub mod deliver;
pub mod embedded;
pub mod gates;
pub mod memory;
pub mod metrics;
pub mod payload;
pub mod pipeline;
pub mod retry;
pub mod webhook;

use std::time::Duration;

use a2a_store::StoreResult;
use a2a_store::pg::{
    Advanced, AttemptRecord, Behind, ClaimOutcome, NewDeadLetter, PgDeliveryStore, Release,
};
use a2a_types::v1::StreamResponse;
use async_trait::async_trait;

pub use gates::Limits;
pub use retry::{MAX_RETRY_AFTER, RetryPolicy};

/// Where the entries came from: told when the pipeline is done with them.
#[async_trait]
pub trait Acknowledge: Send + Sync + 'static {
    /// The entries `ids` are delivered or dead-lettered; an error leaves them to be handed out
    /// again (the source's business).
    async fn ack(&self, ids: &[String]) -> Result<(), String>;
}

/// What delivery reads and records: a task's push configs, progress and lease, its event log,
/// the delivery log and the dead letters. Not owner-scoped; no binding ever uses it.
#[async_trait]
pub trait DeliveryStore: Send + Sync + 'static {
    /// Takes (or renews) the task's lease for `worker`; returns its progress and push configs.
    /// A task with no recorded progress starts at `first_seq`.
    async fn claim(
        &self,
        task_id: &str,
        worker: &str,
        first_seq: u64,
        lease: Duration,
    ) -> StoreResult<ClaimOutcome>;

    /// Extends the leases `worker` holds on `task_ids`, all in one go; returns those it no
    /// longer holds.
    async fn renew(
        &self,
        task_ids: &[String],
        worker: &str,
        lease: Duration,
    ) -> StoreResult<Vec<String>>;

    /// Records that every event up to `seq` is done and frees the lease as `release` says (see
    /// [`Release::IfDone`]: a holder never frees a lease while its task's log goes on).
    async fn advance(
        &self,
        task_id: &str,
        worker: &str,
        seq: u64,
        release: Release,
    ) -> StoreResult<Advanced>;

    /// The task's events with `after < seq <= upto`, in order.
    async fn events(
        &self,
        task_id: &str,
        after: u64,
        upto: u64,
    ) -> StoreResult<Vec<(u64, StreamResponse)>>;

    /// Appends attempts to the delivery log.
    async fn log(&self, worker: &str, attempts: &[AttemptRecord]) -> StoreResult<()>;

    /// Records a delivery that gave up (its config's secrets redacted), keeping at most
    /// `per_owner` dead letters of the task's owner (0 = no cap).
    async fn add_dead_letter(&self, letter: &NewDeadLetter, per_owner: u64) -> StoreResult<()>;

    /// The reconciliation sweep: tasks (at most `limit`) whose delivery is behind their event
    /// log and whose lease is free, not looked at for `interval`; and how many tasks were found
    /// gone (their progress forgotten).
    async fn behind(&self, limit: u32, interval: Duration) -> StoreResult<(Vec<Behind>, u64)>;
}

#[async_trait]
impl DeliveryStore for PgDeliveryStore {
    async fn claim(
        &self,
        task_id: &str,
        worker: &str,
        first_seq: u64,
        lease: Duration,
    ) -> StoreResult<ClaimOutcome> {
        PgDeliveryStore::claim(self, task_id, worker, first_seq, lease).await
    }

    async fn renew(
        &self,
        task_ids: &[String],
        worker: &str,
        lease: Duration,
    ) -> StoreResult<Vec<String>> {
        PgDeliveryStore::renew(self, task_ids, worker, lease).await
    }

    async fn advance(
        &self,
        task_id: &str,
        worker: &str,
        seq: u64,
        release: Release,
    ) -> StoreResult<Advanced> {
        PgDeliveryStore::advance(self, task_id, worker, seq, release).await
    }

    async fn events(
        &self,
        task_id: &str,
        after: u64,
        upto: u64,
    ) -> StoreResult<Vec<(u64, StreamResponse)>> {
        PgDeliveryStore::events(self, task_id, after, upto).await
    }

    async fn log(&self, worker: &str, attempts: &[AttemptRecord]) -> StoreResult<()> {
        PgDeliveryStore::log(self, worker, attempts).await
    }

    async fn add_dead_letter(&self, letter: &NewDeadLetter, per_owner: u64) -> StoreResult<()> {
        PgDeliveryStore::add_dead_letter(self, letter, per_owner)
            .await
            .map(|_| ())
    }

    async fn behind(&self, limit: u32, interval: Duration) -> StoreResult<(Vec<Behind>, u64)> {
        PgDeliveryStore::sweep(self, limit, interval).await
    }
}
