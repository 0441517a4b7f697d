//! Idempotency keys: what the store keeps so that a retried SendMessage carrying the same
//! `Idempotency-Key` is answered with the first request's task instead of dispatching again.
//!
//! A key is scoped to its owner. Its record names the task the first request started or
//! continued, a fingerprint of what that request meant (a different request under the same key
//! is refused), and the task's sequence number when the key was claimed: the first request has
//! done its part once the task exists with a later sequence number (a new task starts at 1).
//! Keys expire after their time to live; an expired key is free again, and is deleted in the
//! background ([`crate::TaskStore::purge_expired_keys`]).

use std::time::Duration;

/// A claim on `(owner, key)` for the task a request is about to start or continue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyRequest {
    pub owner: String,
    pub key: String,
    /// Hex SHA-256 of the request's canonical form.
    pub fingerprint: String,
    pub task_id: String,
    /// The task's sequence number before this request: 0 for a new task.
    pub after_seq: u64,
    /// How long the key is kept.
    pub ttl: Duration,
}

/// The record of a key that was claimed before.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldKey {
    pub task_id: String,
    pub fingerprint: String,
    pub after_seq: u64,
    /// The process that claimed it is gone (its dispatch lease expired): if the key's request
    /// has not reached its task by now, it never will, and the key may be claimed again with
    /// [`crate::TaskStore::reclaim_key`]. Always false for a store that one process uses alone.
    pub abandoned: bool,
}

/// What [`crate::TaskStore::claim_key`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyClaim {
    /// The key was free (or expired) and now names the request's task.
    Claimed,
    /// The key is held by an earlier request.
    Held(HeldKey),
}
