//! The one implementation of the A2A operations. Bindings decode a request into the canonical
//! `lf.a2a.v1` type, call a method here with a [`RequestContext`], and encode what comes back;
//! validation, ownership and state rules all live below this line.
//!
//! *Invariant*: the service keeps no task state of its own between requests beyond the set of
//! turns running in this process; tasks live in the [`TaskStore`], fan-out goes through the
//! [`EventBus`].

mod card;
pub mod catalogue;
mod config;
pub(crate) mod depth;
mod expiry;
mod follow;
mod idempotency;
mod outbox;
mod push;
mod quota;
mod runner;
mod takeover;
mod tasks;
mod validate;
mod watch;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use a2a_bus::EventBus;
use a2a_store::{StoreError, TaskStore};
use a2a_types::A2aError;
use a2a_types::v1::StreamResponse;
use futures::stream::BoxStream;
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub use outbox::OutboxSettings;

use crate::agents::AgentRegistry;
use crate::auth::SkillPolicy;
use crate::limits::AgentLimit;

pub use card::{CardDocument, CardShape, CardView, Cards, agent_card_path, strong_etag};
pub use catalogue::Catalogue;
pub use config::{DeclaredExtension, ServiceConfig, TurnLimits};
pub use idempotency::IDEMPOTENCY_EXTENSION;
pub use quota::QuotaConfig;
#[doc(hidden)]
pub use validate::push_config as validate_push_config;
pub use validate::{Dialects, negotiate_version};

/// Loop protection (HTTP header and gRPC metadata alike): how many gateways a request already
/// went through ([`RequestContext::hops`]); the gateway sends the count plus one with every
/// upstream call. Declared here, below both the bindings that read it and the upstream client
/// that sends it.
pub const HOP_COUNT_HEADER: &str = "a2a-hop-count";

/// Who is asking, and with which service parameters.
#[derive(Debug, Clone)]
pub struct RequestContext {
    /// The authenticated principal; `anonymous` while authentication is off.
    pub owner: String,
    /// Extension URIs the client activated (`A2A-Extensions`).
    pub extensions: Vec<String>,
    /// The caller proved an identity with one of the card's schemes.
    pub authenticated: bool,
    /// Who proved it, and with which schemes and scopes (for per-skill requirements).
    pub principal: Option<crate::auth::Principal>,
    /// The request's W3C `traceparent`, if valid: carried with the events its turn produces.
    pub traceparent: Option<String>,
    /// The last event sequence number a reconnecting client already has (SSE `Last-Event-ID`,
    /// gRPC metadata `a2a-last-event-id`): SubscribeToTask then resumes after it.
    pub last_event_id: Option<u64>,
    /// The client's `Idempotency-Key` (gRPC metadata `idempotency-key`): a retried send with
    /// it is answered from the first one (see `idempotency`).
    pub idempotency_key: Option<String>,
    /// The call's SERVER span (disabled while traces are off), for the `a2a.*` attributes only
    /// the operation learns (task, context, agent).
    pub span: a2a_process::telemetry::TraceSpan,
    /// What the call costs under the rate limits (its method's cost, README *Rate limits*); a
    /// send charges it to the agent it reaches too.
    pub cost: u32,
    /// The dialect the request speaks (`A2A-Version`, or its method or path): the binding
    /// translates at its edge; the service only records it with a push config, whose webhook
    /// then gets payloads in that dialect.
    pub dialect: a2a_types::Dialect,
    /// How many gateways the request already went through (`A2A-Hop-Count`, 0 without it):
    /// an upstream send carries one more (loop protection, `[limits] max_hops`).
    pub hops: u32,
}

impl RequestContext {
    pub fn anonymous() -> Self {
        Self {
            owner: "anonymous".into(),
            extensions: Vec::new(),
            authenticated: false,
            principal: None,
            traceparent: None,
            last_event_id: None,
            idempotency_key: None,
            span: a2a_process::telemetry::TraceSpan::NONE,
            cost: 1,
            dialect: a2a_types::Dialect::V1,
            hops: 0,
        }
    }
}

/// One event of a stream: the StreamResponse and, for task events, its sequence number
/// (SSE `id:`; absent for a direct Message reply).
#[derive(Debug, Clone, PartialEq)]
pub struct SeqEvent {
    pub seq: Option<u64>,
    pub event: StreamResponse,
}

impl SeqEvent {
    /// A task snapshot as the first event of a stream.
    pub(crate) fn task(seq: u64, task: a2a_types::v1::Task) -> Self {
        Self {
            seq: Some(seq),
            event: StreamResponse {
                payload: Some(a2a_types::v1::stream_response::Payload::Task(task)),
            },
        }
    }
}

/// The streams returned by SendStreamingMessage and SubscribeToTask. An `Err` item is the last.
pub type EventStream = BoxStream<'static, Result<SeqEvent, A2aError>>;

#[derive(Clone)]
pub struct A2aService {
    inner: Arc<Inner>,
}

