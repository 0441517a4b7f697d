//! The gRPC binding: `lf.a2a.v1.A2AService` over plaintext HTTP/2 (h2c), service parameters as
//! lower-case metadata, errors as rich status (`grpc-status-details-bin` with ErrorInfo), and
//! server-streaming RPCs for the two streams (an error mid-stream is the final status).

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use a2a_types::Method as A2aMethod;
use a2a_types::v1::a2a_service_client::A2aServiceClient;
use a2a_types::v1::{
    AgentCard, CancelTaskRequest, DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest, GetTaskPushNotificationConfigRequest, GetTaskRequest,
    ListTaskPushNotificationConfigsRequest, ListTaskPushNotificationConfigsResponse,
    ListTasksRequest, ListTasksResponse, SendMessageRequest, SendMessageResponse,
    SubscribeToTaskRequest, Task, TaskPushNotificationConfig,
};
use futures::StreamExt;
use tonic::metadata::{MetadataKey, MetadataValue};
use tonic::transport::{Channel, Endpoint};

use crate::error::ClientError;
use crate::tls::ClientTls;
use crate::{Common, EventStream, StreamEvent};

#[derive(Clone)]
pub(crate) struct GrpcTransport {
    endpoint: Endpoint,
    /// Created on the first call, inside the caller's runtime (tonic spawns a worker task).
    channel: Arc<OnceLock<Channel>>,
}

/// A status the client produced itself (connection refused, reset, h2 error) carries its cause
/// as `source`; one the server sent does not, and is decoded by `A2aError::from_status`
/// (ErrorInfo first, then the code).
fn status_error(status: tonic::Status, context: &str) -> ClientError {
    if std::error::Error::source(&status).is_some() {
        ClientError::transport(context.to_owned(), status)
    } else {
        ClientError::A2a(a2a_types::A2aError::from_status(&status))
    }
}

impl GrpcTransport {
    /// `http://` (h2c, also when no scheme is given) or `https://` (TLS with `tls`).
    pub fn new(endpoint: &str, tls: &ClientTls) -> Result<Self, ClientError> {
        let uri = if endpoint.contains("://") {
            endpoint.to_owned()
        } else {
            format!("http://{endpoint}")
        };
        let secure = uri.starts_with("https://");
        if !secure && !uri.starts_with("http://") {
            return Err(ClientError::Config(format!(
                "gRPC endpoint {endpoint:?}: http:// (h2c) or https:// (TLS)"
            )));
        }
        let config = |e: tonic::transport::Error| {
            ClientError::Config(format!("gRPC endpoint {endpoint:?}: {e}"))
        };
        let mut built = Endpoint::from_shared(uri)
            .map_err(config)?
            .connect_timeout(Duration::from_secs(10))
            .tcp_nodelay(true);
        if secure {
            built = built.tls_config(tls.grpc()?).map_err(config)?;
        }
        let endpoint = built;
        Ok(Self {
            endpoint,
            channel: Arc::new(OnceLock::new()),
        })
    }

    fn client(&self, common: &Common) -> A2aServiceClient<Channel> {
        let channel = self
            .channel
            .get_or_init(|| self.endpoint.connect_lazy())
            .clone();
        A2aServiceClient::new(channel).max_decoding_message_size(common.limits.max_body_bytes)
    }

    fn request<T>(common: &Common, message: T) -> Result<tonic::Request<T>, ClientError> {
        let mut req = tonic::Request::new(message);
        for (name, value) in common.service_params() {
            let key = MetadataKey::from_bytes(name.as_bytes())
                .map_err(|e| ClientError::Config(format!("metadata key {name:?}: {e}")))?;
            let value = MetadataValue::try_from(value.as_str())
                .map_err(|e| ClientError::Config(format!("metadata {name}: {e}")))?;
            req.metadata_mut().append(key, value);
        }
        Ok(req)
    }

    fn events(
        result: Result<
            tonic::Response<tonic::codec::Streaming<a2a_types::v1::StreamResponse>>,
            tonic::Status,
        >,
        context: &'static str,
    ) -> Result<EventStream, ClientError> {
        let stream = result.map_err(|s| status_error(s, context))?.into_inner();
        let mut failed = false;
        Ok(stream
            .map(move |item| {
                item.map(|response| StreamEvent { response, id: None })
                    .map_err(|s| status_error(s, context))
            })
            .take_while(move |item| {
                let keep = !failed;
                failed |= item.is_err();
                futures::future::ready(keep)
            })
            .boxed())
    }

    pub async fn send_message(
        &self,
        common: &Common,
        req: SendMessageRequest,
    ) -> Result<SendMessageResponse, ClientError> {
        let req = Self::request(common, common.apply_tenant(req))?;
        self.client(common)
            .send_message(req)
            .await
            .map(tonic::Response::into_inner)
            .map_err(|s| status_error(s, A2aMethod::SendMessage.as_str()))
    }

    pub async fn send_streaming_message(
        &self,
        common: &Common,
        req: SendMessageRequest,
    ) -> Result<EventStream, ClientError> {
        let req = Self::request(common, common.apply_tenant(req))?;
        let result = self.client(common).send_streaming_message(req).await;
        Self::events(result, A2aMethod::SendStreamingMessage.as_str())
    }

