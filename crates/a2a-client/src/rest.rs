//! The HTTP+JSON (REST) binding: one verb and path per operation under the interface URL (with a
//! leading `/{tenant}` segment when the request has a tenant), ProtoJSON bodies, query parameters
//! for reads, errors as `{"error":{"code","status","message","details":[ErrorInfo…]}}`, and SSE
//! of bare StreamResponses (an in-stream error is a `{"error":…}` event).

use a2a_types::Method as A2aMethod;
use a2a_types::v1::{
    AgentCard, CancelTaskRequest, DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest, GetTaskPushNotificationConfigRequest, GetTaskRequest,
    ListTaskPushNotificationConfigsRequest, ListTaskPushNotificationConfigsResponse,
    ListTasksRequest, ListTasksResponse, SendMessageRequest, SendMessageResponse, StreamResponse,
    SubscribeToTaskRequest, Task, TaskPushNotificationConfig, TaskState,
};
use reqwest::Method;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::error::{ClientError, from_rest_error};
use crate::http::{decode_json, is_event_stream, read_body, send, sse_stream, with_params};
use crate::{Common, EventStream, Tenanted};

#[derive(Clone)]
pub(crate) struct RestTransport {
    http: reqwest::Client,
    base: url::Url,
}

/// Takes the tenant out of a request (it travels in the path), after applying the default.
fn split_tenant<R: Tenanted>(common: &Common, req: R) -> (String, R) {
    let mut req = common.apply_tenant(req);
    let tenant = std::mem::take(req.tenant_mut());
    (tenant, req)
}

/// A path parameter: an empty one would address another resource (`/tasks/` is the list), so
/// the client refuses it with the InvalidParams the server sends for a missing REQUIRED id.
fn path_param<'a>(value: &'a str, field: &str) -> Result<&'a str, ClientError> {
    if value.is_empty() {
        Err(ClientError::A2a(a2a_types::A2aError::invalid_params(
            field,
            "is required",
        )))
    } else {
        Ok(value)
    }
}

enum Body {
    None,
    Json(Vec<u8>),
}

impl Body {
    fn json<T: Serialize>(value: &T, context: &str) -> Result<Self, ClientError> {
        serde_json::to_vec(value)
            .map(Self::Json)
            .map_err(|e| ClientError::decode(format!("encoding {context}"), e))
    }
}

impl RestTransport {
    pub fn new(http: reqwest::Client, url: &str) -> Result<Self, ClientError> {
        Ok(Self {
            http,
            base: crate::http::parse_url(url)?,
        })
    }

    /// `{base}[/{tenant}]/{segments…}`, each segment percent-encoded.
    fn url(&self, tenant: &str, segments: &[&str]) -> url::Url {
        let mut u = self.base.clone();
        {
            let mut path = u
                .path_segments_mut()
                .expect("checked in parse_url: the base URL has a path");
            path.pop_if_empty();
            if !tenant.is_empty() {
                path.push(tenant);
            }
            path.extend(segments);
        }
        u
    }

    fn request(
        &self,
        common: &Common,
        method: Method,
        url: url::Url,
        body: Body,
        accept: &'static str,
    ) -> reqwest::RequestBuilder {
        let mut req = self
            .http
            .request(method, url)
            .header(reqwest::header::ACCEPT, accept);
        if let Body::Json(bytes) = body {
            req = req
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body(bytes);
        }
        with_params(req, common)
    }

    /// A unary call: the 2xx body, or the decoded error.
    async fn call_bytes(
        &self,
        common: &Common,
        method: Method,
        url: url::Url,
        body: Body,
        context: &str,
    ) -> Result<Vec<u8>, ClientError> {
        let req = self.request(common, method, url, body, "application/json");
        let resp = send(req, context).await?;
        let status = resp.status();
        let bytes = read_body(resp, common.limits.max_body_bytes, context).await?;
        if status.is_success() {
            Ok(bytes)
        } else {
            Err(from_rest_error(status.as_u16(), &bytes))
        }
    }

    async fn call<T: DeserializeOwned>(
        &self,
        common: &Common,
        method: Method,
        url: url::Url,
        body: Body,
        context: &str,
    ) -> Result<T, ClientError> {
        let bytes = self.call_bytes(common, method, url, body, context).await?;
        decode_json(&bytes, context)
    }

    /// Opens an SSE stream; an error answered before streaming is a normal REST error.
    async fn stream(
        &self,
        common: &Common,
        method: Method,
        url: url::Url,
        body: Body,
        context: &'static str,
    ) -> Result<EventStream, ClientError> {
        let req = self.request(common, method, url, body, "text/event-stream");
        let resp = send(req, context).await?;
        let status = resp.status();
        if !status.is_success() || !is_event_stream(&resp) {
            let bytes = read_body(resp, common.limits.max_body_bytes, context).await?;
            return Err(if status.is_success() {
                ClientError::decode(context, "expected an event stream")
            } else {
                from_rest_error(status.as_u16(), &bytes)
            });
        }
        Ok(sse_stream(resp, common, move |ev| {
            decode_event(ev.data.as_bytes(), context)
        }))
    }

