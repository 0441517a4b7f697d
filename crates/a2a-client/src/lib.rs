//! An A2A 1.0 client over the three standard bindings: JSON-RPC 2.0, HTTP+JSON (REST) and gRPC.
//!
//! Every operation takes and returns the canonical [`a2a_types::v1`] types, whatever the binding;
//! errors come back as [`ClientError::A2a`] with the typed [`A2aError`](a2a_types::A2aError)
//! decoded from the binding's own format (JSON-RPC `error.data`, REST `error.details`, gRPC
//! status details).
//!
//! ```no_run
//! # async fn demo() -> Result<(), a2a_client::ClientError> {
//! use a2a_client::{A2aClient, Binding, ClientPrefs};
//!
//! // From the agent card: the first interface (in the card's order) this client speaks.
//! let client = A2aClient::from_card_url("http://127.0.0.1:8080", &ClientPrefs::default()).await?;
//! // Or one binding directly.
//! let rest = A2aClient::new(Binding::Rest { url: "http://127.0.0.1:8080/a2a/rest".into() })?
//!     .with_tenant("scenario")
//!     .with_header("authorization", "Bearer token")?;
//! # let _ = (client, rest); Ok(()) }
//! ```
//!
//! Service parameters: `A2A-Version: 1.0` goes with every request (HTTP header or gRPC metadata),
//! `A2A-Extensions` when extensions are activated, plus any extra header or metadata entry.
//! Tenants: a request whose `tenant` field is empty gets the client's tenant (the card interface's,
//! or [`A2aClient::with_tenant`]); REST carries it as the `/{tenant}` path prefix, JSON-RPC and
//! gRPC in the request field.

mod card;
mod error;
mod grpc;
mod http;
mod jsonrpc;
mod rest;
pub mod sse;
mod tls;

use a2a_types::v1::{
    AgentCard, CancelTaskRequest, DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest, GetTaskPushNotificationConfigRequest, GetTaskRequest,
    ListTaskPushNotificationConfigsRequest, ListTaskPushNotificationConfigsResponse,
    ListTasksRequest, ListTasksResponse, SendMessageRequest, SendMessageResponse, StreamResponse,
    SubscribeToTaskRequest, Task, TaskPushNotificationConfig,
};
use futures::stream::BoxStream;

pub use card::{ClientPrefs, fetch_card, select_interface};
pub use error::ClientError;
pub use tls::ClientTls;

/// The stream of a streaming operation.
pub type EventStream = BoxStream<'static, Result<StreamEvent, ClientError>>;

/// One event of a stream: the StreamResponse and, over SSE, the event's `id:` (the gateway's
/// task-event sequence number; absent for a direct Message reply and always absent over gRPC).
#[derive(Debug, Clone, PartialEq)]
pub struct StreamEvent {
    pub response: StreamResponse,
    pub id: Option<String>,
}

/// The protocol bindings, by their card name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BindingKind {
    JsonRpc,
    HttpJson,
    Grpc,
}

impl BindingKind {
    pub const ALL: [BindingKind; 3] = [Self::JsonRpc, Self::HttpJson, Self::Grpc];

    /// The `AgentInterface.protocolBinding` value.
    pub fn card_name(self) -> &'static str {
        match self {
            Self::JsonRpc => "JSONRPC",
            Self::HttpJson => "HTTP+JSON",
            Self::Grpc => "GRPC",
        }
    }

    pub fn from_card_name(name: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|b| b.card_name().eq_ignore_ascii_case(name.trim()))
    }
}

impl std::fmt::Display for BindingKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.card_name())
    }
}

/// Where and how to reach an agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Binding {
    /// The JSON-RPC endpoint URL (`http://host:port/a2a/jsonrpc`).
    JsonRpc { url: String },
    /// The HTTP+JSON interface URL; operation paths are appended (`…/a2a/rest/tasks/{id}`).
    Rest { url: String },
    /// `host:port` or `http://host:port` (plaintext h2c; this build has no TLS for gRPC).
    Grpc { endpoint: String },
}

impl Binding {
    pub fn kind(&self) -> BindingKind {
        match self {
            Self::JsonRpc { .. } => BindingKind::JsonRpc,
            Self::Rest { .. } => BindingKind::HttpJson,
            Self::Grpc { .. } => BindingKind::Grpc,
        }
    }
}

/// Size limits on what the client reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest unary response body (and gRPC message).
    pub max_body_bytes: usize,
    /// Largest single SSE event.
    pub max_event_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_body_bytes: 16 * 1024 * 1024,
            max_event_bytes: 16 * 1024 * 1024,
        }
    }
}

