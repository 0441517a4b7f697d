//! GetTask, ListTasks, CancelTask and SubscribeToTask.

use std::sync::Arc;
use std::time::Duration;

use a2a_store::{Cursor, ListQuery, StoreError, TaskChange};
use a2a_types::A2aError;
use a2a_types::state::{event_state, is_interrupted, is_terminal, state_of};
use a2a_types::v1::{
    CancelTaskRequest, GetTaskRequest, ListTasksRequest, ListTasksResponse, StreamResponse,
    SubscribeToTaskRequest, Task, TaskState, TaskStatus, TaskStatusUpdateEvent,
    stream_response::Payload,
};
use a2a_types::wkt::Timestamp;
use futures::StreamExt;

use super::follow::{Follow, settle};
use super::quota::{Quota, QuotaGuard};
use super::{A2aService, EventStream, RequestContext, SeqEvent, store_error, validate};

const DEFAULT_PAGE_SIZE: i32 = 50;
const MAX_PAGE_SIZE: i32 = 100;
/// How long CancelTask waits for the running turn to record CANCELED.
const CANCEL_WAIT: Duration = Duration::from_secs(10);
/// How long CancelTask waits for another replica's turn to record CANCELED before deciding that
/// no turn runs anywhere (its replica died) and canceling directly.
const REMOTE_CANCEL_WAIT: Duration = Duration::from_secs(3);
/// Attempts of CancelTask against concurrent writers before giving up.
const CANCEL_ATTEMPTS: usize = 5;

impl A2aService {
    pub async fn get_task(
        &self,
        ctx: &RequestContext,
        req: GetTaskRequest,
    ) -> Result<Task, A2aError> {
        validate::required_id(&req.id, "id")?;
        ctx.span.set_str("a2a.task.id", &req.id);
        if !req.tenant.is_empty() {
            ctx.span.set_str("a2a.tenant", &req.tenant);
        }
        let history = validate::history_length(req.history_length, "historyLength")?;
        self.inner
            .store
            .get(&ctx.owner, &req.id, history)
            .await
            .map_err(|e| store_error(&req.id, e))?
            .map(|r| r.task)
            .ok_or_else(|| A2aError::task_not_found(&req.id))
    }

    pub async fn list_tasks(
        &self,
        ctx: &RequestContext,
        req: ListTasksRequest,
    ) -> Result<ListTasksResponse, A2aError> {
        let page_size = req.page_size.unwrap_or(DEFAULT_PAGE_SIZE);
        if !(1..=MAX_PAGE_SIZE).contains(&page_size) {
            return Err(A2aError::invalid_params(
                "pageSize",
                format!("must be between 1 and {MAX_PAGE_SIZE}"),
            ));
        }
        let status = match TaskState::try_from(req.status) {
            Ok(TaskState::Unspecified) => None,
            Ok(s) => Some(s),
            Err(_) => return Err(A2aError::invalid_params("status", "is not a TaskState")),
        };
        let cursor =
            match req.page_token.as_str() {
                "" => None,
                token => Some(Cursor::decode(token).map_err(|_| {
                    A2aError::invalid_params("pageToken", "is not a valid page token")
                })?),
            };
        if let Some(t) = &req.status_timestamp_after {
            validate::timestamp(t, "statusTimestampAfter")?;
        }
        let query = ListQuery {
            context_id: Some(req.context_id).filter(|c| !c.is_empty()),
            status,
            status_after: req.status_timestamp_after,
            page_size: page_size as usize,
            cursor,
            history_length: validate::history_length(req.history_length, "historyLength")?,
            include_artifacts: req.include_artifacts.unwrap_or(false),
        };
        let page = self
            .inner
            .store
            .list(&ctx.owner, &query)
            .await
            .map_err(|e| store_error("", e))?;
        Ok(ListTasksResponse {
            tasks: page.tasks,
            next_page_token: page.next.map(|c| c.encode()).unwrap_or_default(),
            page_size,
            total_size: i32::try_from(page.total_size).unwrap_or(i32::MAX),
        })
    }

