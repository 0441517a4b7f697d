//! The JSON-RPC 2.0 binding: `POST <url>` with `{"jsonrpc":"2.0","id","method","params"}`;
//! results are the ProtoJSON response, errors carry ErrorInfo in `error.data`; streaming methods
//! answer with SSE whose every `data:` is a JSON-RPC response holding one StreamResponse (or an
//! error that ends the stream), or with a plain JSON-RPC error before the stream starts.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use a2a_types::Method as A2aMethod;
use a2a_types::v1::{
    AgentCard, CancelTaskRequest, DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest, GetTaskPushNotificationConfigRequest, GetTaskRequest,
    ListTaskPushNotificationConfigsRequest, ListTaskPushNotificationConfigsResponse,
    ListTasksRequest, ListTasksResponse, SendMessageRequest, SendMessageResponse, StreamResponse,
    SubscribeToTaskRequest, Task, TaskPushNotificationConfig,
};
use serde::Deserialize;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use serde_json::value::RawValue;

use crate::error::{ClientError, from_jsonrpc_error};
use crate::http::{decode_json, is_event_stream, read_body, send, sse_stream, with_params};
use crate::{Common, EventStream};

#[derive(Clone)]
pub(crate) struct JsonRpcTransport {
    http: reqwest::Client,
    url: url::Url,
    next_id: Arc<AtomicU64>,
}

#[derive(Serialize)]
struct Request<'a, P: Serialize> {
    jsonrpc: &'static str,
    id: u64,
    method: &'a str,
    params: &'a P,
}

#[derive(Deserialize)]
struct Response {
    #[serde(default)]
    result: Option<Box<RawValue>>,
    #[serde(default)]
    error: Option<Value>,
}

/// A JSON-RPC response body: `Ok(result)` (possibly absent or null), or the decoded error.
fn parse_response(body: &[u8], context: &str) -> Result<Option<Box<RawValue>>, ClientError> {
    let resp: Response = serde_json::from_slice(body).map_err(|e| {
        ClientError::decode(
            context,
            format!(
                "not a JSON-RPC response ({e}): {}",
                crate::error::truncated_text(body)
            ),
        )
    })?;
    match resp.error {
        Some(err) if !err.is_null() => Err(from_jsonrpc_error(&err)),
        _ => Ok(resp.result),
    }
}

fn result<T: DeserializeOwned>(
    raw: Option<Box<RawValue>>,
    context: &str,
) -> Result<T, ClientError> {
    let raw = raw.ok_or_else(|| ClientError::decode(context, "the response has no result"))?;
    decode_json(raw.get().as_bytes(), context)
}

impl JsonRpcTransport {
    pub fn new(http: reqwest::Client, url: &str) -> Result<Self, ClientError> {
        Ok(Self {
            http,
            url: crate::http::parse_url(url)?,
            next_id: Arc::new(AtomicU64::new(1)),
        })
    }

    fn request<P: Serialize>(
        &self,
        common: &Common,
        method: &str,
        params: &P,
        accept: &'static str,
    ) -> Result<reqwest::RequestBuilder, ClientError> {
        let body = serde_json::to_vec(&Request {
            jsonrpc: "2.0",
            id: self.next_id.fetch_add(1, Ordering::Relaxed),
            method,
            params,
        })
        .map_err(|e| ClientError::decode(format!("encoding {method}"), e))?;
        let req = self
            .http
            .post(self.url.clone())
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header(reqwest::header::ACCEPT, accept)
            .body(body);
        Ok(with_params(req, common))
    }

    async fn call_raw<P: Serialize>(
        &self,
        common: &Common,
        method: &str,
        params: &P,
    ) -> Result<Option<Box<RawValue>>, ClientError> {
        let req = self.request(common, method, params, "application/json")?;
        let resp = send(req, method).await?;
        let status = resp.status();
        let body = read_body(resp, common.limits.max_body_bytes, method).await?;
        match parse_response(&body, method) {
            // A non-JSON-RPC answer (proxy error page, 404): report the HTTP status.
            Err(ClientError::Decode { .. }) if !status.is_success() => {
                Err(crate::error::from_rest_error(status.as_u16(), &body))
            }
            other => other,
        }
    }

    async fn call<P: Serialize, T: DeserializeOwned>(
        &self,
        common: &Common,
        method: &str,
        params: &P,
    ) -> Result<T, ClientError> {
        result(self.call_raw(common, method, params).await?, method)
    }

