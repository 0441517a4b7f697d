//! gRPC: `lf.a2a.v1.A2AService` (all 11 RPCs), the 0.3 `a2a.v1.A2AService` beside it
//! ([`super::grpc_v03`]), the standard health service and server reflection, on the same
//! listener as HTTP (h2c with prior knowledge; `axum::serve` speaks HTTP/1.1 and HTTP/2 on one
//! port; tonic routes by service name, so both A2A services share it). Each RPC is a thin adapter: service parameters from the
//! metadata, one call on [`A2aService`], the result or a rich [`tonic::Status`] back
//! (`A2aError::to_status`: code from the 1.0.1 table plus a `google.rpc.ErrorInfo`).

use a2a_types::state::{event_state, is_settled};
use a2a_types::v1::a2a_service_server::{
    A2aService as A2aServiceTrait, A2aServiceServer, SERVICE_NAME,
};
use a2a_types::v1::{
    AgentCard, CancelTaskRequest, DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest, GetTaskPushNotificationConfigRequest, GetTaskRequest,
    ListTaskPushNotificationConfigsRequest, ListTaskPushNotificationConfigsResponse,
    ListTasksRequest, ListTasksResponse, SendMessageRequest, SendMessageResponse, StreamResponse,
    SubscribeToTaskRequest, Task, TaskPushNotificationConfig, stream_response::Payload,
};
use a2a_types::{A2aError, Method};
use axum::Router;
use axum::extract::ConnectInfo;
use axum::http::HeaderValue;
use futures::StreamExt;
use futures::stream::BoxStream;
use tonic::metadata::MetadataValue;
use tonic::server::NamedService;
use tonic::{Request, Response, Status};
use tonic_health::ServingStatus;

use super::EXTENSIONS_HEADER;
use super::pipeline::{Admitted, Binding, Call};
use super::rate_headers::RateLimitHeaders;
use crate::gateway::Gateway;
use crate::service::{A2aService, Dialects, EventStream, RequestContext};
use crate::tls::PeerCert;

/// The server-streaming RPCs' response stream: the service's events, and an `Err` as the RPC's
/// final status (tonic ends the stream on the first `Err`).
pub type ResponseStream = BoxStream<'static, Result<StreamResponse, Status>>;

/// The gRPC routes, to be merged into the HTTP router. Built with `route_service` per service
/// rather than `tonic::service::Routes`, whose catch-all fallback would answer every unknown
/// HTTP path with a gRPC UNIMPLEMENTED instead of a 404. Must be called inside a tokio runtime.
pub fn router(gw: Gateway) -> Router {
    // One size limit for every binding: tonic refuses a larger message (OUT_OF_RANGE) before
    // decoding it.
    let limit = gw.max_body_bytes();
    let shutdown = gw.service().shutdown_token().clone();
    let binding = GrpcBinding {
        gw,
        dialects: Dialects::V1_ONLY,
    };
    let a2a_v03 = super::grpc_v03::server(binding.clone()).max_decoding_message_size(limit);
    let a2a = A2aServiceServer::new(binding).max_decoding_message_size(limit);

    let (health_reporter, health) = tonic_health::server::health_reporter();
    // A fresh reporter's lock is uncontended, so this completes on the first poll.
    for service in A2A_SERVICES {
        futures::FutureExt::now_or_never(
            health_reporter.set_service_status(service, ServingStatus::Serving),
        )
        .expect("a fresh health reporter is not locked");
    }
    tokio::spawn(not_serving_at_shutdown(health_reporter, shutdown));

    // Both reflection versions: current tools (grpcurl, grpcui) speak v1, older ones v1alpha.
    let valid = "the embedded descriptor sets are valid";
    let reflection_v1 = reflection().build_v1().expect(valid);
    let reflection_v1alpha = reflection().build_v1alpha().expect(valid);

    Router::new()
        .route_service(&path_of(&a2a), a2a)
        .route_service(&path_of(&a2a_v03), a2a_v03)
        .route_service(&path_of(&health), health)
        .route_service(&path_of(&reflection_v1), reflection_v1)
        .route_service(&path_of(&reflection_v1alpha), reflection_v1alpha)
}