    pub async fn cancel_task(
        &self,
        ctx: &RequestContext,
        req: CancelTaskRequest,
    ) -> Result<Task, A2aError> {
        validate::required_id(&req.id, "id")?;
        validate::finite_metadata(req.metadata.as_ref())?;
        ctx.span.set_str("a2a.task.id", &req.id);
        if !req.tenant.is_empty() {
            ctx.span.set_str("a2a.tenant", &req.tenant);
        }
        let store = &self.inner.store;
        // Set once another replica was asked and did not answer: no turn runs anywhere.
        let mut asked_others = false;
        for _ in 0..CANCEL_ATTEMPTS {
            let rec = store
                .get(&ctx.owner, &req.id, None)
                .await
                .map_err(|e| store_error(&req.id, e))?
                .ok_or_else(|| A2aError::task_not_found(&req.id))?;
            let state = state_of(&rec.task);
            if is_terminal(state) {
                return Err(A2aError::TaskNotCancelable {
                    task_id: req.id,
                    state,
                });
            }
            let running = self
                .inner
                .running
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .get(&req.id)
                .cloned();
            // A task that is not waiting for input has a turn running somewhere: here, or on
            // another replica, which is asked through the bus.
            let remote = running.is_none() && !is_interrupted(state) && !asked_others;
            if running.is_some() || remote {
                // The runner is the task's writer: ask it to stop and wait for CANCELED.
                let bus = self.subscribe_bus(&req.id).await?;
                if let Some(turn) = &running {
                    turn.cancel();
                } else {
                    asked_others = true;
                    let control = a2a_bus::Control::Cancel {
                        task_id: req.id.clone(),
                    };
                    if let Err(e) = self.inner.bus.send_control(control).await {
                        // Nobody can be asked (the bus is down): cancel directly.
                        tracing::warn!(task_id = req.id, error = %e, "cannot ask other replicas to cancel");
                        continue;
                    }
                }
                let wait = if remote {
                    REMOTE_CANCEL_WAIT
                } else {
                    CANCEL_WAIT
                };
                let mut task = rec.task;
                let events = Follow {
                    store: store.clone(),
                    bus,
                    owner: ctx.owner.clone(),
                    task_id: req.id.clone(),
                    after_seq: rec.seq,
                    shutdown: self.inner.shutdown.clone(),
                    watch: self.inner.watch.clone(),
                }
                .into_stream();
                if let Ok(result) = tokio::time::timeout(wait, settle(&mut task, events)).await {
                    result?;
                }
                if state_of(&task) == TaskState::Canceled {
                    return Ok(task);
                }
                continue;
            }
            // No turn runs (the task waits for input, or the replica that ran it is gone): record
            // CANCELED directly.
            let event = StreamResponse {
                payload: Some(Payload::StatusUpdate(TaskStatusUpdateEvent {
                    task_id: req.id.clone(),
                    context_id: rec.task.context_id.clone(),
                    status: Some(TaskStatus {
                        state: TaskState::Canceled as i32,
                        message: None,
                        timestamp: Some(Timestamp::now()),
                    }),
                    metadata: req.metadata.clone(),
                })),
            };
            let change = TaskChange {
                user_message: None,
                event,
            };
            match store.append(&req.id, rec.seq, change).await {
                Ok((stored, task)) => {
                    self.publish(&req.id, [stored]).await;
                    return Ok(task);
                }
                Err(StoreError::Conflict { .. } | StoreError::Terminal(_)) => continue,
                Err(e) => return Err(store_error(&req.id, e)),
            }
        }
        Err(A2aError::Unavailable(format!(
            "task {} kept changing while canceling; retry",
            req.id
        )))
    }

