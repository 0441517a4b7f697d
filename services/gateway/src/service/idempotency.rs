//! Safe retries of SendMessage and SendStreamingMessage, on an explicit key, after the IETF
//! `Idempotency-Key` header draft (draft-ietf-httpapi-idempotency-key-header).
//!
//! Nothing is deduplicated unless the client asks: two sends with the same `messageId` are two
//! messages. A send that carries a key (`Idempotency-Key`, gRPC metadata `idempotency-key`; or
//! its `messageId` with `[idempotency] message_id = true`) claims `(owner, key)` in the store
//! before it is dispatched, with a fingerprint of what the request means:
//! - the key is free: the send is dispatched and holds the key ([`KeyHold`]) until its turn
//!   has created or continued the task; a send that reaches no task (refused, answered by a
//!   direct message, cut off before its turn started) frees the key again;
//! - same key, same fingerprint: once the first send has reached its task, the retry gets that
//!   task's answer (a blocking send: the task settled; `returnImmediately`: the task as it is;
//!   a stream: the task, then its events); until then it waits, at most [`KEY_WAIT`], then gets
//!   a retryable error;
//! - same key, another fingerprint: refused, nothing is dispatched.
//!
//! A key whose holder died (its replica's dispatch lease expired) before reaching its task is
//! claimed anew by the retry. Keys expire after `[idempotency] ttl_secs`; a background sweep
//! deletes them.

use std::sync::Arc;
use std::time::Duration;

use a2a_store::{HeldKey, KeyClaim, KeyRequest, StoreError, TaskStore};
use a2a_types::A2aError;
use a2a_types::state::{is_settled, state_of, trim_history};
use a2a_types::v1::{SendMessageRequest, SendMessageResponse, send_message_response};
use futures::StreamExt;
use sha2::{Digest, Sha256};

use super::follow::settle;
use super::runner::{SendOptions, through_outage};
use super::{A2aService, EventStream, RequestContext, SeqEvent, store_error};

/// The card's declaration of this behaviour (`capabilities.extensions[]`, not required).
pub const IDEMPOTENCY_EXTENSION: &str = "urn:a2a-gateway:extension:idempotency:v1";

/// How long a retry waits for the first request with its key to reach its task.
const KEY_WAIT: Duration = Duration::from_secs(10);
/// Expired keys deleted per statement of the background sweep.
const SWEEP_BATCH: usize = 10_000;
/// Longest pause between two sweeps.
const SWEEP_EVERY: Duration = Duration::from_secs(60);

/// What a keyed send does.
pub(super) enum Keyed {
    /// Dispatch it; the hold frees the key unless the turn reaches its task.
    Dispatch(KeyHold),
    /// Answer it from the task the first request with this key reached.
    Replay(String),
}

/// A key claimed by a send that is being dispatched. Dropped without [`KeyHold::keep`] (the
/// send was refused, answered by a message, or dropped before its turn started), it frees the
/// key, so a retry is dispatched again instead of waiting for a task that will never exist.
pub(crate) struct KeyHold {
    store: Arc<dyn TaskStore>,
    owner: String,
    key: String,
    task_id: String,
    armed: bool,
}

impl KeyHold {
    /// The send reached its task: the key stays with it until it expires.
    pub(crate) fn keep(mut self) {
        self.armed = false;
    }
}

impl Drop for KeyHold {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let (store, owner, key, task_id) = (
            self.store.clone(),
            std::mem::take(&mut self.owner),
            std::mem::take(&mut self.key),
            std::mem::take(&mut self.task_id),
        );
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        runtime.spawn(async move {
            // Through a store outage too: the send failed, often because of that outage, and
            // its client retries with the key, which must not stay held by a live replica.
            let freed = through_outage(&task_id, "freeing an idempotency key", || {
                store.release_key(&owner, &key, &task_id)
            });
            if let Err(e) = freed.await.0 {
                // The key stays held until it expires, or until a retry finds its holder gone.
                tracing::warn!(error = %e, "cannot free an idempotency key");
            }
        });
    }
}