/// The A2A services whose health is reported: 1.0 and 0.3.
const A2A_SERVICES: [&str; 2] = [SERVICE_NAME, super::grpc_v03::SERVICE_NAME];

/// Once shutdown begins the server and the A2A service report NOT_SERVING, so that probes and
/// health watchers stop sending work here. Then their statuses are removed: that ends every
/// open Watch stream right after the NOT_SERVING it delivers, where it would otherwise hold the
/// graceful shutdown until the drain bound. (The process takes no new call by then, so a Check
/// can hardly see the removal; it would answer NOT_FOUND.)
async fn not_serving_at_shutdown(
    mut reporter: tonic_health::server::HealthReporter,
    shutdown: tokio_util::sync::CancellationToken,
) {
    shutdown.cancelled().await;
    // "" is the whole server.
    let all = || std::iter::once("").chain(A2A_SERVICES);
    for service in all() {
        reporter
            .set_service_status(service, ServingStatus::NotServing)
            .await;
    }
    for service in all() {
        reporter.clear_service_status(service).await;
    }
}

/// Reflection over the A2A protos, 1.0 and 0.3 (with their google/protobuf imports, so clients
/// can resolve every type) and the health proto.
fn reflection() -> tonic_reflection::server::Builder<'static> {
    tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(a2a_types::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(a2a_types::v03_grpc::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
}

/// `/<package.Service>/<Rpc>`: every RPC of one service.
fn path_of<S: NamedService>(_: &S) -> String {
    format!("/{}/{{*rpc}}", S::NAME)
}

/// The generated server trait over the one [`A2aService`].
#[derive(Clone)]
pub struct GrpcBinding {
    gw: Gateway,
    /// What its calls speak: 1.0 for `lf.a2a.v1`, 0.3 for the 0.3 service (which shares these
    /// methods), so that what the service records per dialect (a push config's payload shape)
    /// follows the service the client called.
    dialects: Dialects,
}

impl GrpcBinding {
    /// This binding, its calls speaking `dialects` (the 0.3 service's).
    pub(super) fn speaking(self, dialects: Dialects) -> Self {
        Self { dialects, ..self }
    }

    /// The pipeline over the metadata (gRPC metadata keys are lowercase HTTP/2 headers, so the
    /// HTTP rules apply unchanged: `a2a-version` negotiated exactly as for JSON-RPC,
    /// `a2a-extensions` comma-separated).
    async fn admit<T>(&self, call: &Call, req: Request<T>) -> Result<(Admitted, T), A2aError> {
        let (metadata, extensions, message) = req.into_parts();
        let headers = metadata.into_headers();
        // tonic keeps the HTTP request's extensions: the connection's certificate among them.
        let cert = PeerCert::from_extensions(&extensions);
        // Served through the axum router, which records the TCP peer of each connection.
        let peer = extensions
            .get::<ConnectInfo<std::net::SocketAddr>>()
            .map(|ConnectInfo(addr)| addr.ip());
        let admitted = call
            .admit(&self.gw, &headers, None, peer, cert.0.as_ref())
            .await
            .map_err(|r| r.into_error())?;
        Ok((admitted, message))
    }

    /// Admit, call, encode: the whole of every unary RPC (of both A2A services: the 0.3 one
    /// translates inside `op`).
    pub(super) async fn unary<T, R, F, Fut>(
        &self,
        method: Method,
        req: Request<T>,
        op: F,
    ) -> Result<Response<R>, Status>
    where
        F: FnOnce(A2aService, RequestContext, T) -> Fut,
        Fut: Future<Output = Result<R, A2aError>>,
    {
        let mut call = Call::start(Binding::Grpc);
        call.method(method);
        call.dialects(self.dialects);
        let result = match self.admit(&call, req).await {
            Ok((admitted, message)) => call
                .traced(op(self.gw.service().clone(), admitted.ctx, message))
                .await
                .map(|out| respond(out, admitted.extensions, admitted.rate_limit.as_ref())),
            Err(err) => Err(err),
        };
        call.finish(&result);
        result.map_err(|err| err.to_status())
    }

    pub(super) async fn streaming<T, F, Fut>(
        &self,
        method: Method,
        req: Request<T>,
        op: F,
    ) -> Result<Response<ResponseStream>, Status>
    where
        F: FnOnce(A2aService, RequestContext, T) -> Fut,
        Fut: Future<Output = Result<EventStream, A2aError>>,
    {
        let mut call = Call::start(Binding::Grpc);
        call.method(method);
        call.dialects(self.dialects);
        let opened = match self.admit(&call, req).await {
            Ok((admitted, message)) => call
                .traced(op(self.gw.service().clone(), admitted.ctx, message))
                .await
                .map(|events| (events, admitted.extensions, admitted.rate_limit)),
            Err(err) => Err(err),
        };
        let (events, extensions, rate_limit) = match opened {
            Ok(opened) => opened,
            Err(err) => {
                call.failed(&err);
                return Err(err.to_status());
            }
        };
        let mut events = call.stream(events);
        // gRPC messages carry no event id, so the response metadata names the first one's
        // (`a2a-first-event-id`) when the service already has it (a SubscribeToTask snapshot);
        // message k then has k more, which is what a client resumes from
        // (`a2a-last-event-id`). Never waits: an event still to come sends no header.
        let first = futures::FutureExt::now_or_never(events.next()).flatten();
        let first_seq = first
            .as_ref()
            .and_then(|r| r.as_ref().ok())
            .and_then(|e| e.seq);
        let events = futures::stream::iter(first).chain(events).boxed();
        let mut resp = respond(stream_of(events), extensions, rate_limit.as_ref());
        if let Some(seq) = first_seq {
            resp.metadata_mut()
                .insert(super::GRPC_FIRST_EVENT_ID, MetadataValue::from(seq));
        }
        Ok(resp)
    }
}

/// The service's events as StreamResponses. gRPC has no event ids, so the sequence numbers stay
/// behind. The service ends a stream after a terminal or interrupted state (or a direct
/// Message), which is the RPC's OK; it also ends one early when the process shuts down, and
/// that end becomes UNAVAILABLE, so a client resubscribes instead of taking the task as done.
fn stream_of(mut events: EventStream) -> ResponseStream {
    async_stream::stream! {
        let mut settled = false;
        while let Some(item) = events.next().await {
            match item {
                Ok(ev) => {
                    settled = matches!(ev.event.payload, Some(Payload::Message(_)))
                        || event_state(&ev.event).is_some_and(is_settled);
                    yield Ok(ev.event);
                }
                Err(err) => {
                    yield Err(err.to_status());
                    return;
                }
            }
        }
        if !settled {
            yield Err(A2aError::Unavailable(
                "the gateway is shutting down; resubscribe to the task".into(),
            )
            .to_status());
        }
    }
    .boxed()
}

/// The response, with the activated extensions echoed in `a2a-extensions` and the rate-limit
/// state in `ratelimit-policy` / `ratelimit` (as the HTTP bindings' headers).
fn respond<R>(
    message: R,
    extensions: Option<HeaderValue>,
    rate_limit: Option<&RateLimitHeaders>,
) -> Response<R> {
    let mut response = Response::new(message);
    let metadata = |v: &HeaderValue| {
        v.to_str()
            .ok()
            .and_then(|v| MetadataValue::try_from(v).ok())
    };
    if let Some(value) = extensions.as_ref().and_then(metadata) {
        response.metadata_mut().insert(EXTENSIONS_HEADER, value);
    }
    if let Some(rate) = rate_limit {
        for (name, value) in [
            ("ratelimit-policy", &rate.policy),
            ("ratelimit", &rate.limit),
        ] {
            if let Some(value) = metadata(value) {
                response.metadata_mut().insert(name, value);
            }
        }
    }
    response
}

#[tonic::async_trait]
impl A2aServiceTrait for GrpcBinding {
    async fn send_message(
        &self,
        req: Request<SendMessageRequest>,
    ) -> Result<Response<SendMessageResponse>, Status> {
        self.unary(Method::SendMessage, req, |svc, ctx, m| async move {
            svc.send_message(&ctx, m).await
        })
        .await
    }

    type SendStreamingMessageStream = ResponseStream;

    async fn send_streaming_message(
        &self,
        req: Request<SendMessageRequest>,
    ) -> Result<Response<ResponseStream>, Status> {
        self.streaming(
            Method::SendStreamingMessage,
            req,
            |svc, ctx, m| async move { svc.send_streaming_message(&ctx, m).await },
        )
        .await
    }

    async fn get_task(&self, req: Request<GetTaskRequest>) -> Result<Response<Task>, Status> {
        self.unary(Method::GetTask, req, |svc, ctx, m| async move {
            svc.get_task(&ctx, m).await
        })
        .await
    }

    async fn list_tasks(
        &self,
        req: Request<ListTasksRequest>,
    ) -> Result<Response<ListTasksResponse>, Status> {
        self.unary(Method::ListTasks, req, |svc, ctx, m| async move {
            svc.list_tasks(&ctx, m).await
        })
        .await
    }

    async fn cancel_task(&self, req: Request<CancelTaskRequest>) -> Result<Response<Task>, Status> {
        self.unary(Method::CancelTask, req, |svc, ctx, m| async move {
            svc.cancel_task(&ctx, m).await
        })
        .await
    }

    type SubscribeToTaskStream = ResponseStream;

    async fn subscribe_to_task(
        &self,
        req: Request<SubscribeToTaskRequest>,
    ) -> Result<Response<ResponseStream>, Status> {
        self.streaming(Method::SubscribeToTask, req, |svc, ctx, m| async move {
            svc.subscribe_to_task(&ctx, m).await
        })
        .await
    }

    async fn create_task_push_notification_config(
        &self,
        req: Request<TaskPushNotificationConfig>,
    ) -> Result<Response<TaskPushNotificationConfig>, Status> {
        self.unary(
            Method::CreateTaskPushNotificationConfig,
            req,
            |svc, ctx, m| async move { svc.create_push_config(&ctx, m).await },
        )
        .await
    }

    async fn get_task_push_notification_config(
        &self,
        req: Request<GetTaskPushNotificationConfigRequest>,
    ) -> Result<Response<TaskPushNotificationConfig>, Status> {
        self.unary(
            Method::GetTaskPushNotificationConfig,
            req,
            |svc, ctx, m| async move { svc.get_push_config(&ctx, m).await },
        )
        .await
    }

    async fn list_task_push_notification_configs(
        &self,
        req: Request<ListTaskPushNotificationConfigsRequest>,
    ) -> Result<Response<ListTaskPushNotificationConfigsResponse>, Status> {
        self.unary(
            Method::ListTaskPushNotificationConfigs,
            req,
            |svc, ctx, m| async move { svc.list_push_configs(&ctx, m).await },
        )
        .await
    }

    async fn get_extended_agent_card(
        &self,
        req: Request<GetExtendedAgentCardRequest>,
    ) -> Result<Response<AgentCard>, Status> {
        self.unary(
            Method::GetExtendedAgentCard,
            req,
            |svc, ctx, m| async move { svc.get_extended_agent_card(&ctx, m).await },
        )
        .await
    }

    async fn delete_task_push_notification_config(
        &self,
        req: Request<DeleteTaskPushNotificationConfigRequest>,
    ) -> Result<Response<pbjson_types::Empty>, Status> {
        self.unary(
            Method::DeleteTaskPushNotificationConfig,
            req,
            |svc, ctx, m| async move { svc.delete_push_config(&ctx, m).await },
        )
        .await
        .map(|r| r.map(|()| pbjson_types::Empty {}))
    }
}
