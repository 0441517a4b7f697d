//! The admin API's handlers: list, read, create, replace and delete agents, and the audit
//! records; each authenticates the caller first and holds the registered agents' lock for a
//! whole change.

use std::collections::BTreeMap;
use std::sync::Arc;

use tokio::sync::MutexGuard;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use a2a_store::RegistryChange;

use super::entry::{Built, etag_of, shown};
use super::share::{apply, persist};
use super::{AGENTS_PATH, AUDIT_SHOWN, Admin, MAX_AGENTS, Registered, error};
use crate::agents::AgentRegistry;

/// The agents registered through the API, locked for a change.
type Locked<'a> = MutexGuard<'a, BTreeMap<String, Registered>>;

impl Admin {
    pub(super) fn registry(&self) -> &AgentRegistry {
        self.svc.agent_registry()
    }

    /// The current ETag of an API-registered agent that a PUT or DELETE may change: 404 when
    /// unknown, 409 for a file or built-in agent, 412 when `If-Match` names another version.
    fn changeable(
        &self,
        registered: &BTreeMap<String, Registered>,
        name: &str,
        headers: &HeaderMap,
    ) -> Result<String, Response> {
        let Some(current) = registered.get(name) else {
            return Err(match self.fixed_source(name) {
                Some(source) => read_only(name, source),
                None => error(StatusCode::NOT_FOUND, format!("no agent {name:?}")),
            });
        };
        if !if_match(headers, &current.etag) {
            return Err(precondition_failed(name, &current.etag));
        }
        Ok(current.etag.clone())
    }

    /// Where an agent that is not the API's comes from: `file` (`[[agents]]`) or `builtin`.
    pub(super) fn fixed_source(&self, name: &str) -> Option<&'static str> {
        if self.file_agents.iter().any(|a| a == name) {
            Some("file")
        } else if AgentRegistry::BUILTIN.contains(&name) && self.registry().get(name).is_some() {
            Some("builtin")
        } else {
            None
        }
    }

    /// The start of a PUT or DELETE of agent `name`: the caller (for the audit), the registered
    /// agents (locked for the whole change, up to date with the shared registry) and the ETag
    /// the change replaces; or the answer (401, 404, 409, 412).
    async fn begin_change(
        &self,
        name: &str,
        headers: &HeaderMap,
    ) -> Result<(String, Locked<'_>, String), Response> {
        let who = self.authenticate(headers).await?;
        let mut registered = self.state.registered.lock().await;
        self.refresh(&mut registered).await;
        let expect = self.changeable(&registered, name, headers)?;
        Ok((who, registered, expect))
    }

    /// Brings this process up to date with the shared table before a change (PostgreSQL).
    async fn refresh(&self, registered: &mut BTreeMap<String, Registered>) {
        if self.state.shared.get().is_some() {
            apply(&self.svc, &self.state, registered).await;
        }
    }
}

/// Whether `If-Match` (if any) lets a change to the entry tagged `current` go ahead.
fn if_match(headers: &HeaderMap, current: &str) -> bool {
    let Some(v) = headers.get(header::IF_MATCH).and_then(|v| v.to_str().ok()) else {
        return true;
    };
    v.split(',')
        .map(str::trim)
        .any(|t| t == "*" || t == current)
}

fn with_etag(mut response: Response, etag: &str) -> Response {
    if let Ok(v) = HeaderValue::from_str(etag) {
        response.headers_mut().insert(header::ETAG, v);
    }
    response
}

fn audit(who: &str, action: &str, name: &str, etag: Option<&str>) {
    tracing::info!(
        target: "a2a_gateway::audit",
        who,
        action,
        agent = name,
        etag = etag.unwrap_or(""),
        "admin change"
    );
}

pub(super) async fn list(State(admin): State<Arc<Admin>>, headers: HeaderMap) -> Response {
    if let Err(r) = admin.authenticate(&headers).await {
        return r;
    }
    let registered = admin.state.registered.lock().await;
    let mut agents: Vec<Value> = Vec::new();
    for agent in admin.registry().iter() {
        let name = agent.name();
        if let Some(entry) = registered.get(name) {
            agents.push(shown(entry));
        } else if let Some(source) = admin.fixed_source(name) {
            agents.push(json!({"name": name, "source": source, "read_only": true}));
        }
    }
    axum::Json(json!({ "agents": agents })).into_response()
}

pub(super) async fn audit_records(State(admin): State<Arc<Admin>>, headers: HeaderMap) -> Response {
    if let Err(r) = admin.authenticate(&headers).await {
        return r;
    }
    match admin.state.store().audit(AUDIT_SHOWN).await {
        Ok(records) => {
            let records: Vec<Value> = records
                .into_iter()
                .map(|r| {
                    let at = chrono::DateTime::from_timestamp_millis(r.at_ms)
                        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true));
                    json!({"at": at, "who": r.who, "action": r.action, "agent": r.agent,
                           "etag": r.etag})
                })
                .collect();
            axum::Json(json!({ "records": records })).into_response()
        }
        Err(e) => {
            tracing::error!(error = %e, "admin API: cannot read the audit records");
            error(
                StatusCode::SERVICE_UNAVAILABLE,
                "the database is unavailable",
            )
        }
    }
}

