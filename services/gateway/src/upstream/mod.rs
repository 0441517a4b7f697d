//! Upstream A2A agents: each `[[agents]]` entry becomes an [`UpstreamAgent`], an [`Agent`] like
//! the built-in ones, so the task runner, the store and the bus treat both alike. It keeps the
//! upstream's card fresh (conditional GETs honouring `ETag` and `Cache-Control`), checks its
//! health (a heartbeat, backing off while it fails; an unhealthy agent is not routed to), bounds
//! and prioritises what runs on it (a [`DispatchQueue`]) and proxies each turn ([`proxy`])
//! through `a2a-client` (or the 0.3 client, [`v03`]).

mod card;
mod client;
pub mod config;
mod proxy;
mod v03;

use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use a2a_types::A2aError;
use a2a_types::v1::{AgentCard, AgentSkill};
use async_trait::async_trait;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::agents::queue::DispatchQueue;
use crate::agents::{Agent, AgentEvents, AgentRequest, AgentStatus};
use crate::signing::verify::TrustedKeys;
pub use client::UpstreamClient;
use config::AgentConfig;

/// Toward an upstream that declares the gateway's own idempotency extension, every send carries
/// a key, so a takeover can send a turn again that the replica that died was sending.
pub use crate::service::IDEMPOTENCY_EXTENSION;

/// Longest wait between heartbeats of a failing agent.
const MAX_BACKOFF: Duration = Duration::from_secs(30);

pub struct UpstreamAgent {
    config: AgentConfig,
    /// The keys its card must be signed with (`verify_signature = true`).
    trust: Option<TrustedKeys>,
    http: reqwest::Client,
    live: RwLock<Live>,
    queue: Arc<DispatchQueue>,
    /// Recent success of calls, 0..1 (an exponentially weighted average; 1 = all succeeded).
    availability: Mutex<f64>,
    /// Bumped when a card or a health state changes (the service rebuilds its cards).
    changes: watch::Sender<u64>,
    /// True once the first card fetch or heartbeat has finished, either way.
    checked: watch::Sender<bool>,
}

#[derive(Default)]
struct Live {
    card: Option<AgentCard>,
    client: Option<UpstreamClient>,
    healthy: bool,
    etag: Option<String>,
    /// When the card must be fetched again (`None`: an inline card, never).
    stale_at: Option<Instant>,
    failures: u32,
}

impl UpstreamAgent {
    /// The agent of one `[[agents]]` entry; no I/O here (see [`UpstreamAgent::start`]).
    pub fn new(
        config: AgentConfig,
        http: reqwest::Client,
        changes: watch::Sender<u64>,
    ) -> Result<Arc<Self>, String> {
        let mut live = Live::default();
        if let Some(card) = config.inline_card()? {
            live.client = Some(UpstreamClient::new(&config, &card, http.clone())?);
            live.card = Some(card);
        } else {
            live.stale_at = Some(Instant::now());
        }
        let trust = config
            .verify_signature
            .then(|| TrustedKeys::load(config.trusted_jwks_url.as_deref(), &config.trusted_keys))
            .transpose()
            .map_err(|e| format!("agents.{}.{e}", config.name))?;
        Ok(Arc::new(Self {
            trust,
            queue: DispatchQueue::new(&config.name, config.max_concurrency, config.queue_capacity),
            config,
            http,
            live: RwLock::new(live),
            availability: Mutex::new(1.0),
            changes,
            checked: watch::channel(false).0,
        }))
    }

