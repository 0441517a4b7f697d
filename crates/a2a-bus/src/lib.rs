//! Fan-out of committed task events: the [`EventBus`] trait, its in-process and Redis Streams implementations and the
//! conformance suite every implementation must pass.
//!
//! The bus is a notification channel, not the record: events are published *after* they are
//! committed to the store, and a follower that lags or sees a gap re-reads the store's event log.
//! What must still be published is the store's to remember (its outbox, relayed by the gateway
//! until the bus acknowledged it), so a publish that fails is simply reported.
//! *Boundary*: no bus knows SQL or HTTP.

mod local;
#[cfg(feature = "redis")]
mod redis;
#[cfg(any(test, feature = "testing"))]
pub mod suite;
mod tap;

use std::sync::Arc;

use a2a_types::v1::StreamResponse;
use async_trait::async_trait;
use futures::stream::BoxStream;

pub use local::LocalEventBus;
pub use tap::{TAP_CAPACITY, tapped, tapped_with};

/// Control messages buffered per listener.
pub(crate) const CONTROL_CAPACITY: usize = 256;
#[cfg(feature = "redis")]
pub use redis::target::{self, Conn, Patience, RedisTarget, SharedConn};
pub use redis::{DEFAULT_INLINE_MAX, RedisEventBus, decode_entry, events_key, keys};

/// One committed event of one task.
#[derive(Debug, Clone, PartialEq)]
pub struct BusEvent {
    pub task_id: String,
    pub seq: u64,
    /// The event; an event without a payload is an *announcement* ([`BusEvent::announcement`]):
    /// the event `seq` is committed, read it from the task's event log.
    pub event: Arc<StreamResponse>,
    /// W3C `traceparent` of the request whose turn produced the event, so consumers (other
    /// replicas, the push worker) can continue its trace.
    pub trace: Option<String>,
    /// Whether the push worker gets it too: the task has push configs (or may have: `true`
    /// when the publisher does not know). Events of tasks without one reach followers only, so
    /// they cost the worker nothing (issue 27, item 3).
    pub push: bool,
}

impl BusEvent {
    /// Says that event `seq` of `task_id` is committed without carrying it: what the outbox
    /// relay publishes for an event it did not read back (larger than the inline limit), and
    /// what a subscriber of a bus entry without its payload gets as [`BusItem::Lagged`].
    pub fn announcement(task_id: String, seq: u64) -> Self {
        Self {
            task_id,
            seq,
            event: Arc::new(StreamResponse { payload: None }),
            trace: None,
            push: true,
        }
    }

    /// Whether this is an [`announcement`](Self::announcement): its readers read the log.
    pub fn is_announcement(&self) -> bool {
        self.event.payload.is_none()
    }
}

/// What a subscription yields.
#[derive(Debug, Clone, PartialEq)]
pub enum BusItem {
    Event(BusEvent),
    /// The subscriber fell behind and events were dropped for it: re-read the event log.
    Lagged,
}

/// A request for whichever process runs a task's turn. Every process listens; the one whose
/// turn it is acts, the others ignore it.
#[derive(Debug, Clone, PartialEq)]
pub enum Control {
    /// Cancel the running turn of `task_id` (CancelTask received by another replica).
    Cancel { task_id: String },
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

    /// Publishes the events of one commit (one task's, in sequence order) as [`publish`] would
    /// one by one; a bus that crosses the network sends them in one round trip. Stops at the
    /// first event that fails.
    ///
    /// [`publish`]: EventBus::publish
    async fn publish_all(&self, events: Vec<BusEvent>) -> Result<(), BusError> {
        for event in events {
            self.publish(event).await?;
        }
        Ok(())
    }

    /// Events of `task_id` published from now on, in publish order (possibly preceded by some
    /// published a moment before the call: followers skip sequence numbers they have). The
    /// stream ends after the task's terminal event has been delivered or when the bus shuts
    /// down.
    async fn subscribe(&self, task_id: &str) -> Result<BoxStream<'static, BusItem>, BusError>;

    /// Sends a control message to every process on this bus (the in-process bus: this one).
    async fn send_control(&self, control: Control) -> Result<(), BusError>;

    /// Control messages sent from now on, by any process. Best effort: a listener that falls
    /// behind loses messages, and the sender falls back when nobody acts (see CancelTask).
    fn control(&self) -> BoxStream<'static, Control>;

    /// Whether publishing crosses the network (Redis): then a publish is worth a trace span;
    /// in process it is a channel send.
    fn is_remote(&self) -> bool {
        false
    }
}