    pub async fn subscribe_to_task(
        &self,
        ctx: &RequestContext,
        req: SubscribeToTaskRequest,
    ) -> Result<EventStream, A2aError> {
        self.require_streaming()?;
        validate::required_id(&req.id, "id")?;
        ctx.span.set_str("a2a.task.id", &req.id);
        if !req.tenant.is_empty() {
            ctx.span.set_str("a2a.tenant", &req.tenant);
        }
        let permit = self.stream_permit(ctx)?;
        // Subscribe before reading the snapshot, so nothing falls between the two.
        let bus = self.subscribe_bus(&req.id).await?;
        let rec = self
            .inner
            .store
            .get(&ctx.owner, &req.id, None)
            .await
            .map_err(|e| store_error(&req.id, e))?
            .ok_or_else(|| A2aError::task_not_found(&req.id))?;
        let state = state_of(&rec.task);
        if let Some(after) = ctx.last_event_id {
            let stream = self
                .resume(ctx, req.id, rec.seq, is_terminal(state), after, bus)
                .await?;
            return Ok(stream
                .map(move |item| {
                    let _permit = &permit;
                    item
                })
                .boxed());
        }
        if is_terminal(state) {
            return Err(A2aError::UnsupportedOperation(format!(
                "task {} is {}; a terminal task has no more events",
                req.id,
                state.as_str_name()
            )));
        }
        let head = futures::stream::once(futures::future::ready(Ok(SeqEvent::task(
            rec.seq, rec.task,
        ))));
        // An interrupted task (INPUT_REQUIRED, AUTH_REQUIRED) is not the end of a subscription:
        // the subscriber stays until the task is terminal (spec §3.1.6).
        let tail = Follow {
            store: self.inner.store.clone(),
            bus,
            owner: ctx.owner.clone(),
            task_id: req.id,
            after_seq: rec.seq,
            shutdown: self.inner.shutdown.clone(),
            watch: self.inner.watch.clone(),
        }
        .until_terminal();
        Ok(head
            .chain(tail)
            .map(move |item| {
                let _permit = &permit;
                item
            })
            .boxed())
    }

    /// A reconnecting subscriber (`Last-Event-ID: after`): no Task snapshot, the first event is
    /// the one after `after`. The events it missed come from the event log, then the live tail
    /// follows; like any subscription it ends only after a terminal state (an interrupted state
    /// in the replay does not end it), so a terminal task's events can still be replayed. `bus`
    /// was subscribed before `current` (the snapshot's seq) was read, so nothing falls between
    /// the replay and the tail.
    async fn resume(
        &self,
        ctx: &RequestContext,
        task_id: String,
        current: u64,
        terminal_now: bool,
        after: u64,
        bus: futures::stream::BoxStream<'static, a2a_bus::BusItem>,
    ) -> Result<EventStream, A2aError> {
        if after > current {
            return Err(A2aError::invalid_params(
                "Last-Event-ID",
                format!("task {task_id} has no event {after} (its last is {current})"),
            ));
        }
        let logged = self
            .inner
            .store
            .events_after(&ctx.owner, &task_id, after)
            .await
            .map_err(|e| store_error(&task_id, e))?;
        let mut replay = Vec::with_capacity(logged.len());
        let mut last = after;
        for e in logged {
            last = e.seq;
            let terminal = event_state(&e.event).is_some_and(is_terminal);
            replay.push(Ok(SeqEvent {
                seq: Some(e.seq),
                event: Arc::unwrap_or_clone(e.event),
            }));
            if terminal {
                return Ok(futures::stream::iter(replay).boxed());
            }
        }
        // Nothing after the snapshot and the snapshot is terminal: the client already has the
        // end of the stream.
        if last >= current && terminal_now {
            return Ok(futures::stream::iter(replay).boxed());
        }
        let tail = Follow {
            store: self.inner.store.clone(),
            bus,
            owner: ctx.owner.clone(),
            task_id,
            after_seq: last,
            shutdown: self.inner.shutdown.clone(),
            watch: self.inner.watch.clone(),
        }
        .until_terminal();
        Ok(futures::stream::iter(replay).chain(tail).boxed())
    }

    /// A stream's place: one of the process's `max_streams` and one of the owner's
    /// `streams_per_owner`, both given back when the stream is dropped.
    pub(crate) fn stream_permit(&self, ctx: &RequestContext) -> Result<StreamPermit, A2aError> {
        let quota = self.inner.quotas.acquire(Quota::Streams, &ctx.owner)?;
        let permit = self
            .inner
            .streams
            .clone()
            .try_acquire_owned()
            .map_err(|_| {
                A2aError::Unavailable(format!(
                    "too many open streams (limit {}); retry later",
                    self.inner.config.max_streams
                ))
            })?;
        Ok(StreamPermit {
            _permit: permit,
            _quota: quota,
        })
    }
}

/// Held by an open stream (see [`A2aService::stream_permit`]).
pub(crate) struct StreamPermit {
    _permit: tokio::sync::OwnedSemaphorePermit,
    _quota: QuotaGuard,
}
