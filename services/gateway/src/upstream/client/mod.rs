//! The gateway as a client of one upstream agent: the binding chosen from its card, the
//! credentials its card asks for (API key, or an OAuth2 client-credentials token cached until
//! shortly before it expires), and the mapping of client failures to the errors clients see.
//!
//! Here: the client and its calls; `auth.rs` the credentials, resolved against the card.

use a2a_process::telemetry::{self, KeyValue, SpanKind, TraceSpan};
use std::time::Duration;

use a2a_client::{A2aClient, ClientError, ClientPrefs, EventStream};
use a2a_types::v1::{
    AgentCard, CancelTaskRequest, GetTaskRequest, SendMessageRequest, SendMessageResponse,
    SubscribeToTaskRequest, Task,
};
use a2a_types::{A2aError, Method};
use futures::StreamExt;

use super::config::AgentConfig;
use super::v03::V03Client;

mod auth;

use auth::{Auth, insecure_credentials, resolve_auth};

#[derive(Clone)]
enum Transport {
    V1(A2aClient),
    V03(V03Client),
}

/// A client bound to an upstream's interface, with its credentials. Cheap to clone.
#[derive(Clone)]
pub struct UpstreamClient {
    agent: String,
    transport: Transport,
    auth: Auth,
    http: reqwest::Client,
}

impl UpstreamClient {
    /// Binds to the first interface of `card` this gateway speaks (limited to the configured
    /// bindings), with the credentials the card's security schemes ask for.
    pub fn new(
        config: &AgentConfig,
        card: &AgentCard,
        http: reqwest::Client,
    ) -> Result<Self, String> {
        let name = &config.name;
        let timeout = Duration::from_secs(config.timeout_secs.max(1));
        let transport = if config.protocol == "0.3" {
            Transport::V03(V03Client::from_card(card, http.clone(), timeout)?)
        } else {
            let prefs = ClientPrefs {
                bindings: config
                    .bindings
                    .iter()
                    .filter_map(|b| a2a_client::BindingKind::from_card_name(b))
                    .collect(),
                tls: config.client_tls.clone(),
                ..ClientPrefs::default()
            };
            let mut client = A2aClient::from_card(card, &prefs, http.clone())
                .map_err(|e| format!("agents.{name}: {e}"))?
                .with_timeout(timeout);
            if let Some(tenant) = &config.tenant {
                client = client.with_tenant(tenant);
            }
            Transport::V1(client)
        };
        let auth = resolve_auth(name, card, config.credentials.as_ref())?;
        if !matches!(auth, Auth::None) && !config.allow_insecure_credentials {
            let interface = match &transport {
                Transport::V1(c) => match c.binding() {
                    a2a_client::Binding::JsonRpc { url } | a2a_client::Binding::Rest { url } => {
                        url.as_str()
                    }
                    a2a_client::Binding::Grpc { endpoint } => endpoint.as_str(),
                },
                Transport::V03(c) => c.url(),
            };
            let token_url = match &auth {
                Auth::OAuth2(t) => Some(t.token_url.as_str()),
                _ => None,
            };
            let card_url = config
                .card_url
                .as_deref()
                .filter(|_| !config.verify_signature);
            insecure_credentials(interface, token_url, card_url).map_err(|plain| {
                crate::metrics::upstream_card_rejected(name, "insecure_credentials");
                format!(
                    "agents.{name}: its credentials would go over plain http ({plain}); they \
                     are only sent over https: use https URLs (or verify_signature for a card \
                     fetched over http), or set allow_insecure_credentials = true for this agent"
                )
            })?;
        }
        Ok(Self {
            agent: name.clone(),
            transport,
            auth,
            http,
        })
    }

    /// The binding in use (`JSONRPC`, `HTTP+JSON`, `GRPC`, or `JSONRPC/0.3`).
    pub fn binding(&self) -> String {
        match &self.transport {
            Transport::V1(c) => c.binding().kind().card_name().to_owned(),
            Transport::V03(_) => "JSONRPC/0.3".to_owned(),
        }
    }

