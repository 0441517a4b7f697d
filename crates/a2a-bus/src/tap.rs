//! A bus that also hands every published event to one in-process consumer: the feed of the
//! embedded gateway's push delivery, which needs every task's events where a subscription
//! gets one task's.

use std::sync::Arc;

use async_trait::async_trait;
use futures::stream::BoxStream;
use tokio::sync::mpsc;

use crate::{BusError, BusEvent, BusItem, Control, EventBus};

/// Wraps `inner`: what is published goes to `inner` and to the returned receiver, in publish
/// order. The receiver is unbounded: a slow consumer must not hold up the turns that publish
/// (its work is bounded by what the process keeps in memory anyway). Dropping the receiver
/// ends the tap; the bus goes on.
pub fn tapped(inner: Arc<dyn EventBus>) -> (Arc<dyn EventBus>, mpsc::UnboundedReceiver<BusEvent>) {
    let (tx, rx) = mpsc::unbounded_channel();
    (Arc::new(Tapped { inner, tx }), rx)
}

struct Tapped {
    inner: Arc<dyn EventBus>,
    tx: mpsc::UnboundedSender<BusEvent>,
}

#[async_trait]
impl EventBus for Tapped {
    async fn publish(&self, event: BusEvent) -> Result<(), BusError> {
        // The event is committed: the tap gets it even when the bus cannot fan it out.
        let _ = self.tx.send(event.clone());
        self.inner.publish(event).await
    }

    async fn publish_all(&self, events: Vec<BusEvent>) -> Result<(), BusError> {
        for event in &events {
            let _ = self.tx.send(event.clone());
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
        tx: mpsc::unbounded_channel().0,
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
}
