//! gRPC for A2A 0.3 clients: `a2a.v1.A2AService` on the same listener as the 1.0 service. Each
//! RPC runs through the 1.0 binding's `unary`/`streaming` (the same pipeline: authentication,
//! owner, rate limits, quotas, idempotency, resume), translating the request to 1.0 before the
//! service call and the answer back to 0.3 after it (`a2a_types::v03_grpc`). Errors are the 1.0
//! binding's rich statuses: the same codes and ErrorInfo details.
//!
//! The service name decides the version: a call to this service is 0.3 whatever its
//! `a2a-version` metadata says, so that entry is dropped before the 1.0 negotiation sees it.
//! Metrics and traces name the 1.0 method each RPC runs (TaskSubscription is SubscribeToTask,
//! GetAgentCard is GetExtendedAgentCard).

use a2a_types::v03_grpc::proto::a2a_service_server::{A2aService as V03Trait, A2aServiceServer};
use a2a_types::v03_grpc::proto::{
    AgentCard, CancelTaskRequest, CreateTaskPushNotificationConfigRequest,
    DeleteTaskPushNotificationConfigRequest, GetAgentCardRequest,
    GetTaskPushNotificationConfigRequest, GetTaskRequest, ListTaskPushNotificationConfigRequest,
    ListTaskPushNotificationConfigResponse, SendMessageRequest, SendMessageResponse,
    StreamResponse, Task, TaskPushNotificationConfig, TaskSubscriptionRequest,
    stream_response::Payload,
};
use a2a_types::v03_grpc::{self as v03};
use futures::StreamExt;
use futures::stream::BoxStream;
use tonic::{Request, Response, Status};

use super::VERSION_HEADER;
use super::grpc::GrpcBinding;
use crate::service::Dialects;
use a2a_types::{Dialect, Method};

pub use a2a_types::v03_grpc::proto::a2a_service_server::SERVICE_NAME;

/// The 0.3 stream: the 1.0 binding's stream with each event translated.
pub type ResponseStream03 = BoxStream<'static, Result<StreamResponse, Status>>;

/// The tonic service for `a2a.v1.A2AService` over the 1.0 binding.
pub fn server(binding: GrpcBinding) -> A2aServiceServer<GrpcV03> {
    let binding = binding.speaking(Dialects::both(Dialect::V03));
    A2aServiceServer::new(GrpcV03 { binding })
}

#[derive(Clone)]
pub struct GrpcV03 {
    binding: GrpcBinding,
}

/// The request without its `a2a-version`: this service is 0.3 by its name.
fn v03_request<T>(mut req: Request<T>) -> Request<T> {
    req.metadata_mut().remove(VERSION_HEADER);
    req
}

/// The 1.0 binding's stream, each event translated, ending with the first `final` status
/// update as 0.3 streams do: a TaskSubscription to a task that becomes interrupted closes there
/// (the 1.0 one goes on with the next turn), and the 0.3 client subscribes again after its next
/// message. A send's stream ends there anyway.
fn v03_stream(
    resp: Result<Response<super::grpc::ResponseStream>, Status>,
) -> Result<Response<ResponseStream03>, Status> {
    resp.map(|r| r.map(until_final))
}

fn until_final(mut events: super::grpc::ResponseStream) -> ResponseStream03 {
    async_stream::stream! {
        while let Some(item) = events.next().await {
            let item = item.map(v03::stream_response);
            let last = matches!(
                &item,
                Ok(StreamResponse { payload: Some(Payload::StatusUpdate(s)) }) if s.r#final
            );
            yield item;
            if last {
                return;
            }
        }
    }
    .boxed()
}

#[tonic::async_trait]
impl V03Trait for GrpcV03 {
    async fn send_message(
        &self,
        req: Request<SendMessageRequest>,
    ) -> Result<Response<SendMessageResponse>, Status> {
        self.binding
            .unary(
                Method::SendMessage,
                v03_request(req),
                |svc, ctx, m| async move {
                    let sent = svc.send_message(&ctx, v03::send_request(m)).await?;
                    Ok(v03::send_response(sent))
                },
            )
            .await
    }

    type SendStreamingMessageStream = ResponseStream03;

    async fn send_streaming_message(
        &self,
        req: Request<SendMessageRequest>,
    ) -> Result<Response<ResponseStream03>, Status> {
        v03_stream(
            self.binding
                .streaming(
                    Method::SendStreamingMessage,
                    v03_request(req),
                    |svc, ctx, m| async move {
                        svc.send_streaming_message(&ctx, v03::send_request(m)).await
                    },
                )
                .await,
        )
    }

