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
//! *Invariant*: an entry is acknowledged only after every webhook of its task got the event or
//! a dead letter records that it did not (at least once, never silently dropped).

pub mod deliver;
pub mod embedded;
pub mod memory;
pub mod metrics;
pub mod payload;
pub mod pipeline;
pub mod retry;
pub mod webhook;

use std::time::Duration;

use a2a_store::StoreResult;
use a2a_store::pg::{AttemptRecord, ClaimOutcome, NewDeadLetter, PgDeliveryStore};
use a2a_types::v1::StreamResponse;
use async_trait::async_trait;

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

    /// Extends the lease `worker` holds; false when it no longer holds it.
    async fn renew(&self, task_id: &str, worker: &str, lease: Duration) -> StoreResult<bool>;

    /// Records that every event up to `seq` is done and, with `release`, frees the lease; false
    /// when `worker` no longer held it.
    async fn advance(
        &self,
        task_id: &str,
        worker: &str,
        seq: u64,
        release: bool,
    ) -> StoreResult<bool>;

    /// The task's events with `after < seq <= upto`, in order.
    async fn events(
        &self,
        task_id: &str,
        after: u64,
        upto: u64,
    ) -> StoreResult<Vec<(u64, StreamResponse)>>;

    /// Appends attempts to the delivery log.
    async fn log(&self, worker: &str, attempts: &[AttemptRecord]) -> StoreResult<()>;

    /// Records a delivery that gave up.
    async fn add_dead_letter(&self, letter: &NewDeadLetter) -> StoreResult<()>;
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

    async fn renew(&self, task_id: &str, worker: &str, lease: Duration) -> StoreResult<bool> {
        PgDeliveryStore::renew(self, task_id, worker, lease).await
    }

    async fn advance(
        &self,
        task_id: &str,
        worker: &str,
        seq: u64,
        release: bool,
    ) -> StoreResult<bool> {
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

    async fn add_dead_letter(&self, letter: &NewDeadLetter) -> StoreResult<()> {
        PgDeliveryStore::add_dead_letter(self, letter)
            .await
            .map(|_| ())
    }
}
