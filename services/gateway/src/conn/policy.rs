//! A listener's connection policy: admission (a cap in total and per client address), the
//! limits hyper's HTTP/1 and HTTP/2 servers are built with, and the connection metrics.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use hyper::server::conn::{http1, http2};
use hyper_util::rt::{TokioExecutor, TokioTimer};
use tokio::sync::Semaphore;

use crate::limits::{ClientAddressing, ConnectionsConfig, EdgeConfig};

/// One listener's connection policy: its name (the `listener` label), the limits, and the
/// connections it holds now.
#[derive(Clone)]
pub(crate) struct Policy {
    pub(super) inner: Arc<PolicyInner>,
}

pub(super) struct PolicyInner {
    pub(super) listener: &'static str,
    pub(super) limits: ConnectionsConfig,
    max_header_bytes: usize,
    max_headers: usize,
    addressing: ClientAddressing,
    /// Connections open now, in all.
    open: AtomicUsize,
    /// Connections open now by client key (entries live while their count is positive, so the
    /// map holds at most `limits.max` entries).
    by_client: Mutex<HashMap<IpAddr, usize>>,
    /// TLS handshakes in progress.
    pub(super) handshakes: Arc<Semaphore>,
}

/// hyper's HTTP/1 header count bound when none is set (`DEFAULT_MAX_HEADERS` in its `proto::h1`).
const HYPER_DEFAULT_MAX_HEADERS: usize = 100;

impl Policy {
    pub(crate) fn new(
        listener: &'static str,
        limits: &ConnectionsConfig,
        edge: &EdgeConfig,
        addressing: ClientAddressing,
    ) -> Self {
        Self {
            inner: Arc::new(PolicyInner {
                listener,
                limits: limits.clone(),
                max_header_bytes: edge.max_header_bytes,
                max_headers: edge.max_headers,
                addressing,
                open: AtomicUsize::new(0),
                by_client: Mutex::new(HashMap::new()),
                handshakes: Arc::new(Semaphore::new(limits.max_tls_handshakes)),
            }),
        }
    }

    /// Admits a connection from `peer`, or refuses it (counted) when the listener holds `max`
    /// connections, or this client `per_ip` (trusted proxies are exempt from the latter).
    pub(super) fn admit(&self, peer: IpAddr) -> Option<Admitted> {
        let inner = &self.inner;
        if inner.open.fetch_add(1, Ordering::AcqRel) >= inner.limits.max {
            inner.open.fetch_sub(1, Ordering::AcqRel);
            self.refused("max_connections");
            return None;
        }
        let key = (!inner.addressing.is_trusted(peer)).then(|| inner.addressing.key(peer));
        if let Some(key) = key {
            let mut by_client = inner.by_client.lock().unwrap_or_else(|e| e.into_inner());
            let count = by_client.entry(key).or_insert(0);
            if *count >= inner.limits.per_ip {
                drop(by_client);
                inner.open.fetch_sub(1, Ordering::AcqRel);
                self.refused("per_ip");
                return None;
            }
            *count += 1;
        }
        metrics::gauge!("a2a_connections_open", "listener" => inner.listener).increment(1.0);
        Some(Admitted {
            policy: self.clone(),
            key,
        })
    }

    pub(super) fn refused(&self, reason: &'static str) {
        metrics::counter!(
            "a2a_connections_refused_total",
            "listener" => self.inner.listener,
            "reason" => reason,
        )
        .increment(1);
        tracing::debug!(listener = self.inner.listener, reason, "connection refused");
    }

    pub(super) fn closed(&self, reason: &'static str) {
        closed(self.inner.listener, reason);
    }

    pub(super) fn http1(&self) -> http1::Builder {
        let mut b = http1::Builder::new();
        b.timer(TokioTimer::new())
            .header_read_timeout(self.inner.limits.header_read_timeout())
            .max_buf_size(self.inner.max_header_bytes);
        // hyper parses into a stack array of its default size (100) unless `max_headers` is set,
        // and then builds and fills a vector of that size for every request head (measured: about
        // 1.7k instructions of a 115k-instruction in-memory send); the same bound costs nothing
        // when left to hyper's default.
        if self.inner.max_headers != HYPER_DEFAULT_MAX_HEADERS {
            b.max_headers(self.inner.max_headers);
        }
        b
    }

    pub(super) fn http2(&self) -> http2::Builder<TokioExecutor> {
        let l = &self.inner.limits;
        let mut b = http2::Builder::new(TokioExecutor::new());
        b.timer(TokioTimer::new())
            .max_concurrent_streams(l.h2_max_concurrent_streams)
            .max_header_list_size(u32::try_from(self.inner.max_header_bytes).unwrap_or(u32::MAX))
            .max_pending_accept_reset_streams(l.h2_max_pending_accept_reset_streams)
            .max_local_error_reset_streams(l.h2_max_local_error_reset_streams);
        b
    }
}

pub(super) fn closed(listener: &'static str, reason: &'static str) {
    metrics::counter!(
        "a2a_connections_closed_total",
        "listener" => listener,
        "reason" => reason,
    )
    .increment(1);
}

/// An admitted connection, counted until it is dropped.
pub(super) struct Admitted {
    policy: Policy,
    key: Option<IpAddr>,
}

impl Drop for Admitted {
    fn drop(&mut self) {
        let inner = &self.policy.inner;
        if let Some(key) = self.key {
            let mut by_client = inner.by_client.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(count) = by_client.get_mut(&key) {
                *count -= 1;
                if *count == 0 {
                    by_client.remove(&key);
                }
            }
        }
        inner.open.fetch_sub(1, Ordering::AcqRel);
        metrics::gauge!("a2a_connections_open", "listener" => inner.listener).decrement(1.0);
    }
}