/// The key of a send: the client's, else (when configured) its message id.
pub(super) fn key_of<'a>(
    ctx: &'a RequestContext,
    req: &'a SendMessageRequest,
    message_id_is_key: bool,
) -> Option<&'a str> {
    ctx.idempotency_key.as_deref().or_else(|| {
        req.message
            .as_ref()
            .map(|m| m.message_id.as_str())
            .filter(|id| message_id_is_key && !id.is_empty())
    })
}

/// Hex SHA-256 of what a send means: tenant, message (all but its id), configuration and
/// metadata, as canonical JSON (ProtoJSON with object keys sorted). Not what only carries it:
/// the JSON-RPC id, headers and their order, the binding.
/// Fails (InvalidParams) only for what has no JSON form (NaN or ±Infinity in a `Value`, an
/// enum number outside its enum), which validation refuses before this runs.
pub(super) fn fingerprint(req: &SendMessageRequest) -> Result<String, A2aError> {
    let mut message = req.message.clone().unwrap_or_default();
    message.message_id.clear();
    let json = |field: &str, value: Result<serde_json::Value, serde_json::Error>| {
        value.map_err(|e| A2aError::invalid_params(field, format!("has no JSON form: {e}")))
    };
    let meaning = serde_json::Value::Object(serde_json::Map::from_iter([
        (
            "tenant".to_owned(),
            serde_json::Value::from(req.tenant.as_str()),
        ),
        (
            "message".to_owned(),
            json("message", serde_json::to_value(&message))?,
        ),
        (
            "configuration".to_owned(),
            json("configuration", serde_json::to_value(&req.configuration))?,
        ),
        (
            "metadata".to_owned(),
            json("metadata", serde_json::to_value(&req.metadata))?,
        ),
    ]));
    let mut canonical = Vec::new();
    write_canonical(&meaning, &mut canonical);
    Ok(Sha256::digest(&canonical)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect())
}

/// JSON with object keys in sorted order at every depth: `Struct` values are maps whose
/// serialised order is not fixed.
fn write_canonical(value: &serde_json::Value, out: &mut Vec<u8>) {
    use serde_json::Value;
    match value {
        Value::Object(map) => {
            let mut entries: Vec<_> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            out.push(b'{');
            for (i, (k, v)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                // A JSON value's text (`Display`) cannot fail.
                out.extend(serde_json::Value::from(k.as_str()).to_string().into_bytes());
                out.push(b':');
                write_canonical(v, out);
            }
            out.push(b'}');
        }
        Value::Array(items) => {
            out.push(b'[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_canonical(v, out);
            }
            out.push(b']');
        }
        scalar => out.extend(scalar.to_string().into_bytes()),
    }
}