struct Inner {
    store: Arc<dyn TaskStore>,
    bus: Arc<dyn EventBus>,
    agents: AgentRegistry,
    /// The cards as the application last published them.
    cards: CardView,
    public_url: String,
    /// `[auth] skill_requirements`; `None` when the config has no `[auth]` (every caller is
    /// then `anonymous`).
    skills: Option<Arc<SkillPolicy>>,
    config: ServiceConfig,
    /// Turns running in this process, by task id; cancelling the token stops the turn.
    running: Mutex<HashMap<String, CancellationToken>>,
    /// Bounds open streams (SSE and, later, gRPC server streams).
    streams: Arc<Semaphore>,
    /// What each owner holds in this process (`[limits.quotas]`).
    quotas: Arc<quota::Quotas>,
    /// Cancelled when the process shuts down: open streams end cleanly.
    shutdown: CancellationToken,
    /// The followers' safety net for lost publishes.
    watch: watch::Watch,
    /// `[limits.rate] agent`; `None` when no agent limit is set.
    agent_limit: Option<AgentLimit>,
    /// Until when this replica's dispatch lease is known to hold (see `takeover.rs`).
    lease: takeover::LeaseClock,
    /// The outbox relay, once started ([`A2aService::start_outbox`]; only with a store that
    /// has an outbox).
    outbox: std::sync::OnceLock<outbox::Outbox>,
}

/// What the service takes from the application context (`crate::gateway`): a read-only or
/// narrow handle of each, never the authenticator, the rate limiter or the card builder.
pub struct Handles {
    /// The cards as last published (GetExtendedAgentCard, the catalogue).
    pub cards: CardView,
    /// `[auth] skill_requirements`, checked when a message is routed; `Some` exactly when
    /// `[auth]` is configured.
    pub skills: Option<Arc<SkillPolicy>>,
    /// `[limits.rate] agent`, charged when a send is routed; `None` when not set.
    pub agent_limit: Option<AgentLimit>,
}

impl A2aService {
    pub fn new(
        store: Arc<dyn TaskStore>,
        bus: Arc<dyn EventBus>,
        agents: AgentRegistry,
        config: ServiceConfig,
        public_url: &str,
        shutdown: CancellationToken,
        handles: Handles,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                store,
                bus,
                agents,
                cards: handles.cards,
                public_url: public_url.to_owned(),
                skills: handles.skills,
                streams: Arc::new(Semaphore::new(config.max_streams)),
                quotas: quota::Quotas::new(config.quotas.clone()),
                config,
                running: Mutex::new(HashMap::new()),
                shutdown,
                watch: watch::Watch::default(),
                agent_limit: handles.agent_limit,
                lease: takeover::LeaseClock::default(),
                outbox: std::sync::OnceLock::new(),
            }),
        }
    }

    /// Starts the service's own loops, each until shutdown: the followers' watch, other
    /// replicas' control messages and the sweep of expired idempotency keys. Started by the
    /// caller, not by [`A2aService::new`], so that whoever starts them keeps their handles and
    /// joins them at shutdown (`crate::gateway::Gateway`). Must be called inside a tokio
    /// runtime.
    pub fn start_background(&self) -> Vec<JoinHandle<()>> {
        vec![
            self.inner
                .watch
                .run(self.inner.store.clone(), self.inner.shutdown.clone()),
            self.listen_for_control(),
            self.sweep_expired_keys(),
        ]
    }

    /// Starts the outbox relay (see `outbox.rs`) if the store has an outbox: the delete of the
    /// rows of commits this process published, and the relay of rows left behind by any.
    pub fn start_outbox(&self, settings: OutboxSettings, shutdown: CancellationToken) {
        if !self.inner.store.has_outbox() {
            return;
        }
        let _ = self.inner.outbox.set(outbox::Outbox::start(
            self.inner.store.clone(),
            self.inner.bus.clone(),
            settings,
            shutdown,
        ));
    }

    /// Waits (at most `limit`) until every upstream agent has tried its first card fetch.
    pub async fn wait_for_upstreams(&self, limit: Duration) {
        let waits = self
            .inner
            .agents
            .iter()
            .map(|a| async move { a.wait_ready(limit).await });
        futures::future::join_all(waits).await;
    }

    /// Acts on control messages from other replicas (CancelTask received elsewhere for a turn
    /// running here) until the turns running here at shutdown have ended: a turn finishing
    /// during the drain can still be canceled. Must be called inside a tokio runtime.
    fn listen_for_control(&self) -> JoinHandle<()> {
        let mut control = self.inner.bus.control();
        // Weak: the listener must not keep the service alive.
        let inner = Arc::downgrade(&self.inner);
        let drained = drained(inner.clone());
        tokio::spawn(async move {
            tokio::pin!(drained);
            loop {
                let msg = tokio::select! {
                    () = &mut drained => return,
                    msg = futures::StreamExt::next(&mut control) => msg,
                };
                let (Some(a2a_bus::Control::Cancel { task_id }), Some(inner)) =
                    (msg, inner.upgrade())
                else {
                    return;
                };
                let turn = inner
                    .running
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .get(&task_id)
                    .cloned();
                if let Some(turn) = turn {
                    tracing::debug!(task_id, "canceling a turn at another replica's request");
                    turn.cancel();
                }
            }
        })
    }

    pub fn store(&self) -> &Arc<dyn TaskStore> {
        &self.inner.store
    }

    pub fn shutdown_token(&self) -> &CancellationToken {
        &self.inner.shutdown
    }

    /// Once shutdown has begun: waits until no turn runs in this process any more, or until
    /// `deadline`. Returns how many turns still run.
    pub async fn drain(&self, deadline: tokio::time::Instant) -> usize {
        let _ = tokio::time::timeout_at(deadline, drained(Arc::downgrade(&self.inner))).await;
        self.inner.running_turns()
    }

    /// The agents this gateway routes to (the admin API adds and removes upstream ones).
    pub fn agent_registry(&self) -> &AgentRegistry {
        &self.inner.agents
    }

    /// Required extensions the client did not activate → ExtensionSupportRequired; returns the
    /// activated extensions this gateway supports (echoed in `A2A-Extensions`). Checked once
    /// per request, in the pipeline (`bindings::pipeline`), not by each operation.
    pub fn check_extensions(&self, ctx: &RequestContext) -> Result<Vec<String>, A2aError> {
        let declared = &self.inner.config.extensions;
        if let Some(missing) = declared
            .iter()
            .find(|e| e.required && !ctx.extensions.contains(&e.uri))
        {
            return Err(A2aError::ExtensionSupportRequired {
                uri: missing.uri.clone(),
            });
        }
        Ok(ctx
            .extensions
            .iter()
            .filter(|uri| *uri == IDEMPOTENCY_EXTENSION || declared.iter().any(|e| &e.uri == *uri))
            .cloned()
            .collect())
    }

    /// Sets the gauges that describe state rather than events (read at each scrape): upstream
    /// health and queue depth by agent, and the PostgreSQL pool. The registered agents' gauge
    /// is the application context's (`crate::gateway`), which holds the admin API's state.
    pub fn record_gauges(&self) {
        for agent in self.inner.agents.iter() {
            let Some(status) = agent.status() else {
                continue;
            };
            let name = agent.name().to_owned();
            metrics::gauge!("a2a_upstream_healthy", "agent" => name.clone())
                .set(if status.healthy { 1.0 } else { 0.0 });
            metrics::gauge!("a2a_upstream_queue_depth", "agent" => name).set(status.queued as f64);
        }
        if let Some(pool) = self.inner.store.pool_stats() {
            metrics::gauge!("a2a_store_pool_connections", "state" => "in_use")
                .set(f64::from(pool.in_use));
            metrics::gauge!("a2a_store_pool_connections", "state" => "idle")
                .set(f64::from(pool.idle));
        }
    }

    fn require_streaming(&self) -> Result<(), A2aError> {
        if self.inner.config.streaming {
            Ok(())
        } else {
            Err(A2aError::UnsupportedOperation(
                "streaming is not supported by this agent (capabilities.streaming is false)".into(),
            ))
        }
    }
}

