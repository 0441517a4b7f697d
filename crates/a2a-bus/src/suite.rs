//! The conformance suite of [`EventBus`], instantiated for every implementation with
//! [`bus_conformance_suite!`](crate::bus_conformance_suite).

use std::sync::Arc;
use std::time::Duration;

use a2a_types::v1::{
    StreamResponse, TaskState, TaskStatus, TaskStatusUpdateEvent, stream_response::Payload,
};
use futures::StreamExt;
use futures::stream::BoxStream;

use crate::{BusEvent, BusItem, Control, EventBus};

#[macro_export]
macro_rules! bus_conformance_suite {
    ($make:expr) => {
        $crate::bus_conformance_suite!(@cases $make;
            subscribers_see_events_in_order, every_subscriber_sees_every_event,
            tasks_are_separate, terminal_event_ends_subscriptions, control_messages_reach_listeners,
            events_keep_their_trace_context, a_commit_published_together_arrives_in_order);
    };
    (@cases $make:expr; $($case:ident),*) => {
        $(
            #[tokio::test]
            async fn $case() {
                let bus = $make;
                $crate::suite::$case(&bus).await;
            }
        )*
    };
}

/// A status event of `task_id` with sequence number `seq`.
pub fn status_event(task_id: &str, seq: u64, state: TaskState) -> BusEvent {
    BusEvent {
        task_id: task_id.into(),
        seq,
        event: Arc::new(StreamResponse {
            payload: Some(Payload::StatusUpdate(TaskStatusUpdateEvent {
                task_id: task_id.into(),
                context_id: "c".into(),
                status: Some(TaskStatus {
                    state: state as i32,
                    message: None,
                    timestamp: None,
                }),
                metadata: None,
            })),
        }),
        trace: None,
        push: true,
    }
}

/// A WORKING status event with sequence number `seq`.
pub fn working(task_id: &str, seq: u64) -> BusEvent {
    status_event(task_id, seq, TaskState::Working)
}

async fn next_seqs(sub: &mut BoxStream<'static, BusItem>, n: usize) -> Vec<u64> {
    let mut out = Vec::new();
    while out.len() < n {
        let item = tokio::time::timeout(Duration::from_secs(5), sub.next())
            .await
            .expect("event within 5 s");
        match item {
            Some(BusItem::Event(ev)) => out.push(ev.seq),
            other => panic!("expected an event, got {other:?}"),
        }
    }
    out
}

pub async fn events_keep_their_trace_context(bus: &dyn EventBus) {
    let mut sub = bus.subscribe("t1").await.unwrap();
    let traced = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let mut ev = working("t1", 1);
    ev.trace = Some(traced.into());
    bus.publish(ev).await.unwrap();
    bus.publish(working("t1", 2)).await.unwrap();
    let mut traces = Vec::new();
    while traces.len() < 2 {
        match tokio::time::timeout(Duration::from_secs(5), sub.next()).await {
            Ok(Some(BusItem::Event(ev))) => traces.push(ev.trace),
            other => panic!("expected an event, got {other:?}"),
        }
    }
    assert_eq!(traces, [Some(traced.to_owned()), None]);
}

pub async fn subscribers_see_events_in_order(bus: &dyn EventBus) {
    let mut sub = bus.subscribe("t1").await.unwrap();
    for seq in 1..=50 {
        bus.publish(working("t1", seq)).await.unwrap();
    }
    assert_eq!(next_seqs(&mut sub, 50).await, (1..=50).collect::<Vec<_>>());
}

pub async fn every_subscriber_sees_every_event(bus: &dyn EventBus) {
    let mut subs = Vec::new();
    for _ in 0..5 {
        subs.push(bus.subscribe("t1").await.unwrap());
    }
    for seq in 1..=10 {
        bus.publish(working("t1", seq)).await.unwrap();
    }
    for sub in &mut subs {
        assert_eq!(next_seqs(sub, 10).await, (1..=10).collect::<Vec<_>>());
    }
}

pub async fn tasks_are_separate(bus: &dyn EventBus) {
    let mut a = bus.subscribe("a").await.unwrap();
    let mut b = bus.subscribe("b").await.unwrap();
    bus.publish(working("a", 1)).await.unwrap();
    bus.publish(working("b", 7)).await.unwrap();
    bus.publish(working("a", 2)).await.unwrap();
    assert_eq!(next_seqs(&mut a, 2).await, [1, 2]);
    assert_eq!(next_seqs(&mut b, 1).await, [7]);
}

pub async fn terminal_event_ends_subscriptions(bus: &dyn EventBus) {
    let mut sub = bus.subscribe("t1").await.unwrap();
    bus.publish(working("t1", 1)).await.unwrap();
    bus.publish(status_event("t1", 2, TaskState::Completed))
        .await
        .unwrap();
    assert_eq!(next_seqs(&mut sub, 2).await, [1, 2]);
    let end = tokio::time::timeout(Duration::from_secs(5), sub.next())
        .await
        .expect("subscription ends after the terminal event");
    assert_eq!(end, None);
}

/// `publish_all` delivers like publishing one by one: in order, beside other tasks' events, and
/// a terminal event among them still ends the subscription.
pub async fn a_commit_published_together_arrives_in_order(bus: &dyn EventBus) {
    let mut sub = bus.subscribe("t1").await.unwrap();
    let mut other = bus.subscribe("t2").await.unwrap();
    bus.publish_all((1..=3).map(|seq| working("t1", seq)).collect())
        .await
        .unwrap();
    bus.publish_all(vec![working("t2", 1)]).await.unwrap();
    bus.publish_all(vec![
        working("t1", 4),
        status_event("t1", 5, TaskState::Completed),
    ])
    .await
    .unwrap();
    bus.publish_all(Vec::new()).await.unwrap();
    assert_eq!(next_seqs(&mut sub, 5).await, [1, 2, 3, 4, 5]);
    assert_eq!(next_seqs(&mut other, 1).await, [1]);
    let end = tokio::time::timeout(Duration::from_secs(5), sub.next())
        .await
        .expect("subscription ends after the terminal event");
    assert_eq!(end, None);
}

pub async fn control_messages_reach_listeners(bus: &dyn EventBus) {
    let mut a = bus.control();
    let mut b = bus.control();
    for task_id in ["t1", "t2"] {
        bus.send_control(Control::Cancel {
            task_id: task_id.into(),
        })
        .await
        .unwrap();
    }
    for listener in [&mut a, &mut b] {
        for task_id in ["t1", "t2"] {
            let got = tokio::time::timeout(Duration::from_secs(5), listener.next())
                .await
                .expect("a control message within 5 s");
            assert_eq!(
                got,
                Some(Control::Cancel {
                    task_id: task_id.into()
                })
            );
        }
    }
}