    pub async fn send_message(
        &self,
        common: &Common,
        req: SendMessageRequest,
    ) -> Result<SendMessageResponse, ClientError> {
        let (tenant, req) = split_tenant(common, req);
        let url = self.url(&tenant, &["message:send"]);
        let body = Body::json(&req, A2aMethod::SendMessage.as_str())?;
        self.call(
            common,
            Method::POST,
            url,
            body,
            A2aMethod::SendMessage.as_str(),
        )
        .await
    }

    pub async fn send_streaming_message(
        &self,
        common: &Common,
        req: SendMessageRequest,
    ) -> Result<EventStream, ClientError> {
        let (tenant, req) = split_tenant(common, req);
        let url = self.url(&tenant, &["message:stream"]);
        let body = Body::json(&req, A2aMethod::SendStreamingMessage.as_str())?;
        self.stream(
            common,
            Method::POST,
            url,
            body,
            A2aMethod::SendStreamingMessage.as_str(),
        )
        .await
    }

    pub async fn get_task(
        &self,
        common: &Common,
        req: GetTaskRequest,
    ) -> Result<Task, ClientError> {
        let (tenant, req) = split_tenant(common, req);
        let mut url = self.url(&tenant, &["tasks", path_param(&req.id, "id")?]);
        if let Some(n) = req.history_length {
            url.query_pairs_mut()
                .append_pair("historyLength", &n.to_string());
        }
        self.call(
            common,
            Method::GET,
            url,
            Body::None,
            A2aMethod::GetTask.as_str(),
        )
        .await
    }

    pub async fn list_tasks(
        &self,
        common: &Common,
        req: ListTasksRequest,
    ) -> Result<ListTasksResponse, ClientError> {
        let (tenant, req) = split_tenant(common, req);
        let mut url = self.url(&tenant, &["tasks"]);
        let mut q: Vec<(&str, String)> = Vec::new();
        if !req.context_id.is_empty() {
            q.push(("contextId", req.context_id.clone()));
        }
        if req.status != 0 {
            let name = TaskState::try_from(req.status)
                .map(|s| s.as_str_name().to_owned())
                .unwrap_or_else(|_| req.status.to_string());
            q.push(("status", name));
        }
        if let Some(n) = req.page_size {
            q.push(("pageSize", n.to_string()));
        }
        if !req.page_token.is_empty() {
            q.push(("pageToken", req.page_token.clone()));
        }
        if let Some(n) = req.history_length {
            q.push(("historyLength", n.to_string()));
        }
        if let Some(ts) = &req.status_timestamp_after {
            q.push(("statusTimestampAfter", ts.to_string()));
        }
        if let Some(b) = req.include_artifacts {
            q.push(("includeArtifacts", b.to_string()));
        }
        if !q.is_empty() {
            url.query_pairs_mut().extend_pairs(q);
        }
        self.call(
            common,
            Method::GET,
            url,
            Body::None,
            A2aMethod::ListTasks.as_str(),
        )
        .await
    }

    pub async fn cancel_task(
        &self,
        common: &Common,
        req: CancelTaskRequest,
    ) -> Result<Task, ClientError> {
        let (tenant, mut req) = split_tenant(common, req);
        let id = std::mem::take(&mut req.id);
        let url = self.url(
            &tenant,
            &["tasks", &format!("{}:cancel", path_param(&id, "id")?)],
        );
        let body = Body::json(&req, A2aMethod::CancelTask.as_str())?;
        self.call(
            common,
            Method::POST,
            url,
            body,
            A2aMethod::CancelTask.as_str(),
        )
        .await
    }

    /// `POST /tasks/{id}:subscribe` (the spec prose), falling back to `GET` (the proto
    /// annotation) when the server answers 405.
    pub async fn subscribe_to_task(
        &self,
        common: &Common,
        req: SubscribeToTaskRequest,
    ) -> Result<EventStream, ClientError> {
        let (tenant, req) = split_tenant(common, req);
        let url = self.url(
            &tenant,
            &[
                "tasks",
                &format!("{}:subscribe", path_param(&req.id, "id")?),
            ],
        );
        let context = A2aMethod::SubscribeToTask.as_str();
        match self
            .stream(common, Method::POST, url.clone(), Body::None, context)
            .await
        {
            Err(ClientError::Unclassified { status, .. }) if status == "HTTP 405" => {
                self.stream(common, Method::GET, url, Body::None, context)
                    .await
            }
            other => other,
        }
    }

    pub async fn create_push_config(
        &self,
        common: &Common,
        req: TaskPushNotificationConfig,
    ) -> Result<TaskPushNotificationConfig, ClientError> {
        let (tenant, req) = split_tenant(common, req);
        let url = self.url(
            &tenant,
            &[
                "tasks",
                path_param(&req.task_id, "taskId")?,
                "pushNotificationConfigs",
            ],
        );
        let body = Body::json(&req, A2aMethod::CreateTaskPushNotificationConfig.as_str())?;
        self.call(
            common,
            Method::POST,
            url,
            body,
            A2aMethod::CreateTaskPushNotificationConfig.as_str(),
        )
        .await
    }

