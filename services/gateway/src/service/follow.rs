//! Following a task: the one mechanism behind blocking sends, SendStreamingMessage,
//! SubscribeToTask and cancel. The caller subscribes to the bus *before* it reads the snapshot it
//! starts from (or, subscribing after, starts its subscription with a lag notice, so that the
//! log is read first: `A2aService::subscribe_late`), then takes bus events with the next
//! expected sequence number; a gap, a lag notice, a closed subscription or the process's safety
//! net ([`super::watch`]: the log has moved past the follower while the bus said nothing) makes
//! it re-read the store's event log, so a follower never skips, repeats or reorders an event,
//! whichever process wrote it. A quiet follower on a healthy bus reads nothing.

use std::sync::Arc;

use a2a_bus::BusItem;
use a2a_store::TaskStore;
use a2a_types::A2aError;
use a2a_types::state::{event_state, is_settled, is_terminal};
use a2a_types::v1::TaskState;
use futures::StreamExt;
use futures::stream::BoxStream;
use tokio_util::sync::CancellationToken;

use super::watch::Watch;
use super::{EventStream, SeqEvent, store_error};

pub(crate) struct Follow {
    pub store: Arc<dyn TaskStore>,
    pub bus: BoxStream<'static, BusItem>,
    pub owner: String,
    pub task_id: String,
    /// Sequence number of the snapshot the follower already has.
    pub after_seq: u64,
    pub shutdown: CancellationToken,
    /// The process's safety net for lost publishes.
    pub watch: Watch,
}

/// Whether `ev` moves the task into a state that `ends` says closes the stream.
fn ends_with(ev: &SeqEvent, ends: fn(TaskState) -> bool) -> bool {
    event_state(&ev.event).is_some_and(ends)
}

impl Follow {
    /// Every event after `after_seq`, in order, ending after the first terminal or interrupted
    /// state (or at shutdown): what a send waits for, since an interrupted task waits for the
    /// caller's next message. A store failure is yielded as the last item.
    pub fn into_stream(self) -> EventStream {
        self.stream_until(is_settled)
    }

    /// As [`Self::into_stream`], but ending only after a terminal state: SubscribeToTask
    /// (spec §3.1.6) stays open across INPUT_REQUIRED / AUTH_REQUIRED, so a subscriber sees
    /// the turn the next message starts, whichever replica it reaches.
    pub fn until_terminal(self) -> EventStream {
        self.stream_until(is_terminal)
    }

    fn stream_until(self, ends: fn(TaskState) -> bool) -> EventStream {
        let Follow {
            store,
            mut bus,
            owner,
            task_id,
            after_seq,
            shutdown,
            watch,
        } = self;
        let stream = async_stream::stream! {
            let mut next = after_seq + 1;
            let watched = watch.register(&task_id, next);
            'follow: loop {
                tokio::select! {
                    biased;
                    _ = shutdown.cancelled() => break 'follow,
                    item = bus.next() => match item {
                        Some(BusItem::Event(ev)) if ev.seq < next => continue 'follow,
                        // An announcement (the outbox relay did not carry the event): read the
                        // log, below.
                        Some(BusItem::Event(ev)) if ev.seq == next && !ev.is_announcement() => {
                            next += 1;
                            watched.waiting_for(next);
                            let ev = SeqEvent { seq: Some(ev.seq), event: (*ev.event).clone() };
                            let done = ends_with(&ev, ends);
                            yield Ok(ev);
                            if done {
                                break 'follow;
                            }
                            continue 'follow;
                        }
                        // A gap or a lag: the log has what the bus did not deliver.
                        Some(_) => {}
                        // The bus closed this subscription: read the log now, then follow it
                        // through the safety net alone.
                        None => bus = futures::stream::pending().boxed(),
                    },
                    _ = watched.behind() => {}
                }
                match store.events_after(&owner, &task_id, next - 1).await {
                    Ok(events) => {
                        for e in events {
                            next = e.seq + 1;
                            watched.waiting_for(next);
                            let ev = SeqEvent { seq: Some(e.seq), event: Arc::unwrap_or_clone(e.event) };
                            let done = ends_with(&ev, ends);
                            yield Ok(ev);
                            if done {
                                break 'follow;
                            }
                        }
                    }
                    Err(e) => {
                        yield Err(store_error(&task_id, e));
                        break 'follow;
                    }
                }
            }
        };
        stream.boxed()
    }
}

/// Drains a follow stream into a snapshot until it settles; used by blocking sends and cancel.
/// The snapshot keeps what was applied if the caller stops waiting early.
pub(crate) async fn settle(
    task: &mut a2a_types::v1::Task,
    mut events: EventStream,
) -> Result<(), A2aError> {
    while let Some(item) = events.next().await {
        a2a_types::state::apply_event(task, &item?.event);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use a2a_bus::BusEvent;
    use a2a_store::{MemoryTaskStore, NewTask, TaskChange};
    use a2a_types::v1::{Task, TaskStatus};

    /// The outbox publishes at least once: an event may come twice (a commit relayed by
    /// another replica too, a row whose delete was lost), and a relayed large event comes as
    /// an announcement. The follower yields each sequence number once, in order, and reads an
    /// announced event from the log.
    #[tokio::test]
    async fn duplicates_are_skipped_and_announcements_read_from_the_log() {
        let store = Arc::new(MemoryTaskStore::new());
        store
            .create(NewTask {
                push: None,
                upstream_key: None,
                owner: "alice".into(),
                agent: "echo".into(),
                task: Task {
                    id: "t1".into(),
                    context_id: "c1".into(),
                    status: Some(TaskStatus {
                        state: TaskState::Submitted as i32,
                        ..Default::default()
                    }),
                    ..Default::default()
                },
            })
            .await
            .unwrap();
        let mut events = Vec::new();
        for (seq, state) in [(1, TaskState::Working), (2, TaskState::Completed)] {
            let change: TaskChange = a2a_store::suite::status("t1", state, 1);
            let (stored, _) = store.append("t1", seq, change).await.unwrap();
            events.push(stored);
        }
        let event = |i: usize| {
            BusItem::Event(BusEvent {
                task_id: "t1".into(),
                seq: events[i].seq,
                event: events[i].event.clone(),
                trace: None,
                push: true,
            })
        };
        // seq 2 twice, then seq 3 announced only (twice).
        let items = vec![
            event(0),
            event(0),
            BusItem::Event(BusEvent::announcement("t1".into(), 3)),
            BusItem::Event(BusEvent::announcement("t1".into(), 3)),
        ];
        let follow = Follow {
            store: store.clone(),
            bus: futures::stream::iter(items)
                .chain(futures::stream::pending())
                .boxed(),
            owner: "alice".into(),
            task_id: "t1".into(),
            after_seq: 1,
            shutdown: CancellationToken::new(),
            watch: Watch::default(),
        };
        let got: Vec<_> = follow.into_stream().collect().await;
        let seqs: Vec<Option<u64>> = got.iter().map(|r| r.as_ref().unwrap().seq).collect();
        assert_eq!(seqs, vec![Some(2), Some(3)]);
        let last = &got[1].as_ref().unwrap().event;
        assert_eq!(
            event_state(last),
            Some(TaskState::Completed),
            "read from the log"
        );
    }
}