pub(super) async fn read(
    State(admin): State<Arc<Admin>>,
    Path(name): Path<String>,
    headers: HeaderMap,
) -> Response {
    if let Err(r) = admin.authenticate(&headers).await {
        return r;
    }
    let registered = admin.state.registered.lock().await;
    if let Some(entry) = registered.get(&name) {
        return with_etag(axum::Json(shown(entry)).into_response(), &entry.etag);
    }
    match admin.fixed_source(&name) {
        Some(source) => {
            axum::Json(json!({"name": name, "source": source, "read_only": true})).into_response()
        }
        None => error(StatusCode::NOT_FOUND, format!("no agent {name:?}")),
    }
}

pub(super) async fn create(
    State(admin): State<Arc<Admin>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let who = match admin.authenticate(&headers).await {
        Ok(w) => w,
        Err(r) => return r,
    };
    let mut registered = admin.state.registered.lock().await;
    admin.refresh(&mut registered).await;
    // The name first, without building anything.
    let name = serde_json::from_slice::<Value>(&body)
        .ok()
        .and_then(|v| v.get("name").and_then(Value::as_str).map(str::to_owned));
    if let Some(name) = &name
        && (registered.contains_key(name)
            || admin.fixed_source(name).is_some()
            || admin.registry().get(name).is_some())
    {
        return error(
            StatusCode::CONFLICT,
            format!("agent {name:?} exists: PUT /admin/v1/agents/{name} replaces it"),
        );
    }
    if registered.len() >= MAX_AGENTS {
        return error(
            StatusCode::INSUFFICIENT_STORAGE,
            format!("at most {MAX_AGENTS} agents are registered through the admin API"),
        );
    }
    let built = match admin.build(&body, None).await {
        Ok(built) => built,
        Err(r) => return r,
    };
    let name = built.config.name.clone();
    let raw = serde_json::from_slice::<Value>(&body).unwrap_or_default();
    let etag = etag_of(&raw);
    let entry = raw.to_string();
    let change = RegistryChange::Create {
        name: &name,
        entry: &entry,
        etag: &etag,
    };
    let answer = match commit(&admin, &mut registered, built, change, &who, &etag).await {
        Ok(answer) => answer,
        Err(refused) => return refused,
    };
    admin.state.count(&registered);
    audit(&who, "create", &name, Some(&etag));
    let mut response = with_etag(
        (StatusCode::CREATED, axum::Json(answer)).into_response(),
        &etag,
    );
    if let Ok(v) = HeaderValue::from_str(&format!("{AGENTS_PATH}/{name}")) {
        response.headers_mut().insert(header::LOCATION, v);
    }
    response
}

pub(super) async fn replace(
    State(admin): State<Arc<Admin>>,
    Path(name): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let (who, mut registered, expect) = match admin.begin_change(&name, &headers).await {
        Ok(begun) => begun,
        Err(r) => return r,
    };
    let built = match admin.build(&body, Some(&name)).await {
        Ok(built) => built,
        Err(r) => return r,
    };
    let mut raw = serde_json::from_slice::<Value>(&body).unwrap_or_default();
    if let Some(obj) = raw.as_object_mut() {
        obj.entry("name")
            .or_insert_with(|| Value::String(name.clone()));
    }
    let etag = etag_of(&raw);
    let entry = raw.to_string();
    let change = RegistryChange::Replace {
        name: &name,
        entry: &entry,
        etag: &etag,
        expect: &expect,
    };
    let answer = match commit(&admin, &mut registered, built, change, &who, &etag).await {
        Ok(answer) => answer,
        Err(refused) => return refused,
    };
    audit(&who, "replace", &name, Some(&etag));
    with_etag(axum::Json(answer).into_response(), &etag)
}

pub(super) async fn remove(
    State(admin): State<Arc<Admin>>,
    Path(name): Path<String>,
    headers: HeaderMap,
) -> Response {
    let (who, mut registered, expect) = match admin.begin_change(&name, &headers).await {
        Ok(begun) => begun,
        Err(r) => return r,
    };
    if admin.registry().default_name() == name {
        return error(
            StatusCode::CONFLICT,
            format!("agent {name:?} is the default agent (default_agent)"),
        );
    }
    let change = RegistryChange::Delete {
        name: &name,
        expect: &expect,
    };
    if let Some(refused) = persist(&admin.state, change, &who).await {
        return refused;
    }
    admin.registry().remove(&name);
    if let Some(old) = registered.remove(&name) {
        old.stop.cancel();
    }
    admin.state.count(&registered);
    audit(&who, "delete", &name, None);
    StatusCode::NO_CONTENT.into_response()
}

/// Records `change` in the registry, then routes to the agent `built` and keeps it as
/// registered under `etag`: the entry as shown, or the refusal (the agent stopped, nothing
/// changed).
async fn commit(
    admin: &Admin,
    registered: &mut BTreeMap<String, Registered>,
    built: Built,
    change: RegistryChange<'_>,
    who: &str,
    etag: &str,
) -> Result<Value, Response> {
    if let Some(refused) = persist(&admin.state, change, who).await {
        built.stop.cancel();
        return Err(refused);
    }
    Ok(built.register(admin.registry(), registered, etag.to_owned()))
}

fn read_only(name: &str, source: &str) -> Response {
    error(
        StatusCode::CONFLICT,
        format!(
            "agent {name:?} comes from the {} and is read-only here",
            if source == "file" {
                "configuration file ([[agents]])"
            } else {
                "built-in agents"
            }
        ),
    )
}

fn precondition_failed(name: &str, etag: &str) -> Response {
    with_etag(
        error(
            StatusCode::PRECONDITION_FAILED,
            format!("agent {name:?} changed since that ETag (now {etag}): read it again"),
        ),
        etag,
    )
}
