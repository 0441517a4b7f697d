//! Fan-out of committed task events: the [`EventBus`] trait, its in-process implementation and the
//! conformance suite every implementation must pass.
//!
//! The bus is a notification channel, not the record: events are published *after* they are
//! committed to the store, and a follower that lags or sees a gap re-reads the store's event log.
//! *Boundary*: no bus knows SQL or HTTP.

mod local;
pub mod suite;

use std::sync::Arc;

use a2a_types::v1::StreamResponse;
use async_trait::async_trait;
use futures::stream::BoxStream;

pub use local::LocalEventBus;

/// One committed event of one task.
#[derive(Debug, Clone, PartialEq)]
pub struct BusEvent {
    pub task_id: String,
    pub seq: u64,
    pub event: Arc<StreamResponse>,
}

/// What a subscription yields.
#[derive(Debug, Clone, PartialEq)]
pub enum BusItem {
    Event(BusEvent),
    /// The subscriber fell behind and events were dropped for it: re-read the event log.
    Lagged,
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BusError {
    #[error("event bus unavailable: {0}")]
    Unavailable(String),
}

#[async_trait]
pub trait EventBus: Send + Sync + 'static {
    /// Publishes a committed event to every current subscriber of its task.
    async fn publish(&self, event: BusEvent) -> Result<(), BusError>;

    /// Events of `task_id` published from now on, in publish order. The stream ends after the
    /// task's terminal event has been delivered or when the bus shuts down.
    async fn subscribe(&self, task_id: &str) -> Result<BoxStream<'static, BusItem>, BusError>;
}