    pub async fn get_task(
        &self,
        common: &Common,
        req: GetTaskRequest,
    ) -> Result<Task, ClientError> {
        let req = Self::request(common, common.apply_tenant(req))?;
        self.client(common)
            .get_task(req)
            .await
            .map(tonic::Response::into_inner)
            .map_err(|s| status_error(s, A2aMethod::GetTask.as_str()))
    }

    pub async fn list_tasks(
        &self,
        common: &Common,
        req: ListTasksRequest,
    ) -> Result<ListTasksResponse, ClientError> {
        let req = Self::request(common, common.apply_tenant(req))?;
        self.client(common)
            .list_tasks(req)
            .await
            .map(tonic::Response::into_inner)
            .map_err(|s| status_error(s, A2aMethod::ListTasks.as_str()))
    }

    pub async fn cancel_task(
        &self,
        common: &Common,
        req: CancelTaskRequest,
    ) -> Result<Task, ClientError> {
        let req = Self::request(common, common.apply_tenant(req))?;
        self.client(common)
            .cancel_task(req)
            .await
            .map(tonic::Response::into_inner)
            .map_err(|s| status_error(s, A2aMethod::CancelTask.as_str()))
    }

    pub async fn subscribe_to_task(
        &self,
        common: &Common,
        req: SubscribeToTaskRequest,
    ) -> Result<EventStream, ClientError> {
        let req = Self::request(common, common.apply_tenant(req))?;
        let result = self.client(common).subscribe_to_task(req).await;
        Self::events(result, A2aMethod::SubscribeToTask.as_str())
    }

    pub async fn create_push_config(
        &self,
        common: &Common,
        req: TaskPushNotificationConfig,
    ) -> Result<TaskPushNotificationConfig, ClientError> {
        let req = Self::request(common, common.apply_tenant(req))?;
        self.client(common)
            .create_task_push_notification_config(req)
            .await
            .map(tonic::Response::into_inner)
            .map_err(|s| status_error(s, A2aMethod::CreateTaskPushNotificationConfig.as_str()))
    }

    pub async fn get_push_config(
        &self,
        common: &Common,
        req: GetTaskPushNotificationConfigRequest,
    ) -> Result<TaskPushNotificationConfig, ClientError> {
        let req = Self::request(common, common.apply_tenant(req))?;
        self.client(common)
            .get_task_push_notification_config(req)
            .await
            .map(tonic::Response::into_inner)
            .map_err(|s| status_error(s, A2aMethod::GetTaskPushNotificationConfig.as_str()))
    }

    pub async fn list_push_configs(
        &self,
        common: &Common,
        req: ListTaskPushNotificationConfigsRequest,
    ) -> Result<ListTaskPushNotificationConfigsResponse, ClientError> {
        let req = Self::request(common, common.apply_tenant(req))?;
        self.client(common)
            .list_task_push_notification_configs(req)
            .await
            .map(tonic::Response::into_inner)
            .map_err(|s| status_error(s, A2aMethod::ListTaskPushNotificationConfigs.as_str()))
    }

    pub async fn delete_push_config(
        &self,
        common: &Common,
        req: DeleteTaskPushNotificationConfigRequest,
    ) -> Result<(), ClientError> {
        let req = Self::request(common, common.apply_tenant(req))?;
        self.client(common)
            .delete_task_push_notification_config(req)
            .await
            .map(drop)
            .map_err(|s| status_error(s, A2aMethod::DeleteTaskPushNotificationConfig.as_str()))
    }

    pub async fn get_extended_agent_card(
        &self,
        common: &Common,
        req: GetExtendedAgentCardRequest,
    ) -> Result<AgentCard, ClientError> {
        let req = Self::request(common, common.apply_tenant(req))?;
        self.client(common)
            .get_extended_agent_card(req)
            .await
            .map(tonic::Response::into_inner)
            .map_err(|s| status_error(s, A2aMethod::GetExtendedAgentCard.as_str()))
    }
}

#[cfg(test)]
mod tests {
    use a2a_types::A2aError;

    use super::*;

    #[test]
    fn server_statuses_are_a2a_errors_local_ones_transport_errors() {
        let err = A2aError::invalid_params("message.parts", "must contain at least one part");
        match status_error(err.to_status(), "t") {
            ClientError::A2a(back) => assert_eq!(back, err),
            other => panic!("{other:?}"),
        }
        let local = tonic::Status::from_error(Box::new(std::io::Error::other("refused")));
        assert!(matches!(
            status_error(local, "t"),
            ClientError::Transport { .. }
        ));
    }

    #[test]
    fn endpoints() {
        let tls = ClientTls::default();
        assert!(GrpcTransport::new("127.0.0.1:1", &tls).is_ok());
        assert!(GrpcTransport::new("http://127.0.0.1:1", &tls).is_ok());
        assert!(GrpcTransport::new("https://h:1", &tls).is_ok());
        assert!(matches!(
            GrpcTransport::new("ftp://h:1", &tls),
            Err(ClientError::Config(_))
        ));
    }
}
