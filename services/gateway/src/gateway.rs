//! The application context: the domain service ([`A2aService`]) and what only the edge of the
//! process uses around it: authentication, the rate limiter, the cards the gateway serves, the
//! admin API's state, the JWKS document, the transport settings, and the handles of every loop
//! started with them. `app` builds it ([`Gateway::start`]) and serves it; the bindings take it
//! as their state (they admit a request here, then call the service). The service gets only
//! narrow handles of what it needs from here ([`crate::service::Handles`]): house review
//! 2026-11, §1.2, the domain service and the application context apart.

use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use a2a_bus::EventBus;
use a2a_store::TaskStore;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::admin::AdminState;
use crate::agents::AgentRegistry;
use crate::auth::{Authenticator, Credentials, KeyDirectory, Rejection};
use crate::config::FileConfig;
use crate::limits::{ClientAddressing, ConnectionsConfig, EdgeConfig, RateLimiter};
use crate::service::{A2aService, CardView, Cards, Handles, RequestContext};

/// Cheap to clone (the bindings' state): one reference count.
#[derive(Clone)]
pub struct Gateway {
    inner: Arc<Inner>,
}

struct Inner {
    svc: A2aService,
    /// The configuration file's settings, as the gateway runs with them.
    config: FileConfig,
    /// `None` when the config has no `[auth]`: every caller is `anonymous`.
    auth: Option<Arc<Authenticator>>,
    /// `[limits.rate]`; `None` when no limit is set.
    rate: Option<Arc<RateLimiter>>,
    /// The cards as last published (the well-known documents).
    cards: CardView,
    /// The admin API's agents, made when first asked for (shared by the admin routes, the
    /// PostgreSQL sync and the scrape).
    admin: OnceLock<Arc<AdminState>>,
    /// The JWKS of the push signing keys, served at `a2a_push::JWKS_PATH`.
    jwks: bytes::Bytes,
    /// The loops started with the gateway, joined at the drain.
    background: Mutex<Vec<JoinHandle<()>>>,
}

/// What a gateway is assembled from (`app::build` makes them from the configuration).
pub struct Parts {
    pub store: Arc<dyn TaskStore>,
    pub bus: Arc<dyn EventBus>,
    pub agents: AgentRegistry,
    pub config: FileConfig,
    pub public_url: String,
    pub shutdown: CancellationToken,
    /// API keys kept outside the file (PostgreSQL's `api_keys`), for `[auth]`.
    pub keys: Option<Arc<dyn KeyDirectory>>,
}

impl Gateway {
    /// Assembles the gateway and starts its loops, each until shutdown: the service's
    /// ([`A2aService::start_background`]), the cards' rebuild on an agent's change and the
    /// rate limiter's eviction of stale keys. Their handles are joined at the drain. Upstream
    /// agents are started after this, so that the cards' rebuild sees their first card change.
    /// Must run inside a tokio runtime.
    pub fn start(parts: Parts) -> Self {
        let Parts {
            store,
            bus,
            agents,
            config,
            public_url,
            shutdown,
            keys,
        } = parts;
        let auth = config.auth.as_ref().map(|a| {
            Arc::new(
                Authenticator::with_directory(a, keys)
                    .expect("[auth] was validated when the config was parsed"),
            )
        });
        let rate = RateLimiter::new(&config.limits.rate);
        let builder =
            crate::cards::Builder::new(&config, agents.clone(), &public_url, auth.clone());
        let (cards_loop, cards) = crate::cards::build(builder);
        let handles = Handles {
            cards: cards.clone(),
            skills: auth.as_ref().map(|a| a.skill_policy()),
            agent_limit: rate.as_ref().and_then(RateLimiter::agent_limit),
        };
        let jwks = serde_json::to_vec(&config.push.keys.jwks())
            .expect("a JWKS serializes")
            .into();
        let svc = A2aService::new(
            store,
            bus,
            agents,
            config.service(),
            &public_url,
            shutdown.clone(),
            handles,
        );
        let mut background = svc.start_background();
        background.push(cards_loop.start(shutdown.clone()));
        background.extend(rate.as_ref().map(|r| r.start_eviction(shutdown)));
        Self {
            inner: Arc::new(Inner {
                svc,
                config,
                auth,
                rate,
                cards,
                admin: OnceLock::new(),
                jwks,
                background: Mutex::new(background),
            }),
        }
    }