/// What every request carries besides its body.
#[derive(Debug, Clone)]
pub(crate) struct Common {
    pub version: String,
    pub extensions: Vec<String>,
    /// Lower-case names, validated as HTTP header names and values (and ASCII for gRPC).
    pub headers: Vec<(String, String)>,
    pub tenant: String,
    pub limits: Limits,
    /// How long a call may take to get its answer (for streams: until the stream opens).
    pub timeout: Option<std::time::Duration>,
}

impl Common {
    /// Every service parameter as (lower-case name, value): `a2a-version`, `a2a-extensions`
    /// when extensions are activated, then the extra headers.
    pub fn service_params(&self) -> Vec<(&str, String)> {
        let mut out = vec![("a2a-version", self.version.clone())];
        if !self.extensions.is_empty() {
            out.push(("a2a-extensions", self.extensions.join(",")));
        }
        out.extend(self.headers.iter().map(|(k, v)| (k.as_str(), v.clone())));
        out
    }
}

/// The request types that carry a `tenant` field.
pub(crate) trait Tenanted {
    fn tenant_mut(&mut self) -> &mut String;
}

macro_rules! tenanted {
    ($($t:ty),*) => {$(
        impl Tenanted for $t {
            fn tenant_mut(&mut self) -> &mut String {
                &mut self.tenant
            }
        }
    )*};
}

tenanted!(
    SendMessageRequest,
    GetTaskRequest,
    ListTasksRequest,
    CancelTaskRequest,
    SubscribeToTaskRequest,
    TaskPushNotificationConfig,
    GetTaskPushNotificationConfigRequest,
    ListTaskPushNotificationConfigsRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest
);

impl Common {
    /// Fills an empty `tenant` with the client's tenant.
    pub fn apply_tenant<R: Tenanted>(&self, mut req: R) -> R {
        let t = req.tenant_mut();
        if t.is_empty() {
            t.clone_from(&self.tenant);
        }
        req
    }
}

#[derive(Clone)]
enum Transport {
    JsonRpc(jsonrpc::JsonRpcTransport),
    Rest(rest::RestTransport),
    Grpc(grpc::GrpcTransport),
}

/// An A2A 1.0 client bound to one interface. Cheap to clone (connections are shared).
#[derive(Clone)]
pub struct A2aClient {
    transport: Transport,
    common: Common,
    binding: Binding,
}

impl std::fmt::Debug for A2aClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("A2aClient")
            .field("binding", &self.binding)
            .field("tenant", &self.common.tenant)
            .finish_non_exhaustive()
    }
}

macro_rules! dispatch {
    ($self:ident, $method:ident ( $($arg:expr),* )) => {
        $self
            .deadline(stringify!($method), async {
                match &$self.transport {
                    Transport::JsonRpc(t) => t.$method(&$self.common, $($arg),*).await,
                    Transport::Rest(t) => t.$method(&$self.common, $($arg),*).await,
                    Transport::Grpc(t) => t.$method(&$self.common, $($arg),*).await,
                }
            })
            .await
    };
}

impl A2aClient {
    /// A client for one binding. gRPC connects lazily (on the first call).
    pub fn new(binding: Binding) -> Result<Self, ClientError> {
        Self::with_http_client(binding, http::default_client()?)
    }

    /// As [`A2aClient::new`], over TLS with extra CA certificates and/or a client certificate
    /// (`https://` URLs and gRPC endpoints; the system's roots are trusted too).
    pub fn with_tls(binding: Binding, tls: &ClientTls) -> Result<Self, ClientError> {
        Self::build(binding, tls.http_client()?, tls)
    }

    /// As [`A2aClient::new`], with a caller-configured reqwest client for the HTTP bindings.
    pub fn with_http_client(binding: Binding, http: reqwest::Client) -> Result<Self, ClientError> {
        Self::build(binding, http, &ClientTls::default())
    }

    /// Both: a caller-configured reqwest client for the HTTP bindings (give it the same TLS with
    /// [`ClientTls::configure`]) and `tls` for a gRPC endpoint.
    pub fn with_http_client_and_tls(
        binding: Binding,
        http: reqwest::Client,
        tls: &ClientTls,
    ) -> Result<Self, ClientError> {
        Self::build(binding, http, tls)
    }

