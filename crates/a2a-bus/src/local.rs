//! The in-process bus of embedded mode: one bounded broadcast channel per task that has
//! subscribers. A subscriber that falls more than [`CAPACITY`] events behind gets
//! [`BusItem::Lagged`] instead of holding memory without bound.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use a2a_types::state::{event_state, is_terminal};
use async_trait::async_trait;
use futures::StreamExt;
use futures::stream::BoxStream;
use tokio::sync::broadcast;
use tokio_stream::wrappers::BroadcastStream;
use tokio_stream::wrappers::errors::BroadcastStreamRecvError;

use crate::{BusError, BusEvent, BusItem, Control, EventBus};

/// Events buffered per task for its slowest subscriber. Kept small because every followed task
/// allocates its ring up front; a subscriber that falls further behind re-reads the event log.
pub const CAPACITY: usize = 64;

#[derive(Clone)]
pub struct LocalEventBus {
    channels: Arc<Mutex<HashMap<String, broadcast::Sender<BusEvent>>>>,
    control: broadcast::Sender<Control>,
}

impl Default for LocalEventBus {
    fn default() -> Self {
        Self {
            channels: Arc::default(),
            control: broadcast::channel(crate::CONTROL_CAPACITY).0,
        }
    }
}

impl LocalEventBus {
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of tasks with live channels (for tests and metrics).
    pub fn open_channels(&self) -> usize {
        self.channels.lock().map(|c| c.len()).unwrap_or(0)
    }
}

/// Drops the task's channel once its last subscriber is gone.
struct Unsubscribe {
    channels: Arc<Mutex<HashMap<String, broadcast::Sender<BusEvent>>>>,
    task_id: String,
}

impl Drop for Unsubscribe {
    fn drop(&mut self) {
        if let Ok(mut channels) = self.channels.lock()
            && channels
                .get(&self.task_id)
                .is_some_and(|tx| tx.receiver_count() == 0)
        {
            channels.remove(&self.task_id);
        }
    }
}

#[async_trait]
impl EventBus for LocalEventBus {
    async fn publish(&self, event: BusEvent) -> Result<(), BusError> {
        let terminal = event_state(&event.event).is_some_and(is_terminal);
        let mut channels = self
            .channels
            .lock()
            .map_err(|_| BusError::Unavailable("bus lock poisoned".into()))?;
        if let Some(tx) = channels.get(&event.task_id) {
            // No receivers is fine: nobody follows this task right now.
            let _ = tx.send(event.clone());
            if terminal {
                // Dropping the sender ends every subscription after the terminal event.
                channels.remove(&event.task_id);
            }
        }
        Ok(())
    }

    async fn subscribe(&self, task_id: &str) -> Result<BoxStream<'static, BusItem>, BusError> {
        let rx = {
            let mut channels = self
                .channels
                .lock()
                .map_err(|_| BusError::Unavailable("bus lock poisoned".into()))?;
            channels
                .entry(task_id.to_owned())
                .or_insert_with(|| broadcast::channel(CAPACITY).0)
                .subscribe()
        };
        let guard = Unsubscribe {
            channels: self.channels.clone(),
            task_id: task_id.to_owned(),
        };
        let stream = BroadcastStream::new(rx).map(move |item| {
            let _keep = &guard;
            match item {
                Ok(ev) => BusItem::Event(ev),
                Err(BroadcastStreamRecvError::Lagged(_)) => BusItem::Lagged,
            }
        });
        Ok(stream.boxed())
    }

    async fn send_control(&self, control: Control) -> Result<(), BusError> {
        // No listener is fine: nothing runs here to act on it.
        let _ = self.control.send(control);
        Ok(())
    }

    fn control(&self) -> BoxStream<'static, Control> {
        BroadcastStream::new(self.control.subscribe())
            .filter_map(|item| async move { item.ok() })
            .boxed()
    }
}

#[cfg(test)]
mod tests {
    crate::bus_conformance_suite!(crate::LocalEventBus::new());

    use super::*;

    #[tokio::test]
    async fn channels_are_dropped_with_their_last_subscriber() {
        let bus = LocalEventBus::new();
        let a = bus.subscribe("t").await.unwrap();
        let b = bus.subscribe("t").await.unwrap();
        assert_eq!(bus.open_channels(), 1);
        drop(a);
        assert_eq!(bus.open_channels(), 1);
        drop(b);
        assert_eq!(bus.open_channels(), 0);
    }

    #[tokio::test]
    async fn slow_subscribers_are_told_they_lagged() {
        let bus = LocalEventBus::new();
        let mut sub = bus.subscribe("t").await.unwrap();
        for seq in 1..=(CAPACITY as u64 + 10) {
            bus.publish(crate::suite::working("t", seq)).await.unwrap();
        }
        assert_eq!(sub.next().await, Some(BusItem::Lagged));
    }
}
