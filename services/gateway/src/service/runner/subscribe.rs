//! How callers follow a turn: bus subscriptions (taken before the turn, or late for a blocking
//! send), the follower over the bus and the task's log, and the publish of each commit.

use a2a_bus::BusEvent;
use a2a_process::telemetry::{KeyValue, SpanKind, TraceSpan};
use a2a_store::StoredEvent;
use a2a_types::A2aError;
use futures::StreamExt;
use tokio_util::sync::CancellationToken;

use super::super::follow::Follow;
use super::super::{A2aService, EventStream, RequestContext};
use super::TRACEPARENT;

impl A2aService {
    /// The events of `task_id` after `after_seq` until it settles, from the bus subscription
    /// `bus` (taken before the snapshot that `after_seq` belongs to).
    pub(in crate::service) fn follow_from(
        &self,
        ctx: &RequestContext,
        task_id: &str,
        after_seq: u64,
        bus: futures::stream::BoxStream<'static, a2a_bus::BusItem>,
    ) -> EventStream {
        self.follow_until(ctx, task_id, after_seq, bus, self.inner.shutdown.clone())
    }

    /// What a blocking send waits on: like [`follow_from`](Self::follow_from), but it does not
    /// end at shutdown. A stream ends there (its client resumes elsewhere), while a blocking
    /// send cut short would answer a task that has not settled as if it had; its turn is
    /// drained anyway, so the send answers once the turn settles (or the process exits at the
    /// drain bound, and a client with an `Idempotency-Key` retries on another replica).
    pub(in crate::service) fn follow_blocking(
        &self,
        ctx: &RequestContext,
        task_id: &str,
        after_seq: u64,
        bus: futures::stream::BoxStream<'static, a2a_bus::BusItem>,
    ) -> EventStream {
        self.follow_until(ctx, task_id, after_seq, bus, CancellationToken::new())
    }

    fn follow_until(
        &self,
        ctx: &RequestContext,
        task_id: &str,
        after_seq: u64,
        bus: futures::stream::BoxStream<'static, a2a_bus::BusItem>,
        shutdown: CancellationToken,
    ) -> EventStream {
        Follow {
            store: self.inner.store.clone(),
            bus,
            owner: ctx.owner.clone(),
            task_id: task_id.to_owned(),
            after_seq,
            shutdown,
            watch: self.inner.watch.clone(),
        }
        .into_stream()
    }

    /// A bus subscription taken *after* the snapshot the follower starts from, for a blocking
    /// send: most turns settle in their first write (the runner then answers with the settled
    /// task), so subscribing before the turn starts, as a stream must, would cost every send a
    /// channel that is never read. Events published between the snapshot and the subscription
    /// are in the log: the subscription starts with [`BusItem::Lagged`], which makes the
    /// follower read the log once before it waits on the bus. Without a bus the follower
    /// goes on with the log and the process's safety net alone (the task already runs: failing
    /// the send would hide it from its caller).
    ///
    /// [`BusItem::Lagged`]: a2a_bus::BusItem::Lagged
    pub(super) async fn subscribe_late(
        &self,
        task_id: &str,
    ) -> futures::stream::BoxStream<'static, a2a_bus::BusItem> {
        let read_log = futures::stream::once(async { a2a_bus::BusItem::Lagged });
        match self.inner.bus.subscribe(task_id).await {
            Ok(bus) => read_log.chain(bus).boxed(),
            Err(e) => {
                tracing::warn!(task_id, error = %e, "event bus unavailable; the send follows the task's log");
                read_log.chain(futures::stream::pending()).boxed()
            }
        }
    }

    pub(crate) async fn subscribe_bus(
        &self,
        task_id: &str,
    ) -> Result<futures::stream::BoxStream<'static, a2a_bus::BusItem>, A2aError> {
        self.inner.bus.subscribe(task_id).await.map_err(|e| {
            tracing::warn!(task_id, error = %e, "event bus unavailable");
            A2aError::Unavailable("the event bus is unreachable; retry later".into())
        })
    }

    /// Publishes the events of one commit, in order, under one span (a burst of events is one
    /// write, so it is one publish too): the fast path of the outbox relay (`outbox.rs`), so
    /// `events` must be all the events of the commit, the last one ending it.
    pub(crate) async fn publish(
        &self,
        task_id: &str,
        events: impl IntoIterator<Item = StoredEvent>,
    ) {
        let mut events = events.into_iter().peekable();
        let Some((first, outboxed)) = events.peek().map(|e| (e.seq, a2a_store::outboxed(e))) else {
            return;
        };
        // In process, a publish is a channel send: not worth a span (the events carry the
        // turn's context instead).
        let span = if self.inner.bus.is_remote() {
            TraceSpan::start_in_current("publish", SpanKind::Producer, || {
                vec![
                    KeyValue::new("a2a.task.id", task_id.to_owned()),
                    KeyValue::new("a2a.seq", first as i64),
                ]
            })
        } else {
            TraceSpan::NONE
        };
        // Consumers (the push worker) continue the trace from the publish.
        let trace = span
            .traceparent()
            .or_else(|| TRACEPARENT.try_with(Clone::clone).ok().flatten());
        let events: Vec<BusEvent> = events
            .map(|e| BusEvent {
                task_id: task_id.to_owned(),
                seq: e.seq,
                event: e.event,
                trace: trace.clone(),
                push: e.push,
            })
            .collect();
        let last = events.last().map_or(first, |e| e.seq);
        let publish = async {
            #[cfg(feature = "failpoints")]
            crate::failpoints::relay_stall().await;
            // The events are committed, and so is their outbox row: acknowledged, the row goes;
            // not, it stays and is relayed later (followers that miss them read the log).
            match self.inner.bus.publish_all(events).await {
                Ok(()) => {
                    // A commit without an outbox row (a create without push configs) has
                    // nothing to delete.
                    if let Some(outbox) = self.inner.outbox.get().filter(|_| outboxed) {
                        outbox.published(task_id, last);
                    }
                }
                Err(e) => {
                    metrics::counter!("a2a_outbox_publish_failures_total").increment(1);
                    tracing::warn!(task_id, seq = first, error = %e,
                        "publish failed; the outbox relays it later, followers poll the log");
                }
            }
        };
        span.in_span(publish).await;
        span.end();
    }
}