    fn build(
        binding: Binding,
        http: reqwest::Client,
        tls: &ClientTls,
    ) -> Result<Self, ClientError> {
        let limits = Limits::default();
        let transport = match &binding {
            Binding::JsonRpc { url } => {
                Transport::JsonRpc(jsonrpc::JsonRpcTransport::new(http, url)?)
            }
            Binding::Rest { url } => Transport::Rest(rest::RestTransport::new(http, url)?),
            Binding::Grpc { endpoint } => Transport::Grpc(grpc::GrpcTransport::new(endpoint, tls)?),
        };
        Ok(Self {
            transport,
            binding,
            common: Common {
                version: a2a_types::PROTOCOL_VERSION.to_owned(),
                extensions: Vec::new(),
                headers: Vec::new(),
                tenant: String::new(),
                limits,
                timeout: None,
            },
        })
    }

    /// Fetches the agent card at `url` (an agent's base URL is completed with
    /// `/.well-known/agent-card.json`) and binds to the first interface, in the card's order,
    /// that speaks A2A 1.x over a binding `prefs` allows. The interface's tenant becomes the
    /// client's tenant.
    pub async fn from_card_url(url: &str, prefs: &ClientPrefs) -> Result<Self, ClientError> {
        let http = prefs.tls.http_client()?;
        let card = card::fetch_card(&http, url, prefs.limits.max_body_bytes).await?;
        Self::from_card(&card, prefs, http)
    }

    /// Binds to an interface of an already fetched card (see [`A2aClient::from_card_url`]).
    pub fn from_card(
        card: &AgentCard,
        prefs: &ClientPrefs,
        http: reqwest::Client,
    ) -> Result<Self, ClientError> {
        let (binding, tenant) = card::select_interface(card, prefs)?;
        // `http` serves the HTTP bindings as the caller built it; gRPC gets `prefs.tls`.
        let mut client = Self::build(binding, http, &prefs.tls)?;
        client.common.tenant = tenant;
        client.common.limits = prefs.limits;
        Ok(client)
    }

    pub fn binding(&self) -> &Binding {
        &self.binding
    }

    /// The tenant put into requests that do not name one.
    pub fn with_tenant(mut self, tenant: impl Into<String>) -> Self {
        self.common.tenant = tenant.into();
        self
    }

    /// Extensions to activate on every request (`A2A-Extensions`).
    pub fn with_extensions<I, S>(mut self, uris: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.common.extensions = uris.into_iter().map(Into::into).collect();
        self
    }

    /// An extra header (HTTP) or metadata entry (gRPC) on every request, e.g. `authorization`.
    /// For one request only (e.g. an `idempotency-key`), add it to a clone: cloning shares the
    /// connections and copies only these settings.
    pub fn with_header(mut self, name: &str, value: &str) -> Result<Self, ClientError> {
        let name = name.to_ascii_lowercase();
        ::http::HeaderName::from_bytes(name.as_bytes())
            .map_err(|e| ClientError::Config(format!("header name {name:?}: {e}")))?;
        if !value
            .bytes()
            .all(|b| b == b'\t' || (0x20..0x7f).contains(&b))
        {
            return Err(ClientError::Config(format!(
                "header {name}: the value must be visible ASCII"
            )));
        }
        self.common.headers.push((name, value.to_owned()));
        Ok(self)
    }

    /// Overrides the `A2A-Version` sent (default `1.0`); for negotiation tests.
    pub fn with_protocol_version(mut self, version: impl Into<String>) -> Self {
        self.common.version = version.into();
        self
    }

    pub fn with_limits(mut self, limits: Limits) -> Self {
        self.common.limits = limits;
        self
    }

    /// Bounds how long a call waits for its answer (a streaming call: until the stream opens;
    /// the events themselves may take as long as the task does). Default: no bound.
    pub fn with_timeout(mut self, timeout: std::time::Duration) -> Self {
        self.common.timeout = Some(timeout);
        self
    }

    async fn deadline<T>(
        &self,
        operation: &str,
        call: impl std::future::Future<Output = Result<T, ClientError>>,
    ) -> Result<T, ClientError> {
        let Some(limit) = self.common.timeout else {
            return call.await;
        };
        tokio::time::timeout(limit, call).await.unwrap_or_else(|_| {
            Err(ClientError::transport(
                operation,
                format!("no answer within {limit:?}"),
            ))
        })
    }

    pub async fn send_message(
        &self,
        req: SendMessageRequest,
    ) -> Result<SendMessageResponse, ClientError> {
        dispatch!(self, send_message(req))
    }

    pub async fn send_streaming_message(
        &self,
        req: SendMessageRequest,
    ) -> Result<EventStream, ClientError> {
        dispatch!(self, send_streaming_message(req))
    }

