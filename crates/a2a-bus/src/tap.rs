//! A bus that also hands every published event to one in-process consumer: the feed of the
//! embedded gateway's push delivery, which needs every task's events where a subscription
//! gets one task's.

use std::sync::Arc;

use async_trait::async_trait;
use futures::stream::BoxStream;
use tokio::sync::mpsc;

use crate::{BusError, BusEvent, BusItem, Control, EventBus};

/// Events the tap holds at most (review H4: it was unbounded, so a stalled consumer made the
/// process grow with every event published).
pub const TAP_CAPACITY: usize = 16_384;

/// Wraps `inner`: what is published goes to `inner` and to the returned receiver, in publish
/// order. The receiver is bounded ([`TAP_CAPACITY`]): a slow consumer must not hold up the
/// turns that publish, so an event that finds the tap full is not put in it (counted in
/// `a2a_push_tap_dropped_total`); the consumer must find such events elsewhere (the embedded
/// push delivery sweeps its store for tasks behind their event log). Dropping the receiver
/// ends the tap; the bus goes on.
pub fn tapped(inner: Arc<dyn EventBus>) -> (Arc<dyn EventBus>, mpsc::Receiver<BusEvent>) {
    tapped_with(inner, TAP_CAPACITY)
}

/// [`tapped`] with a tap of `capacity` events.
pub fn tapped_with(
    inner: Arc<dyn EventBus>,
    capacity: usize,
) -> (Arc<dyn EventBus>, mpsc::Receiver<BusEvent>) {
    let (tx, rx) = mpsc::channel(capacity.max(1));
    (Arc::new(Tapped { inner, tx }), rx)
}

struct Tapped {
    inner: Arc<dyn EventBus>,
    tx: mpsc::Sender<BusEvent>,
}

impl Tapped {
    fn tap(&self, event: &BusEvent) {
        // The tap feeds push delivery: events of tasks without push configs have no business
        // in it, and would take room from those that do.
        if !event.push {
            return;
        }
        match self.tx.try_send(event.clone()) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(_)) => {
                metrics::counter!("a2a_push_tap_dropped_total").increment(1);
            }
            Err(mpsc::error::TrySendError::Closed(_)) => {}
        }
        metrics::gauge!("a2a_push_tap_depth")
            .set((self.tx.max_capacity() - self.tx.capacity()) as f64);
    }
}

#[async_trait]
impl EventBus for Tapped {
    async fn publish(&self, event: BusEvent) -> Result<(), BusError> {
        // The event is committed: the tap gets it even when the bus cannot fan it out.
        self.tap(&event);
        self.inner.publish(event).await
    }

    async fn publish_all(&self, events: Vec<BusEvent>) -> Result<(), BusError> {
        for event in &events {
            self.tap(event);
        }
        self.inner.publish_all(events).await
    }

    async fn subscribe(&self, task_id: &str) -> Result<BoxStream<'static, BusItem>, BusError> {
        self.inner.subscribe(task_id).await
    }

    async fn send_control(&self, control: Control) -> Result<(), BusError> {
        self.inner.send_control(control).await
    }

    fn control(&self) -> BoxStream<'static, Control> {
        self.inner.control()
    }

    fn is_remote(&self) -> bool {
        self.inner.is_remote()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::LocalEventBus;
    use crate::suite::working;
    use futures::StreamExt;

    // A tapped bus is still a bus (its tap dropped: publishing goes on).
    crate::bus_conformance_suite!(super::Tapped {
        inner: Arc::new(crate::LocalEventBus::new()),
        tx: mpsc::channel(1).0,
    });

    #[tokio::test]
    async fn the_tap_gets_every_task_in_publish_order_beside_subscribers() {
        let (bus, mut tap) = tapped(Arc::new(LocalEventBus::new()));
        let mut sub = bus.subscribe("a").await.unwrap();
        for (task, seq) in [("a", 1), ("b", 1), ("a", 2)] {
            bus.publish(working(task, seq)).await.unwrap();
        }
        let got: Vec<(String, u64)> = (0..3)
            .map(|_| tap.try_recv().unwrap())
            .map(|e| (e.task_id, e.seq))
            .collect();
        assert_eq!(
            got,
            [("a".into(), 1), ("b".into(), 1), ("a".into(), 2)].to_vec()
        );
        assert!(matches!(sub.next().await, Some(BusItem::Event(e)) if e.seq == 1));
    }

    /// Events of tasks without push configs reach subscribers, not the tap.
    #[tokio::test]
    async fn the_tap_skips_tasks_without_push_configs() {
        let (bus, mut tap) = tapped(Arc::new(LocalEventBus::new()));
        let mut sub = bus.subscribe("a").await.unwrap();
        let mut quiet = working("a", 1);
        quiet.push = false;
        bus.publish(quiet).await.unwrap();
        bus.publish(working("b", 1)).await.unwrap();
        assert_eq!(tap.try_recv().map(|e| e.task_id).ok().as_deref(), Some("b"));
        assert!(tap.try_recv().is_err());
        assert!(matches!(sub.next().await, Some(BusItem::Event(e)) if e.seq == 1));
    }

    /// A tap nobody reads holds at most its capacity; publishing goes on (review H4).
    #[tokio::test]
    async fn a_full_tap_drops_and_publishing_goes_on() {
        let (bus, mut tap) = tapped_with(Arc::new(LocalEventBus::new()), 2);
        for seq in 1..=5 {
            bus.publish(working("a", seq)).await.unwrap();
        }
        let got: Vec<u64> = std::iter::from_fn(|| tap.try_recv().ok())
            .map(|e| e.seq)
            .collect();
        assert_eq!(got, [1, 2]);
    }
}
