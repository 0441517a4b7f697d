//! [`Metered`]: a [`TaskStore`] that times every operation of the store it wraps
//! (`a2a_store_operation_duration_seconds{operation,outcome}`), so both implementations are
//! measured the same way and neither knows about metrics. With traces on ([`Metered::traced`])
//! each operation is also a CLIENT span `store <operation>`, child of the caller's span.

use std::sync::Arc;
use std::time::Instant;

use a2a_process::metrics::Cached;
use a2a_process::telemetry::{KeyValue, SpanKind, TraceSpan};
use a2a_types::v1::{Task, TaskPushNotificationConfig};
use async_trait::async_trait;
use metrics::Histogram;

use crate::{
    DispatchMark, Interrupted, KeyClaim, KeyRequest, ListQuery, NewTask, Orphan, OutboxDepth,
    OutboxRelay, OwnerUsage, PoolStats, PushConfigPage, PushQuota, RelayPass, StoreError,
    StoreResult, StoredEvent, TaskChange, TaskPage, TaskRecord, TaskStore, UpstreamRef,
};

/// The wrapped store, timed.
pub struct Metered {
    inner: Arc<dyn TaskStore>,
    traced: bool,
}

impl Metered {
    pub fn new(inner: Arc<dyn TaskStore>) -> Self {
        Self {
            inner,
            traced: false,
        }
    }

    /// Each operation is a span (when `on`: traces are exported).
    pub fn traced(mut self, on: bool) -> Self {
        self.traced = on;
        self
    }
}

/// The span of one store operation, named `store <operation>`: a child of the current span,
/// none outside one (what is not part of a traced request is not traced).
fn span(operation: &'static str, name: &'static str) -> TraceSpan {
    TraceSpan::start_in_current(name, SpanKind::Client, || {
        vec![KeyValue::new("db.operation.name", operation)]
    })
}

/// Records one operation and passes its result on. `ok` is the operation's handle for its usual
/// outcome, resolved once per call site.
fn timed<T>(
    operation: &'static str,
    ok: &Cached<Histogram>,
    started: Instant,
    span: &TraceSpan,
    result: StoreResult<T>,
) -> StoreResult<T> {
    let outcome = match &result {
        Ok(_) => "ok",
        Err(StoreError::NotFound(_)) => "not_found",
        Err(StoreError::Conflict { .. }) => "conflict",
        Err(StoreError::Terminal(_)) => "terminal",
        Err(StoreError::Duplicate(_)) => "duplicate",
        Err(StoreError::Fenced(_)) => "fenced",
        Err(StoreError::InvalidPageToken) => "invalid_page_token",
        Err(StoreError::Unavailable(_)) => "unavailable",
        Err(StoreError::Internal(_)) => "internal",
        Err(StoreError::QuotaExceeded { .. }) => "quota_exceeded",
    };
    let seconds = started.elapsed().as_secs_f64();
    let histogram = |outcome: &'static str| {
        metrics::histogram!(
            "a2a_store_operation_duration_seconds",
            "operation" => operation,
            "outcome" => outcome,
        )
    };
    match ok.get(|| histogram("ok")) {
        Some(h) if outcome == "ok" => h.record(seconds),
        _ => histogram(outcome).record(seconds),
    }
    if outcome != "ok" {
        span.set("error.type", outcome);
    }
    span.end();
    result
}

/// `self.inner.$method($args)`, timed as `$op`.
macro_rules! forward {
    ($self:ident, $op:literal, $method:ident($($arg:expr),*)) => {{
        static OK: Cached<Histogram> = Cached::new();
        let started = Instant::now();
        // Inside a traced (sampled) operation only.
        let span = if $self.traced { span($op, concat!("store ", $op)) } else { TraceSpan::NONE };
        if span.is_traced() {
            let result = span.in_span($self.inner.$method($($arg),*)).await;
            timed($op, &OK, started, &span, result)
        } else {
            timed($op, &OK, started, &span, $self.inner.$method($($arg),*).await)
        }
    }};
}

#[async_trait]
impl TaskStore for Metered {
    async fn create_with(
        &self,
        new: NewTask,
        changes: Vec<TaskChange>,
    ) -> StoreResult<(Vec<StoredEvent>, Task)> {
        forward!(self, "create", create_with(new, changes))
    }

    async fn append_fenced(
        &self,
        task_id: &str,
        expected_seq: u64,
        epoch: Option<u64>,
        changes: Vec<TaskChange>,
    ) -> StoreResult<(Vec<StoredEvent>, Task)> {
        forward!(
            self,
            "append",
            append_fenced(task_id, expected_seq, epoch, changes)
        )
    }

    async fn get(
        &self,
        owner: &str,
        task_id: &str,
        history_length: Option<usize>,
    ) -> StoreResult<Option<TaskRecord>> {
        forward!(self, "get", get(owner, task_id, history_length))
    }