    async fn get_task(&self, req: Request<GetTaskRequest>) -> Result<Response<Task>, Status> {
        self.binding
            .unary(
                Method::GetTask,
                v03_request(req),
                |svc, ctx, m| async move {
                    let task = svc.get_task(&ctx, v03::get_task_request(m)?).await?;
                    Ok(v03::task(task))
                },
            )
            .await
    }

    async fn cancel_task(&self, req: Request<CancelTaskRequest>) -> Result<Response<Task>, Status> {
        self.binding
            .unary(
                Method::CancelTask,
                v03_request(req),
                |svc, ctx, m| async move {
                    let task = svc.cancel_task(&ctx, v03::cancel_task_request(m)?).await?;
                    Ok(v03::task(task))
                },
            )
            .await
    }

    type TaskSubscriptionStream = ResponseStream03;

    async fn task_subscription(
        &self,
        req: Request<TaskSubscriptionRequest>,
    ) -> Result<Response<ResponseStream03>, Status> {
        v03_stream(
            self.binding
                .streaming(
                    Method::SubscribeToTask,
                    v03_request(req),
                    |svc, ctx, m| async move {
                        svc.subscribe_to_task(&ctx, v03::subscribe_request(m)?)
                            .await
                    },
                )
                .await,
        )
    }

    async fn create_task_push_notification_config(
        &self,
        req: Request<CreateTaskPushNotificationConfigRequest>,
    ) -> Result<Response<TaskPushNotificationConfig>, Status> {
        self.binding
            .unary(
                Method::CreateTaskPushNotificationConfig,
                v03_request(req),
                |svc, ctx, m| async move {
                    let cfg = svc
                        .create_push_config(&ctx, v03::create_push_request(m)?)
                        .await?;
                    Ok(v03::push_config(cfg))
                },
            )
            .await
    }

    async fn get_task_push_notification_config(
        &self,
        req: Request<GetTaskPushNotificationConfigRequest>,
    ) -> Result<Response<TaskPushNotificationConfig>, Status> {
        self.binding
            .unary(
                Method::GetTaskPushNotificationConfig,
                v03_request(req),
                |svc, ctx, m| async move {
                    let cfg = svc.get_push_config(&ctx, v03::get_push_request(m)?).await?;
                    Ok(v03::push_config(cfg))
                },
            )
            .await
    }

    async fn list_task_push_notification_config(
        &self,
        req: Request<ListTaskPushNotificationConfigRequest>,
    ) -> Result<Response<ListTaskPushNotificationConfigResponse>, Status> {
        self.binding
            .unary(
                Method::ListTaskPushNotificationConfigs,
                v03_request(req),
                |svc, ctx, m| async move {
                    let page = svc
                        .list_push_configs(&ctx, v03::list_push_request(m)?)
                        .await?;
                    Ok(v03::list_push_response(page))
                },
            )
            .await
    }

    /// 0.3's one card RPC: the extended card when the agent has one and the caller may read it,
    /// else the public card (which 0.3 clients also fetch this way).
    async fn get_agent_card(
        &self,
        req: Request<GetAgentCardRequest>,
    ) -> Result<Response<AgentCard>, Status> {
        self.binding
            .unary(
                Method::GetExtendedAgentCard,
                v03_request(req),
                |svc, ctx, _| async move {
                    let card = match svc.extended_agent_card(&ctx, Default::default()).await {
                        Ok(extended) => extended.card.clone(),
                        // Not declared, not configured, or the caller is anonymous: each is a
                        // reason to show the public card, never an error for this RPC.
                        Err(_) => svc.public_card().card.clone(),
                    };
                    Ok(v03::card(card))
                },
            )
            .await
    }

    async fn delete_task_push_notification_config(
        &self,
        req: Request<DeleteTaskPushNotificationConfigRequest>,
    ) -> Result<Response<pbjson_types::Empty>, Status> {
        self.binding
            .unary(
                Method::DeleteTaskPushNotificationConfig,
                v03_request(req),
                |svc, ctx, m| async move {
                    svc.delete_push_config(&ctx, v03::delete_push_request(m)?)
                        .await
                },
            )
            .await
            .map(|r| r.map(|()| pbjson_types::Empty {}))
    }
}