    /// Runs the card refresh and heartbeat loop until `shutdown`.
    pub fn start(self: &Arc<Self>, shutdown: CancellationToken) {
        let agent = Arc::downgrade(self);
        tokio::spawn(async move {
            loop {
                let Some(a) = agent.upgrade() else { return };
                let delay = a.check().await;
                drop(a);
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    _ = tokio::time::sleep(delay) => {}
                }
            }
        });
    }

    /// Resolves once the first check has finished (or after `limit`).
    pub async fn wait_checked(&self, limit: Duration) {
        let mut rx = self.checked.subscribe();
        let _ = tokio::time::timeout(limit, rx.wait_for(|c| *c)).await;
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Live> {
        self.live.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Live> {
        self.live.write().unwrap_or_else(|e| e.into_inner())
    }

    fn changed(&self) {
        self.changes.send_modify(|v| *v += 1);
    }

    /// One round: refresh a stale card (the fetch is the heartbeat), else heartbeat the
    /// binding. Returns the delay until the next round.
    async fn check(&self) -> Duration {
        let result = self.refresh_or_probe().await;
        let interval = Duration::from_secs(self.config.health_interval_secs.max(1));
        let (flipped, delay) = {
            let mut live = self.write();
            let was = live.healthy;
            match &result {
                Ok(()) => {
                    live.healthy = live.client.is_some();
                    live.failures = 0;
                }
                Err(e) => {
                    live.healthy = false;
                    live.failures += 1;
                    if was || live.failures == 1 {
                        tracing::warn!(agent = %self.config.name, error = %e, "upstream agent unhealthy");
                    }
                }
            }
            let delay = if live.healthy {
                interval
            } else {
                let backoff = Duration::from_secs(1 << live.failures.min(6).saturating_sub(1));
                backoff.min(interval).min(MAX_BACKOFF)
            };
            (was != live.healthy, delay)
        };
        if flipped {
            let healthy = self.read().healthy;
            tracing::info!(agent = %self.config.name, healthy, "upstream agent health changed");
            self.changed();
        }
        self.checked.send_replace(true);
        delay
    }

    async fn refresh_or_probe(&self) -> Result<(), String> {
        let (stale, etag) = {
            let live = self.read();
            let stale = live.stale_at.is_some_and(|at| Instant::now() >= at);
            (stale, live.etag.clone())
        };
        if !stale {
            let client = self.read().client.clone();
            return match client {
                Some(c) => c.probe().await,
                None => Err("no usable card yet".into()),
            };
        }
        let url = card::card_location(self.config.card_url.as_deref().unwrap_or_default())?;
        let timeout = Duration::from_secs(self.config.timeout_secs.max(1));
        let v03 = self.config.protocol == "0.3";
        match card::fetch(&self.http, &url, etag.as_deref(), v03, timeout).await? {
            card::Fetched::NotModified { max_age } => {
                self.write().stale_at = Some(Instant::now() + max_age);
            }
            card::Fetched::Card {
                card,
                json,
                etag,
                max_age,
            } => {
                if let Err(e) = self.verify(&json, timeout).await {
                    // Not used: the agent stays unhealthy (no card, no client) until a card
                    // that verifies arrives; the next check fetches it again in full.
                    let mut live = self.write();
                    let had = live.card.take().is_some();
                    live.client = None;
                    live.etag = None;
                    drop(live);
                    if had {
                        self.changed();
                    }
                    return Err(e);
                }
                let client = match UpstreamClient::new(&self.config, &card, self.http.clone()) {
                    Ok(client) => client,
                    Err(e) => {
                        // As a card that does not verify: not used, and the one before is
                        // dropped too (it no longer says where the agent is).
                        let mut live = self.write();
                        let had = live.card.take().is_some();
                        live.client = None;
                        live.etag = None;
                        drop(live);
                        if had {
                            self.changed();
                        }
                        return Err(e);
                    }
                };
                tracing::info!(agent = %self.config.name, binding = %client.binding(), "upstream card loaded");
                let mut live = self.write();
                let same = live.card.as_ref() == Some(&card);
                live.card = Some(card);
                live.client = Some(client);
                live.etag = etag;
                live.stale_at = Some(Instant::now() + max_age);
                drop(live);
                if !same {
                    self.changed();
                }
            }
        }
        Ok(())
    }

    /// With `verify_signature`, refuses a card none of whose signatures verifies with a
    /// trusted key (`a2a_upstream_card_rejected_total{agent,reason}`; the reason is logged by
    /// the health check).
    async fn verify(&self, json: &serde_json::Value, timeout: Duration) -> Result<(), String> {
        let Some(trust) = &self.trust else {
            return Ok(());
        };
        match crate::signing::verify::verify(json, trust, &self.http, timeout).await {
            Ok(key) => {
                tracing::debug!(agent = %self.config.name, key, "upstream card signature verified");
                Ok(())
            }
            Err(rejected) => {
                crate::metrics::upstream_card_rejected(&self.config.name, rejected.reason());
                Err(format!("its card is refused: {rejected}"))
            }
        }
    }

    /// The client for a call, or a clear error while the agent is unhealthy.
    fn client(&self) -> Result<UpstreamClient, A2aError> {
        let live = self.read();
        match (&live.client, live.healthy) {
            (Some(c), true) => Ok(c.clone()),
            _ => Err(A2aError::Unavailable(format!(
                "upstream agent {} is unavailable (its health check is failing); retry later",
                self.config.name
            ))),
        }
    }

    fn streams(&self) -> bool {
        self.read()
            .card
            .as_ref()
            .and_then(|c| c.capabilities.as_ref())
            .and_then(|c| c.streaming)
            .unwrap_or(false)
    }

    /// Whether the upstream's card declares [`IDEMPOTENCY_EXTENSION`].
    fn idempotent(&self) -> bool {
        self.read()
            .card
            .as_ref()
            .and_then(|c| c.capabilities.as_ref())
            .is_some_and(|c| c.extensions.iter().any(|e| e.uri == IDEMPOTENCY_EXTENSION))
    }

    /// Records a call's outcome: availability moves; no answer marks the agent unhealthy until
    /// the next heartbeat succeeds.
    fn record<T>(&self, result: &Result<T, A2aError>) {
        let failed = matches!(result, Err(A2aError::Unavailable(_)));
        {
            let mut a = self.availability.lock().unwrap_or_else(|e| e.into_inner());
            *a = *a * 0.9 + if failed { 0.0 } else { 0.1 };
        }
        if failed {
            let mut live = self.write();
            if live.healthy {
                live.healthy = false;
                drop(live);
                tracing::warn!(agent = %self.config.name, "upstream agent unreachable during a call");
                self.changed();
            }
        }
    }
}

#[async_trait]
impl Agent for UpstreamAgent {
    fn name(&self) -> &str {
        &self.config.name
    }

    fn description(&self) -> &str {
        "upstream A2A agent"
    }

    fn skills(&self) -> Vec<AgentSkill> {
        self.read()
            .card
            .as_ref()
            .map(|c| c.skills.clone())
            .unwrap_or_default()
    }

    fn input_modes(&self) -> Vec<String> {
        let modes = self
            .read()
            .card
            .as_ref()
            .map(|c| c.default_input_modes.clone())
            .unwrap_or_default();
        if modes.is_empty() {
            vec!["*/*".into()]
        } else {
            modes
        }
    }

    fn output_modes(&self) -> Vec<String> {
        self.read()
            .card
            .as_ref()
            .map(|c| c.default_output_modes.clone())
            .unwrap_or_default()
    }

    fn status(&self) -> Option<AgentStatus> {
        Some(AgentStatus {
            healthy: self.read().healthy,
            availability: *self.availability.lock().unwrap_or_else(|e| e.into_inner()),
            load: self.queue.load(),
            weight: self.config.weight,
            queued: self.queue.queued(),
        })
    }

    fn is_remote(&self) -> bool {
        true
    }

    fn resends_idempotently(&self) -> bool {
        self.idempotent()
    }

    fn queue(&self) -> Option<Arc<DispatchQueue>> {
        Some(self.queue.clone())
    }

    fn protocol(&self) -> &str {
        &self.config.protocol
    }

    fn upstream_card(&self) -> Option<AgentCard> {
        self.read().card.clone()
    }

    async fn wait_ready(&self, limit: Duration) {
        self.wait_checked(limit).await;
    }

    async fn execute(&self, request: AgentRequest, events: AgentEvents) -> Result<(), A2aError> {
        let result = proxy::execute(self, request, events).await;
        self.record(&result);
        result
    }

    async fn resume(&self, request: AgentRequest, events: AgentEvents) -> Result<(), A2aError> {
        let result = proxy::resume(self, request, events).await;
        self.record(&result);
        result
    }
}