    async fn list(&self, owner: &str, query: &ListQuery) -> StoreResult<TaskPage> {
        forward!(self, "list", list(owner, query))
    }

    async fn last_seqs(&self, task_ids: &[String]) -> StoreResult<Vec<(String, u64)>> {
        forward!(self, "last_seqs", last_seqs(task_ids))
    }

    async fn events_after(
        &self,
        owner: &str,
        task_id: &str,
        after_seq: u64,
    ) -> StoreResult<Vec<StoredEvent>> {
        forward!(
            self,
            "events_after",
            events_after(owner, task_id, after_seq)
        )
    }

    async fn put_push_config(
        &self,
        owner: &str,
        config: TaskPushNotificationConfig,
        dialect: a2a_types::Dialect,
        quota: PushQuota,
    ) -> StoreResult<TaskPushNotificationConfig> {
        forward!(
            self,
            "put_push_config",
            put_push_config(owner, config, dialect, quota)
        )
    }

    async fn get_push_config(
        &self,
        owner: &str,
        task_id: &str,
        id: &str,
    ) -> StoreResult<Option<TaskPushNotificationConfig>> {
        forward!(self, "get_push_config", get_push_config(owner, task_id, id))
    }

    async fn list_push_configs(
        &self,
        owner: &str,
        task_id: &str,
        page_size: usize,
        page_token: &str,
    ) -> StoreResult<PushConfigPage> {
        forward!(
            self,
            "list_push_configs",
            list_push_configs(owner, task_id, page_size, page_token)
        )
    }

    async fn delete_push_config(&self, owner: &str, task_id: &str, id: &str) -> StoreResult<()> {
        forward!(
            self,
            "delete_push_config",
            delete_push_config(owner, task_id, id)
        )
    }

    async fn set_upstream(&self, task_id: &str, upstream: UpstreamRef) -> StoreResult<()> {
        forward!(self, "set_upstream", set_upstream(task_id, upstream))
    }

    async fn mark_dispatch(&self, task_id: &str, mark: DispatchMark) -> StoreResult<()> {
        forward!(self, "mark_dispatch", mark_dispatch(task_id, mark))
    }

    async fn claim_key(&self, req: &KeyRequest) -> StoreResult<KeyClaim> {
        forward!(self, "claim_key", claim_key(req))
    }

    async fn reclaim_key(&self, req: &KeyRequest, stale_task_id: &str) -> StoreResult<bool> {
        forward!(self, "reclaim_key", reclaim_key(req, stale_task_id))
    }

    async fn release_key(&self, owner: &str, key: &str, task_id: &str) -> StoreResult<()> {
        forward!(self, "release_key", release_key(owner, key, task_id))
    }

    async fn purge_expired_keys(&self, limit: usize) -> StoreResult<u64> {
        forward!(self, "purge_expired_keys", purge_expired_keys(limit))
    }

    async fn purge_tasks(&self, before: std::time::SystemTime, limit: usize) -> StoreResult<u64> {
        forward!(self, "purge_tasks", purge_tasks(before, limit))
    }

    async fn interrupted_before(
        &self,
        before: std::time::SystemTime,
        limit: usize,
    ) -> StoreResult<Vec<Interrupted>> {
        forward!(
            self,
            "interrupted_before",
            interrupted_before(before, limit)
        )
    }

    async fn usage(&self, owner: &str, count_up_to: u64) -> StoreResult<OwnerUsage> {
        forward!(self, "usage", usage(owner, count_up_to))
    }

    async fn purge_stale_leases(&self, grace: std::time::Duration) -> StoreResult<u64> {
        forward!(self, "purge_stale_leases", purge_stale_leases(grace))
    }

    async fn take_over(
        &self,
        replica: &str,
        lease: std::time::Duration,
        limit: usize,
    ) -> StoreResult<Vec<Orphan>> {
        forward!(self, "take_over", take_over(replica, lease, limit))
    }

    async fn ping(&self) -> StoreResult<()> {
        forward!(self, "ping", ping())
    }

    fn pool_stats(&self) -> Option<PoolStats> {
        self.inner.pool_stats()
    }

    fn has_outbox(&self) -> bool {
        self.inner.has_outbox()
    }

    async fn outbox_published(&self, commits: &[(String, u64)]) -> StoreResult<u64> {
        forward!(self, "outbox_published", outbox_published(commits))
    }

    async fn relay_outbox(
        &self,
        older_than: std::time::Duration,
        limit: usize,
        inline_max: usize,
        relay: &dyn OutboxRelay,
    ) -> StoreResult<RelayPass> {
        forward!(
            self,
            "relay_outbox",
            relay_outbox(older_than, limit, inline_max, relay)
        )
    }

    async fn outbox_depth(&self, count_up_to: u64) -> StoreResult<OutboxDepth> {
        forward!(self, "outbox_depth", outbox_depth(count_up_to))
    }
}