    /// The `binding` label of this client's calls.
    fn binding_label(&self) -> &'static str {
        match &self.transport {
            Transport::V1(c) => c.binding().kind().card_name(),
            Transport::V03(_) => "JSONRPC/0.3",
        }
    }

    /// Runs one upstream call and records it (`a2a_upstream_calls_total`,
    /// `a2a_upstream_call_duration_seconds`; for a stream, until it opened).
    async fn measured<T>(
        &self,
        method: Method,
        call: impl Future<Output = Result<T, A2aError>>,
    ) -> Result<T, A2aError> {
        let method = method.as_str();
        let started = std::time::Instant::now();
        let span = self.client_span(method);
        let result = span.in_span(call).await;
        if let Err(e) = &result {
            span.set("error.type", e.codes().reason);
        }
        span.end();
        crate::metrics::upstream_call(
            &self.agent,
            self.binding_label(),
            method,
            result.as_ref().err(),
            started.elapsed(),
        );
        result
    }

    /// The CLIENT span of one upstream call (disabled while traces are off, or when the turn
    /// is not sampled): child of the turn's span; `authorised` sends its `traceparent` upstream.
    fn client_span(&self, method: &'static str) -> TraceSpan {
        if !telemetry::enabled() {
            return TraceSpan::NONE;
        }
        TraceSpan::start_in_current(method, SpanKind::Client, || {
            let binding = self.binding_label();
            let mut attributes = Vec::with_capacity(4);
            match binding {
                "JSONRPC" | "JSONRPC/0.3" => {
                    attributes.push(KeyValue::new("rpc.system.name", "jsonrpc"));
                }
                "GRPC" => attributes.push(KeyValue::new("rpc.system.name", "grpc")),
                _ => {}
            }
            attributes.push(KeyValue::new("rpc.method", method));
            attributes.push(KeyValue::new("a2a.agent", self.agent.clone()));
            attributes.push(KeyValue::new("a2a.binding", binding));
            attributes
        })
    }

    /// The transport with this call's credentials, `extra` headers (gRPC metadata), and the
    /// W3C trace context of the current (CLIENT) span when traces are on.
    async fn authorised(&self, extra: &[(&str, &str)]) -> Result<Transport, A2aError> {
        let auth = match &self.auth {
            Auth::None => None,
            Auth::Header { name, value } => Some((name.clone(), value.clone())),
            Auth::OAuth2(source) => Some((
                "authorization".to_owned(),
                format!("Bearer {}", source.token(&self.http, &self.agent).await?),
            )),
        };
        let mut trace = axum::http::HeaderMap::new();
        telemetry::inject_current(&mut trace);
        let headers = auth
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .chain(extra.iter().copied())
            .chain(
                trace
                    .iter()
                    .filter_map(|(k, v)| Some((k.as_str(), v.to_str().ok()?))),
            );
        let mut transport = self.transport.clone();
        for (k, v) in headers {
            transport = match transport {
                Transport::V1(c) => Transport::V1(
                    c.with_header(k, v)
                        .map_err(|e| self.error(ClientError::Config(e.to_string())))?,
                ),
                Transport::V03(c) => Transport::V03(c.with_header(k.to_owned(), v.to_owned())),
            };
        }
        Ok(transport)
    }

    /// After the upstream refused the credentials, a cached token is dropped.
    fn on_error(&self, e: &ClientError) {
        if let (Auth::OAuth2(source), Some(A2aError::Unauthenticated(_))) = (&self.auth, e.as_a2a())
        {
            source.forget();
        }
    }

    /// SendMessage; with `idempotency_key`, under that `Idempotency-Key`; `hops` is the
    /// `A2A-Hop-Count` it carries (the turn's request's plus one).
    pub async fn send(
        &self,
        req: SendMessageRequest,
        idempotency_key: Option<&str>,
        hops: u32,
    ) -> Result<SendMessageResponse, A2aError> {
        self.measured(Method::SendMessage, async {
            let hops = hops.to_string();
            let result = match self
                .authorised(&send_headers(idempotency_key, &hops))
                .await?
            {
                Transport::V1(c) => c.send_message(req).await,
                Transport::V03(c) => c.send_message(req).await,
            };
            result.map_err(|e| self.error(e))
        })
        .await
    }

    /// SendStreamingMessage; with `idempotency_key`, under that `Idempotency-Key`; `hops` as
    /// for [`Self::send`].
    pub async fn stream(
        &self,
        req: SendMessageRequest,
        idempotency_key: Option<&str>,
        hops: u32,
    ) -> Result<EventStream, A2aError> {
        self.measured(Method::SendStreamingMessage, async {
            let hops = hops.to_string();
            let result = match self
                .authorised(&send_headers(idempotency_key, &hops))
                .await?
            {
                Transport::V1(c) => c.send_streaming_message(req).await,
                Transport::V03(c) => c.send_streaming_message(req).await,
            };
            result.map_err(|e| self.error(e))
        })
        .await
    }

    pub async fn get_task(&self, id: &str) -> Result<Task, A2aError> {
        self.measured(Method::GetTask, async {
            self.get_task_raw(id).await.map_err(|e| self.error(e))
        })
        .await
    }

    async fn get_task_raw(&self, id: &str) -> Result<Task, ClientError> {
        let req = GetTaskRequest {
            id: id.to_owned(),
            history_length: Some(0),
            ..Default::default()
        };
        match self.authorised(&[]).await.map_err(ClientError::A2a)? {
            Transport::V1(c) => c.get_task(req).await,
            Transport::V03(c) => c.get_task(req).await,
        }
    }

    pub async fn cancel(&self, id: &str) -> Result<Task, A2aError> {
        let req = CancelTaskRequest {
            id: id.to_owned(),
            ..Default::default()
        };
        self.measured(Method::CancelTask, async {
            let result = match self.authorised(&[]).await? {
                Transport::V1(c) => c.cancel_task(req).await,
                Transport::V03(c) => c.cancel_task(req).await,
            };
            result.map_err(|e| self.error(e))
        })
        .await
    }

    pub async fn subscribe(&self, id: &str) -> Result<EventStream, A2aError> {
        let req = SubscribeToTaskRequest {
            id: id.to_owned(),
            ..Default::default()
        };
        self.measured(Method::SubscribeToTask, async {
            let result = match self.authorised(&[]).await? {
                Transport::V1(c) => c.subscribe_to_task(req).await,
                Transport::V03(c) => c.subscribe_to_task(req).await,
            };
            result.map_err(|e| self.error(e))
        })
        .await
    }

    /// A heartbeat: a GetTask for an id no agent has. An A2A answer (TaskNotFound) proves the
    /// agent serves its binding; no answer, a malformed one or a server error does not.
    pub async fn probe(&self) -> Result<(), String> {
        match self.get_task_raw("a2a-gateway-health-probe").await {
            Ok(_) => Ok(()),
            Err(ClientError::A2a(A2aError::Unavailable(m))) => Err(m),
            Err(ClientError::A2a(_)) => Ok(()),
            Err(e) => Err(e.to_string()),
        }
    }

    /// Maps a client failure to what the caller is told: no answer is `Unavailable`, a malformed
    /// answer `InvalidAgentResponse`; the upstream's own A2A errors pass through, except those
    /// that would leak its ids or are about the gateway's credentials.
    pub fn error(&self, e: ClientError) -> A2aError {
        self.on_error(&e);
        upstream_error(&self.agent, e)
    }

    /// Wraps a stream so its failures are mapped like a call's.
    pub fn map_stream(
        &self,
        stream: EventStream,
    ) -> futures::stream::BoxStream<'static, Result<a2a_types::v1::StreamResponse, A2aError>> {
        let agent = self.agent.clone();
        stream
            .map(move |item| {
                item.map(|e| e.response)
                    .map_err(|e| upstream_error(&agent, e))
            })
            .boxed()
    }
}

