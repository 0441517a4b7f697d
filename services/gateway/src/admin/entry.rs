//! An `[[agents]]` entry given to the admin API: parsed, validated and started as an upstream
//! agent (its first card fetched before it is routed to), its ETag, and how it is shown back
//! (credentials redacted).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use axum::response::Response;
use serde_json::Value;
use sha2::{Digest, Sha256};
use tokio_util::sync::CancellationToken;

use super::{Admin, AdminState, FIRST_FETCH, Registered, error, hex};
use crate::agents::AgentRegistry;
use crate::service::A2aService;
use crate::upstream::UpstreamAgent;
use crate::upstream::config::{AgentConfig, INLINE_SECRETS};

/// An entry turned into a running agent, not routed to yet.
pub(super) struct Built {
    pub(super) config: AgentConfig,
    /// The entry as `GET` shows it (credentials redacted).
    shown: Value,
    agent: Arc<UpstreamAgent>,
    /// Stops the agent's card refresh and heartbeat.
    pub(super) stop: CancellationToken,
}

impl Built {
    /// Routes to the agent and keeps it as registered under `etag`, stopping the agent it
    /// replaces (if any): the entry as shown.
    pub(super) fn register(
        self,
        routes: &AgentRegistry,
        registered: &mut BTreeMap<String, Registered>,
        etag: String,
    ) -> Value {
        routes.insert(self.agent);
        let entry = Registered {
            shown: self.shown,
            etag,
            stop: self.stop,
        };
        let answer = shown(&entry);
        if let Some(old) = registered.insert(self.config.name, entry) {
            old.stop.cancel();
        }
        answer
    }
}

impl Admin {
    /// [`build`] for a change through the API, which takes no inline secret: the entry is
    /// stored (in PostgreSQL when shared), so its credentials must only name where the secret
    /// is (400 naming the field otherwise).
    pub(super) async fn build(&self, body: &[u8], name: Option<&str>) -> Result<Built, Response> {
        if let Ok(entry) = serde_json::from_slice::<Value>(body)
            && let Some(creds) = entry.get("credentials").and_then(Value::as_object)
            && let Some(field) = INLINE_SECRETS.iter().find(|f| creds.contains_key(**f))
        {
            return Err(error(
                StatusCode::BAD_REQUEST,
                format!(
                    "credentials.{field}: the admin API takes no inline secret (the entry is \
                     stored); name it by reference: credentials.{field}_env (an environment \
                     variable of every replica) or credentials.{field}_file (a file on every \
                     replica)"
                ),
            ));
        }
        build(&self.svc, &self.state, body, name).await
    }
}

/// Parses, validates and starts the agent of `body`, and waits for its first card fetch: the
/// agent, ready for traffic, or why not (422).
pub(super) async fn build(
    svc: &A2aService,
    state: &AdminState,
    body: &[u8],
    name: Option<&str>,
) -> Result<Built, Response> {
    {
        let unprocessable = |m: String| error(StatusCode::UNPROCESSABLE_ENTITY, m);
        let mut raw: Value = serde_json::from_slice(body).map_err(|e| {
            error(
                StatusCode::BAD_REQUEST,
                format!("the body is not JSON: {e}"),
            )
        })?;
        if let (Some(name), Some(obj)) = (name, raw.as_object_mut()) {
            match obj.get("name") {
                None => {
                    obj.insert("name".into(), Value::String(name.to_owned()));
                }
                Some(Value::String(n)) if n == name => {}
                Some(_) => {
                    return Err(unprocessable(format!(
                        "the entry's name must be the path's ({name:?})"
                    )));
                }
            }
        }
        let mut config: AgentConfig = serde_json::from_value(raw.clone())
            .map_err(|e| unprocessable(format!("not an [[agents]] entry: {e}")))?;
        config
            .validate(&AgentRegistry::BUILTIN)
            .map_err(unprocessable)?;
        // References are read from this process (the gateway's environment, its files): each
        // replica reads its own when it applies the entry.
        if let Some(c) = &mut config.credentials {
            c.resolve(&config.name, |k| std::env::var(k).ok())
                .map_err(unprocessable)?;
        }
        let http = match &config.tls {
            Some(tls) => {
                config.client_tls = tls.load(&config.name).map_err(unprocessable)?;
                let builder = reqwest::Client::builder()
                    .connect_timeout(Duration::from_secs(5))
                    .pool_idle_timeout(Duration::from_secs(60));
                config
                    .client_tls
                    .configure(builder)
                    .map_err(|e| unprocessable(format!("agents.{}: {e}", config.name)))?
                    .build()
                    .map_err(|e| unprocessable(format!("agents.{}: {e}", config.name)))?
            }
            None => state.http.clone(),
        };
        let agent = UpstreamAgent::new(config.clone(), http, svc.agent_registry().change_sender())
            .map_err(unprocessable)?;
        let stop = svc.shutdown_token().child_token();
        agent.start(stop.clone());
        agent.wait_checked(FIRST_FETCH).await;
        let ready = crate::agents::Agent::upstream_card(&*agent).is_some()
            && crate::agents::Agent::status(&*agent).is_none_or(|s| s.healthy);
        if !ready {
            stop.cancel();
            return Err(unprocessable(format!(
                "agents.{}: the agent's card could not be fetched or verified within {} s \
                 (the gateway's log says why); nothing was changed",
                config.name,
                FIRST_FETCH.as_secs()
            )));
        }
        Ok(Built {
            config,
            shown: redact(raw),
            agent,
            stop,
        })
    }
}

/// The strong ETag of an entry: the SHA-256 of its JSON as given.
pub(super) fn etag_of(body: &Value) -> String {
    let bytes = serde_json::to_vec(body).unwrap_or_default();
    format!("\"{}\"", hex(&Sha256::digest(&bytes)))
}

/// The entry as shown back: credential references, the client id, token URL and scopes as
/// given; anything else under `credentials` (an inline secret of an entry stored before the
/// API refused them) replaced.
fn redact(mut entry: Value) -> Value {
    if let Some(Value::Object(creds)) = entry.get_mut("credentials") {
        for (k, v) in creds.iter_mut() {
            let shown = k.ends_with("_env")
                || k.ends_with("_file")
                || matches!(k.as_str(), "client_id" | "token_url" | "scopes");
            if !shown {
                *v = Value::String("<redacted>".into());
            }
        }
    }
    entry
}

pub(super) fn shown(entry: &Registered) -> Value {
    let mut v = entry.shown.clone();
    if let Some(obj) = v.as_object_mut() {
        obj.insert("source".into(), "api".into());
        obj.insert("read_only".into(), false.into());
        obj.insert("etag".into(), entry.etag.clone().into());
    }
    v
}