/// The base of the upstream `Idempotency-Key`s of a task created by a keyed send: the SHA-256
/// of the owner (length-prefixed, so no two (owner, key) pairs collide) and the caller's key,
/// in hex. It depends on nothing a retry changes, unlike the task id a retry mints anew when
/// its key was freed or reclaimed (review M7); the owner keeps two callers' equal keys apart
/// upstream, and the digest keeps the caller's key and principal out of the upstream's logs.
pub(super) fn upstream_key(owner: &str, key: &str) -> String {
    use std::fmt::Write as _;
    let mut h = Sha256::new();
    h.update((owner.len() as u64).to_be_bytes());
    h.update(owner.as_bytes());
    h.update(key.as_bytes());
    h.finalize()
        .iter()
        .fold(String::with_capacity(66), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}

impl A2aService {
    /// Claims `req.key` for this send, or finds the earlier send that holds it.
    pub(super) async fn claim_key(&self, req: KeyRequest) -> Result<Keyed, A2aError> {
        let store = &self.inner.store;
        let deadline = tokio::time::Instant::now() + KEY_WAIT;
        let mut pause = Duration::from_millis(10);
        loop {
            // Armed before the write, as for a reclaim below: a send dropped while its claim is
            // in flight (a client that hangs up) frees the key if the claim took it, instead of
            // leaving it held by a task that will never exist until the key expires. Freeing
            // names this send's task id, so it never frees another send's claim.
            let hold = self.hold(&req);
            let held = match store.claim_key(&req).await {
                Ok(KeyClaim::Claimed) => {
                    metrics::counter!("a2a_idempotent_requests_total", "result" => "claimed")
                        .increment(1);
                    return Ok(Keyed::Dispatch(hold));
                }
                Ok(KeyClaim::Held(held)) => {
                    hold.keep();
                    held
                }
                // Freed between the insert and the read: claim again (while time is left).
                Err(StoreError::Conflict { .. }) if tokio::time::Instant::now() < deadline => {
                    hold.keep();
                    continue;
                }
                // The claim may have been written: the hold, dropped armed, frees it if so.
                Err(e) => return Err(store_error(&req.task_id, e)),
            };
            if held.fingerprint != req.fingerprint {
                metrics::counter!("a2a_idempotent_requests_total", "result" => "refused")
                    .increment(1);
                return Err(A2aError::IdempotencyKeyReused { key: req.key });
            }
            if self.reached(&req.owner, &held).await? {
                metrics::counter!("a2a_idempotent_requests_total", "result" => "replayed")
                    .increment(1);
                return Ok(Keyed::Replay(held.task_id));
            }
            if held.abandoned {
                // Armed before the write: a send dropped meanwhile frees what it may have taken.
                let hold = self.hold(&req);
                let reclaimed = store
                    .reclaim_key(&req, &held.task_id)
                    .await
                    .map_err(|e| store_error(&req.task_id, e));
                if reclaimed? {
                    tracing::info!(task_id = %held.task_id, "idempotency key of a stopped replica claimed anew");
                    return Ok(Keyed::Dispatch(hold));
                }
                // Someone else took it: nothing of ours to free.
                hold.keep();
            }
            if tokio::time::Instant::now() + pause > deadline {
                return Err(A2aError::Unavailable(
                    "the first request with this Idempotency-Key is still being processed; \
                     retry"
                        .into(),
                ));
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_millis(200));
        }
    }

    fn hold(&self, req: &KeyRequest) -> KeyHold {
        KeyHold {
            store: self.inner.store.clone(),
            owner: req.owner.clone(),
            key: req.key.clone(),
            task_id: req.task_id.clone(),
            armed: true,
        }
    }

    /// Whether the send holding a key has reached its task: the task exists past the sequence
    /// number it had when the key was claimed.
    async fn reached(&self, owner: &str, held: &HeldKey) -> Result<bool, A2aError> {
        let rec = self
            .inner
            .store
            .get(owner, &held.task_id, Some(0))
            .await
            .map_err(|e| store_error(&held.task_id, e))?;
        Ok(rec.is_some_and(|r| r.seq > held.after_seq))
    }

    /// A retried SendMessage: the task the first send reached, settled like a blocking send
    /// (or as it is, with `returnImmediately`).
    pub(super) async fn replay_send(
        &self,
        ctx: &RequestContext,
        task_id: &str,
        opts: SendOptions,
    ) -> Result<SendMessageResponse, A2aError> {
        // Subscribe before the snapshot that the follower starts from.
        let bus = self.subscribe_bus(task_id).await?;
        let rec = self.keyed_task(ctx, task_id).await?;
        let mut task = rec.task;
        if !opts.return_immediately && !is_settled(state_of(&task)) {
            let events = self.follow_blocking(ctx, task_id, rec.seq, bus);
            let limit = self.inner.config.blocking_timeout;
            if let Ok(result) = tokio::time::timeout(limit, settle(&mut task, events)).await {
                result?;
            }
        }
        trim_history(&mut task, opts.history_length);
        Ok(SendMessageResponse {
            payload: Some(send_message_response::Payload::Task(task)),
        })
    }

    /// A retried SendStreamingMessage: the task, then its events until it settles.
    pub(super) async fn replay_stream(
        &self,
        ctx: &RequestContext,
        task_id: &str,
    ) -> Result<EventStream, A2aError> {
        let bus = self.subscribe_bus(task_id).await?;
        let rec = self.keyed_task(ctx, task_id).await?;
        let settled = is_settled(state_of(&rec.task));
        let head = futures::stream::once(futures::future::ready(Ok(SeqEvent::task(
            rec.seq, rec.task,
        ))));
        if settled {
            return Ok(head.boxed());
        }
        Ok(head
            .chain(self.follow_from(ctx, task_id, rec.seq, bus))
            .boxed())
    }

    async fn keyed_task(
        &self,
        ctx: &RequestContext,
        task_id: &str,
    ) -> Result<a2a_store::TaskRecord, A2aError> {
        self.inner
            .store
            .get(&ctx.owner, task_id, None)
            .await
            .map_err(|e| store_error(task_id, e))?
            .ok_or_else(|| A2aError::task_not_found(task_id))
    }

    /// Deletes expired keys now and then until shutdown.
    pub(super) fn sweep_expired_keys(&self) -> tokio::task::JoinHandle<()> {
        let every = Duration::from_secs(self.inner.config.idempotency_ttl_secs / 2)
            .clamp(Duration::from_secs(1), SWEEP_EVERY);
        let inner = Arc::downgrade(&self.inner);
        let shutdown = self.inner.shutdown.clone();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    _ = tokio::time::sleep(every) => {}
                }
                let Some(inner) = inner.upgrade() else { return };
                let store = inner.store.clone();
                drop(inner);
                loop {
                    match store.purge_expired_keys(SWEEP_BATCH).await {
                        Ok(n) if n as usize == SWEEP_BATCH => continue,
                        Ok(n) => {
                            if n > 0 {
                                tracing::debug!(keys = n, "expired idempotency keys deleted");
                            }
                            break;
                        }
                        Err(e) => {
                            tracing::warn!(error = %e, "cannot delete expired idempotency keys");
                            break;
                        }
                    }
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use a2a_types::v1::{Message, Part, SendMessageConfiguration, part::Content};

    use super::*;

    /// Review M7: the upstream key depends on the caller's (owner, key) only, never on a task
    /// id, and no two (owner, key) pairs share it (the owner is length-prefixed).
    #[test]
    fn upstream_keys_derive_from_owner_and_key() {
        let k = upstream_key("alice", "retry-1");
        assert_eq!(k, upstream_key("alice", "retry-1"), "stable across retries");
        assert_eq!(k.len(), 64);
        assert!(k.bytes().all(|b| b.is_ascii_hexdigit()), "{k}");
        assert_ne!(k, upstream_key("bob", "retry-1"), "per principal");
        assert_ne!(k, upstream_key("alice", "retry-2"));
        assert_ne!(upstream_key("ab", "c"), upstream_key("a", "bc"));
        assert!(!k.contains("alice") && !k.contains("retry"));
    }

    fn send(message_id: &str, text: &str) -> SendMessageRequest {
        SendMessageRequest {
            message: Some(Message {
                message_id: message_id.into(),
                parts: vec![Part {
                    content: Some(Content::Text(text.into())),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn the_fingerprint_is_what_the_send_means() {
        let base = fingerprint(&send("m1", "hello")).unwrap();
        assert_eq!(base.len(), 64);
        assert_eq!(
            fingerprint(&send("m2", "hello")).unwrap(),
            base,
            "not the message id"
        );
        assert_ne!(fingerprint(&send("m1", "hi")).unwrap(), base, "the parts");
        let mut other_tenant = send("m1", "hello");
        other_tenant.tenant = "scenario".into();
        assert_ne!(fingerprint(&other_tenant).unwrap(), base, "the tenant");
        let mut immediate = send("m1", "hello");
        immediate.configuration = Some(SendMessageConfiguration {
            return_immediately: true,
            ..Default::default()
        });
        assert_ne!(fingerprint(&immediate).unwrap(), base, "the configuration");
    }

    #[test]
    fn metadata_key_order_does_not_matter() {
        let with = |json: &str| {
            let mut req = send("m1", "hello");
            req.metadata = Some(serde_json::from_str(json).unwrap());
            fingerprint(&req).unwrap()
        };
        assert_eq!(
            with(r#"{"a":1,"b":{"x":1,"y":2}}"#),
            with(r#"{"b":{"y":2,"x":1},"a":1}"#)
        );
        assert_ne!(with(r#"{"a":1}"#), with(r#"{"a":2}"#));
    }

    #[test]
    fn a_non_finite_number_is_an_error_not_a_panic() {
        let mut req = send("m1", "hello");
        req.metadata = Some(
            [("x".to_owned(), a2a_types::wkt::Value::from(f64::NAN))]
                .into_iter()
                .collect(),
        );
        assert!(matches!(
            fingerprint(&req),
            Err(A2aError::InvalidParams { field, .. }) if field == "metadata"
        ));
    }
}