/// The header that carries an idempotency key (lower case: gRPC metadata keys must be).
/// The headers of a send: its `Idempotency-Key`, if any, and its `A2A-Hop-Count`.
fn send_headers<'a>(key: Option<&'a str>, hops: &'a str) -> Vec<(&'static str, &'a str)> {
    key.map(|k| ("idempotency-key", k))
        .into_iter()
        .chain([(crate::service::HOP_COUNT_HEADER, hops)])
        .collect()
}

pub fn upstream_error(agent: &str, e: ClientError) -> A2aError {
    match e {
        ClientError::Transport { context, source } => {
            tracing::warn!(agent, context = %context, error = %source, "upstream unreachable");
            A2aError::Unavailable(format!(
                "upstream agent {agent} is unavailable ({context}); retry later"
            ))
        }
        ClientError::Decode { context, message } => {
            tracing::warn!(agent, context = %context, error = %message, "malformed upstream answer");
            A2aError::InvalidAgentResponse(format!(
                "upstream agent {agent} sent a malformed answer ({context}: {message})"
            ))
        }
        ClientError::Unclassified { status, message } => {
            tracing::warn!(agent, status = %status, error = %message, "unclassified upstream error");
            let unavailable = status.starts_with("HTTP 5")
                || status.contains("UNAVAILABLE")
                || status.contains("DEADLINE");
            if unavailable {
                A2aError::Unavailable(format!(
                    "upstream agent {agent} is unavailable ({status}); retry later"
                ))
            } else {
                A2aError::InvalidAgentResponse(format!(
                    "upstream agent {agent} answered with an unexpected error ({status})"
                ))
            }
        }
        ClientError::Config(m) => {
            tracing::error!(agent, error = %m, "upstream client configuration");
            A2aError::Internal(format!("upstream agent {agent} cannot be reached: {m}"))
        }
        ClientError::A2a(e) => match e {
            A2aError::TaskNotFound { .. } => A2aError::InvalidAgentResponse(format!(
                "upstream agent {agent} no longer knows this task"
            )),
            A2aError::TaskNotCancelable { state, .. } => A2aError::UnsupportedOperation(format!(
                "upstream agent {agent} cannot cancel the task: it is {}",
                state.as_str_name()
            )),
            A2aError::Unauthenticated(_) | A2aError::PermissionDenied(_) => {
                tracing::error!(agent, "the upstream refused the gateway's credentials");
                A2aError::Unavailable(format!(
                    "upstream agent {agent} refused the gateway's credentials"
                ))
            }
            other => other,
        },
    }
}