    pub async fn get_push_config(
        &self,
        common: &Common,
        req: GetTaskPushNotificationConfigRequest,
    ) -> Result<TaskPushNotificationConfig, ClientError> {
        let (tenant, req) = split_tenant(common, req);
        let url = self.url(
            &tenant,
            &[
                "tasks",
                path_param(&req.task_id, "taskId")?,
                "pushNotificationConfigs",
                path_param(&req.id, "id")?,
            ],
        );
        self.call(
            common,
            Method::GET,
            url,
            Body::None,
            A2aMethod::GetTaskPushNotificationConfig.as_str(),
        )
        .await
    }

    pub async fn list_push_configs(
        &self,
        common: &Common,
        req: ListTaskPushNotificationConfigsRequest,
    ) -> Result<ListTaskPushNotificationConfigsResponse, ClientError> {
        let (tenant, req) = split_tenant(common, req);
        let mut url = self.url(
            &tenant,
            &[
                "tasks",
                path_param(&req.task_id, "taskId")?,
                "pushNotificationConfigs",
            ],
        );
        if req.page_size != 0 {
            url.query_pairs_mut()
                .append_pair("pageSize", &req.page_size.to_string());
        }
        if !req.page_token.is_empty() {
            url.query_pairs_mut()
                .append_pair("pageToken", &req.page_token);
        }
        self.call(
            common,
            Method::GET,
            url,
            Body::None,
            A2aMethod::ListTaskPushNotificationConfigs.as_str(),
        )
        .await
    }

    pub async fn delete_push_config(
        &self,
        common: &Common,
        req: DeleteTaskPushNotificationConfigRequest,
    ) -> Result<(), ClientError> {
        let (tenant, req) = split_tenant(common, req);
        let url = self.url(
            &tenant,
            &[
                "tasks",
                path_param(&req.task_id, "taskId")?,
                "pushNotificationConfigs",
                path_param(&req.id, "id")?,
            ],
        );
        self.call_bytes(
            common,
            Method::DELETE,
            url,
            Body::None,
            A2aMethod::DeleteTaskPushNotificationConfig.as_str(),
        )
        .await
        .map(drop)
    }

    pub async fn get_extended_agent_card(
        &self,
        common: &Common,
        req: GetExtendedAgentCardRequest,
    ) -> Result<AgentCard, ClientError> {
        let (tenant, _) = split_tenant(common, req);
        let url = self.url(&tenant, &["extendedAgentCard"]);
        self.call(
            common,
            Method::GET,
            url,
            Body::None,
            A2aMethod::GetExtendedAgentCard.as_str(),
        )
        .await
    }
}

/// One SSE `data:`: a bare StreamResponse, or a REST error body that ends the stream.
fn decode_event(data: &[u8], context: &str) -> Result<StreamResponse, ClientError> {
    #[derive(serde::Deserialize)]
    struct Probe {
        #[serde(default)]
        error: Option<Value>,
    }
    if let Ok(Probe { error: Some(err) }) = serde_json::from_slice::<Probe>(data) {
        let code = err
            .get("code")
            .and_then(Value::as_u64)
            .and_then(|c| u16::try_from(c).ok())
            .unwrap_or(500);
        return Err(from_rest_error(code, data));
    }
    decode_json(data, context)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_carry_the_tenant_and_encode_segments() {
        let t = RestTransport::new(reqwest::Client::new(), "http://h:1/a2a/rest/").unwrap();
        assert_eq!(
            t.url("", &["message:send"]).as_str(),
            "http://h:1/a2a/rest/message:send"
        );
        assert_eq!(
            t.url("scenario", &["tasks", "a/b?c:cancel"]).as_str(),
            "http://h:1/a2a/rest/scenario/tasks/a%2Fb%3Fc:cancel"
        );
        let t = RestTransport::new(reqwest::Client::new(), "http://h:1").unwrap();
        assert_eq!(t.url("", &["tasks"]).as_str(), "http://h:1/tasks");
    }

    #[test]
    fn in_stream_errors_are_decoded() {
        let body = br#"{"error":{"code":404,"status":"NOT_FOUND","message":"task x not found",
            "details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"TASK_NOT_FOUND",
            "domain":"a2a-protocol.org","metadata":{"taskId":"x"}}]}}"#;
        match decode_event(body, "t") {
            Err(ClientError::A2a(e)) => assert_eq!(e, a2a_types::A2aError::task_not_found("x")),
            other => panic!("{other:?}"),
        }
        let ok = decode_event(br#"{"statusUpdate":{"taskId":"t","contextId":"c"}}"#, "t").unwrap();
        assert!(ok.payload.is_some());
    }
}