impl Inner {
    fn running_turns(&self) -> usize {
        self.running.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

/// How often a stopping gateway looks whether its turns have ended.
const DRAIN_POLL: Duration = Duration::from_millis(50);

/// Resolves once shutdown has begun and no turn runs in this process any more (or the service
/// is gone). It polls the set of running turns rather than being told by each turn, so that the
/// turn's own path stays as it is; a stop may take one poll longer.
async fn drained(inner: Weak<Inner>) {
    let Some(shutdown) = inner.upgrade().map(|i| i.shutdown.clone()) else {
        return;
    };
    shutdown.cancelled().await;
    while inner.upgrade().is_some_and(|i| i.running_turns() > 0) {
        tokio::time::sleep(DRAIN_POLL).await;
    }
}

/// Store failures as the service reports them. NotFound never says more than a missing task
/// would; internal causes are logged here and not echoed.
pub(crate) fn store_error(task_id: &str, e: StoreError) -> A2aError {
    match e {
        StoreError::NotFound(_) => A2aError::task_not_found(task_id),
        StoreError::Unavailable(msg) => {
            tracing::warn!(task_id, error = %msg, "task store unavailable");
            A2aError::Unavailable("the task store is unreachable; retry later".into())
        }
        StoreError::InvalidPageToken => {
            A2aError::invalid_params("pageToken", "is not a valid page token")
        }
        StoreError::Terminal(_) => A2aError::UnsupportedOperation(format!(
            "task {task_id} is in a terminal state and cannot be changed"
        )),
        StoreError::Conflict { .. } => {
            A2aError::UnsupportedOperation(format!("task {task_id} changed concurrently; retry"))
        }
        StoreError::QuotaExceeded { quota, limit } => quota::refusal(quota, limit),
        StoreError::Fenced(_) => A2aError::Unavailable(format!(
            "task {task_id} was taken over by another replica; its turn goes on there"
        )),
        other => {
            tracing::error!(task_id, error = %other, "task store error");
            A2aError::Internal("the task store failed".into())
        }
    }
}