    /// Once shutdown has begun: waits (until `deadline` at most) for the loops started with
    /// the gateway to end. They end on the shutdown token, the service's control listener once
    /// no turn runs here.
    pub async fn join_background(&self, deadline: tokio::time::Instant) {
        let handles = std::mem::take(
            &mut *self
                .inner
                .background
                .lock()
                .unwrap_or_else(|e| e.into_inner()),
        );
        let _ = tokio::time::timeout_at(deadline, futures::future::join_all(handles)).await;
    }

    /// The domain service the bindings call.
    pub fn service(&self) -> &A2aService {
        &self.inner.svc
    }

    /// The configuration file's settings (as the gateway started with them).
    pub fn config(&self) -> &FileConfig {
        &self.inner.config
    }

    /// Sets `ctx.owner` to the caller's principal; without `[auth]` it stays `anonymous`.
    /// Every request runs this before any operation (`bindings::pipeline`).
    pub async fn authenticate(
        &self,
        ctx: &mut RequestContext,
        creds: Credentials<'_>,
    ) -> Result<(), Rejection> {
        if let Some(auth) = &self.inner.auth {
            let principal = auth.authenticate(creds).await?;
            ctx.owner = principal.owner.clone();
            ctx.authenticated = true;
            ctx.principal = Some(principal);
        }
        Ok(())
    }

    /// Whether `[auth]` is configured (callers are authenticated).
    pub fn auth_enabled(&self) -> bool {
        self.inner.auth.is_some()
    }

    /// The rate limiter, when `[limits.rate]` sets a limit (`bindings::pipeline` checks it).
    pub fn rate_limiter(&self) -> Option<&RateLimiter> {
        self.inner.rate.as_deref()
    }

    /// The cards as last published.
    pub fn cards(&self) -> Arc<Cards> {
        self.inner.cards.current()
    }

    pub fn max_body_bytes(&self) -> usize {
        self.inner.config.limits.max_body_bytes
    }

    /// How often an open SSE stream sends a comment when it has nothing else to send.
    pub fn keep_alive(&self) -> Duration {
        Duration::from_secs(self.inner.config.limits.keep_alive_secs.max(1))
    }

    /// `[limits] max_hops`: the highest `A2A-Hop-Count` a request may carry.
    pub fn max_hops(&self) -> u32 {
        self.inner.config.limits.max_hops
    }

    /// `[limits.edge]`: the caps on a request's head the pipeline parses.
    pub fn edge_limits(&self) -> &EdgeConfig {
        &self.inner.config.limits.edge
    }

    /// `[limits.connections]` and how clients are told apart by address (`[limits.rate]`).
    pub fn connection_limits(&self) -> (&ConnectionsConfig, ClientAddressing) {
        let limits = &self.inner.config.limits;
        (&limits.connections, limits.rate.addressing())
    }

    /// The admin API's state (the agents registered through it), shared by the admin routes
    /// and the PostgreSQL sync.
    pub fn admin_state(&self) -> &Arc<AdminState> {
        self.inner.admin.get_or_init(Default::default)
    }

    /// The public push signing keys as a JWKS document (empty `keys` when none is configured).
    pub fn jwks(&self) -> bytes::Bytes {
        self.inner.jwks.clone()
    }

    /// Sets the gauges that describe state rather than events (read at each scrape): the
    /// service's, and the upstream agents by where they were registered (README, Metrics).
    pub fn record_gauges(&self) {
        self.inner.svc.record_gauges();
        metrics::gauge!("a2a_registered_agents", "source" => "file")
            .set(self.inner.config.agents.len() as f64);
        metrics::gauge!("a2a_registered_agents", "source" => "admin")
            .set(self.admin_state().registered_count() as f64);
    }
}
