//! The application context: the domain service ([`A2aService`]) and what only the edge of the
//! process uses around it, the admin API's state and the JWKS document. `app` builds it and
//! serves it; the A2A operations never see it (house review 2026-11, §1.2: the domain service
//! and the application context apart).

use std::sync::{Arc, Mutex, OnceLock};

use crate::admin::AdminState;
use crate::service::A2aService;

#[derive(Clone)]
pub struct Gateway {
    svc: A2aService,
    /// The admin API's agents, made when first asked for (shared by the admin routes, the
    /// PostgreSQL sync and the scrape).
    admin: Arc<OnceLock<Arc<AdminState>>>,
    /// The JWKS of the push signing keys, served at `a2a_push::JWKS_PATH`.
    jwks: bytes::Bytes,
    /// The service's loops ([`A2aService::start_background`]), joined at the drain.
    background: Arc<Mutex<Vec<tokio::task::JoinHandle<()>>>>,
}

impl Gateway {
    /// `background`: the handles of the loops `svc` was started with.
    pub fn new(svc: A2aService, background: Vec<tokio::task::JoinHandle<()>>) -> Self {
        let jwks = serde_json::to_vec(&svc.file_config().push.keys.jwks())
            .expect("a JWKS serializes")
            .into();
        Self {
            svc,
            admin: Arc::default(),
            jwks,
            background: Arc::new(Mutex::new(background)),
        }
    }

    /// Once shutdown has begun: waits (until `deadline` at most) for the service's loops to
    /// end. They end on the shutdown token, the control listener once no turn runs here.
    pub async fn join_background(&self, deadline: tokio::time::Instant) {
        let handles =
            std::mem::take(&mut *self.background.lock().unwrap_or_else(|e| e.into_inner()));
        let _ = tokio::time::timeout_at(deadline, futures::future::join_all(handles)).await;
    }

    /// The domain service the bindings call.
    pub fn service(&self) -> &A2aService {
        &self.svc
    }

    /// The admin API's state (the agents registered through it), shared by the admin routes
    /// and the PostgreSQL sync.
    pub fn admin_state(&self) -> &Arc<AdminState> {
        self.admin.get_or_init(Default::default)
    }

    /// The public push signing keys as a JWKS document (empty `keys` when none is configured).
    pub fn jwks(&self) -> bytes::Bytes {
        self.jwks.clone()
    }

    /// Sets the gauges that describe state rather than events (read at each scrape): the
    /// service's, and the upstream agents by where they were registered (README, Metrics).
    pub fn record_gauges(&self) {
        self.svc.record_gauges();
        metrics::gauge!("a2a_registered_agents", "source" => "file")
            .set(self.svc.file_config().agents.len() as f64);
        metrics::gauge!("a2a_registered_agents", "source" => "admin")
            .set(self.admin_state().registered_count() as f64);
    }
}