    async fn stream<P: Serialize>(
        &self,
        common: &Common,
        method: &'static str,
        params: &P,
    ) -> Result<EventStream, ClientError> {
        let req = self.request(common, method, params, "text/event-stream")?;
        let resp = send(req, method).await?;
        if !is_event_stream(&resp) {
            // An error answered before the stream started.
            let status = resp.status();
            let body = read_body(resp, common.limits.max_body_bytes, method).await?;
            return match parse_response(&body, method) {
                Err(ClientError::Decode { .. }) if !status.is_success() => {
                    Err(crate::error::from_rest_error(status.as_u16(), &body))
                }
                Err(e) => Err(e),
                Ok(_) => Err(ClientError::decode(
                    method,
                    "expected an event stream, got a JSON-RPC result",
                )),
            };
        }
        Ok(sse_stream(resp, common, move |ev| {
            result::<StreamResponse>(parse_response(ev.data.as_bytes(), method)?, method)
        }))
    }

    pub async fn send_message(
        &self,
        common: &Common,
        req: SendMessageRequest,
    ) -> Result<SendMessageResponse, ClientError> {
        self.call(
            common,
            A2aMethod::SendMessage.as_str(),
            &common.apply_tenant(req),
        )
        .await
    }

    pub async fn send_streaming_message(
        &self,
        common: &Common,
        req: SendMessageRequest,
    ) -> Result<EventStream, ClientError> {
        self.stream(
            common,
            A2aMethod::SendStreamingMessage.as_str(),
            &common.apply_tenant(req),
        )
        .await
    }

    pub async fn get_task(
        &self,
        common: &Common,
        req: GetTaskRequest,
    ) -> Result<Task, ClientError> {
        self.call(
            common,
            A2aMethod::GetTask.as_str(),
            &common.apply_tenant(req),
        )
        .await
    }

    pub async fn list_tasks(
        &self,
        common: &Common,
        req: ListTasksRequest,
    ) -> Result<ListTasksResponse, ClientError> {
        self.call(
            common,
            A2aMethod::ListTasks.as_str(),
            &common.apply_tenant(req),
        )
        .await
    }

    pub async fn cancel_task(
        &self,
        common: &Common,
        req: CancelTaskRequest,
    ) -> Result<Task, ClientError> {
        self.call(
            common,
            A2aMethod::CancelTask.as_str(),
            &common.apply_tenant(req),
        )
        .await
    }

    pub async fn subscribe_to_task(
        &self,
        common: &Common,
        req: SubscribeToTaskRequest,
    ) -> Result<EventStream, ClientError> {
        self.stream(
            common,
            A2aMethod::SubscribeToTask.as_str(),
            &common.apply_tenant(req),
        )
        .await
    }

    pub async fn create_push_config(
        &self,
        common: &Common,
        req: TaskPushNotificationConfig,
    ) -> Result<TaskPushNotificationConfig, ClientError> {
        self.call(
            common,
            A2aMethod::CreateTaskPushNotificationConfig.as_str(),
            &common.apply_tenant(req),
        )
        .await
    }

    pub async fn get_push_config(
        &self,
        common: &Common,
        req: GetTaskPushNotificationConfigRequest,
    ) -> Result<TaskPushNotificationConfig, ClientError> {
        self.call(
            common,
            A2aMethod::GetTaskPushNotificationConfig.as_str(),
            &common.apply_tenant(req),
        )
        .await
    }

    pub async fn list_push_configs(
        &self,
        common: &Common,
        req: ListTaskPushNotificationConfigsRequest,
    ) -> Result<ListTaskPushNotificationConfigsResponse, ClientError> {
        self.call(
            common,
            A2aMethod::ListTaskPushNotificationConfigs.as_str(),
            &common.apply_tenant(req),
        )
        .await
    }

    pub async fn delete_push_config(
        &self,
        common: &Common,
        req: DeleteTaskPushNotificationConfigRequest,
    ) -> Result<(), ClientError> {
        // The result is `{}` (or `null` from some SDKs): nothing to read.
        self.call_raw(
            common,
            A2aMethod::DeleteTaskPushNotificationConfig.as_str(),
            &common.apply_tenant(req),
        )
        .await
        .map(drop)
    }

    pub async fn get_extended_agent_card(
        &self,
        common: &Common,
        req: GetExtendedAgentCardRequest,
    ) -> Result<AgentCard, ClientError> {
        self.call(
            common,
            A2aMethod::GetExtendedAgentCard.as_str(),
            &common.apply_tenant(req),
        )
        .await
    }
}