    pub async fn get_task(&self, req: GetTaskRequest) -> Result<Task, ClientError> {
        dispatch!(self, get_task(req))
    }

    pub async fn list_tasks(
        &self,
        req: ListTasksRequest,
    ) -> Result<ListTasksResponse, ClientError> {
        dispatch!(self, list_tasks(req))
    }

    pub async fn cancel_task(&self, req: CancelTaskRequest) -> Result<Task, ClientError> {
        dispatch!(self, cancel_task(req))
    }

    pub async fn subscribe_to_task(
        &self,
        req: SubscribeToTaskRequest,
    ) -> Result<EventStream, ClientError> {
        dispatch!(self, subscribe_to_task(req))
    }

    pub async fn create_push_config(
        &self,
        req: TaskPushNotificationConfig,
    ) -> Result<TaskPushNotificationConfig, ClientError> {
        dispatch!(self, create_push_config(req))
    }

    pub async fn get_push_config(
        &self,
        req: GetTaskPushNotificationConfigRequest,
    ) -> Result<TaskPushNotificationConfig, ClientError> {
        dispatch!(self, get_push_config(req))
    }

    pub async fn list_push_configs(
        &self,
        req: ListTaskPushNotificationConfigsRequest,
    ) -> Result<ListTaskPushNotificationConfigsResponse, ClientError> {
        dispatch!(self, list_push_configs(req))
    }

    pub async fn delete_push_config(
        &self,
        req: DeleteTaskPushNotificationConfigRequest,
    ) -> Result<(), ClientError> {
        dispatch!(self, delete_push_config(req))
    }

    pub async fn get_extended_agent_card(
        &self,
        req: GetExtendedAgentCardRequest,
    ) -> Result<AgentCard, ClientError> {
        dispatch!(self, get_extended_agent_card(req))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_are_validated() {
        let c = A2aClient::new(Binding::JsonRpc {
            url: "http://127.0.0.1:1/a2a/jsonrpc".into(),
        })
        .unwrap();
        assert!(c.clone().with_header("Authorization", "Bearer x").is_ok());
        assert!(c.clone().with_header("bad name", "x").is_err());
        assert!(c.with_header("x-a", "line\nbreak").is_err());
        assert!(matches!(
            A2aClient::new(Binding::Rest {
                url: "not a url".into()
            }),
            Err(ClientError::Config(_))
        ));
    }

    #[test]
    fn service_params() {
        let mut common = A2aClient::new(Binding::Grpc {
            endpoint: "127.0.0.1:1".into(),
        })
        .unwrap()
        .with_extensions(["urn:a", "urn:b"])
        .with_header("authorization", "Bearer t")
        .unwrap()
        .common;
        assert_eq!(
            common.service_params(),
            [
                ("a2a-version", "1.0".to_owned()),
                ("a2a-extensions", "urn:a,urn:b".to_owned()),
                ("authorization", "Bearer t".to_owned()),
            ]
        );
        common.tenant = "t1".into();
        let req = common.apply_tenant(GetTaskRequest::default());
        assert_eq!(req.tenant, "t1");
        let req = common.apply_tenant(GetTaskRequest {
            tenant: "mine".into(),
            ..Default::default()
        });
        assert_eq!(req.tenant, "mine", "a request's own tenant wins");
    }

    #[test]
    fn a_header_added_to_a_clone_stays_on_the_clone() {
        let base = A2aClient::new(Binding::JsonRpc {
            url: "http://127.0.0.1:1/a2a/jsonrpc".into(),
        })
        .unwrap();
        let one = base.clone().with_header("idempotency-key", "k1").unwrap();
        assert!(
            one.common
                .service_params()
                .contains(&("idempotency-key", "k1".to_owned()))
        );
        assert_eq!(base.common.service_params().len(), 1, "only a2a-version");
    }

    #[tokio::test]
    async fn a_silent_server_times_out() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let hold = tokio::spawn(async move {
            let (_socket, _) = listener.accept().await.unwrap();
            tokio::time::sleep(std::time::Duration::from_secs(30)).await;
        });
        let c = A2aClient::new(Binding::JsonRpc {
            url: format!("http://{addr}/a2a/jsonrpc"),
        })
        .unwrap()
        .with_timeout(std::time::Duration::from_millis(100));
        let err = c.get_task(GetTaskRequest::default()).await.unwrap_err();
        assert!(matches!(err, ClientError::Transport { .. }), "{err:?}");
        hold.abort();
    }
}
