//! A small A2A 0.3 JSON-RPC client (`message/send`, `message/stream`, `tasks/get`,
//! `tasks/cancel`, `tasks/resubscribe`) speaking the canonical 1.0 types on the gateway's side
//! through the translation in `a2a_types::v03`. Its failures are `ClientError`s like the 1.0
//! client's, so the upstream layer maps both the same way.

use std::time::Duration;

use a2a_client::{ClientError, EventStream, StreamEvent};
use a2a_types::A2aError;
use a2a_types::v1::{
    AgentCard, CancelTaskRequest, GetTaskRequest, SendMessageRequest, SendMessageResponse,
    SubscribeToTaskRequest, Task, TaskState, send_message_response, stream_response::Payload,
};
use a2a_types::v03::{self, method};
use futures::StreamExt;
use serde_json::{Value, json};

/// Largest answer or SSE event read from a 0.3 upstream.
const MAX_BYTES: usize = 16 * 1024 * 1024;

#[derive(Clone)]
pub struct V03Client {
    url: String,
    http: reqwest::Client,
    timeout: Duration,
    headers: Vec<(String, String)>,
}

fn transport(context: &str, e: impl std::error::Error + Send + Sync + 'static) -> ClientError {
    ClientError::Transport {
        context: context.to_owned(),
        source: Box::new(e),
    }
}

fn decode(context: &str, message: impl std::fmt::Display) -> ClientError {
    ClientError::Decode {
        context: context.to_owned(),
        message: message.to_string(),
    }
}

/// 0.3 errors carry no ErrorInfo: classify by the code.
fn rpc_error(error: &Value) -> ClientError {
    let code = error["code"].as_i64().unwrap_or(0);
    let message = error["message"].as_str().unwrap_or_default().to_owned();
    let a2a = match code {
        -32001 => A2aError::task_not_found(""),
        -32002 => A2aError::TaskNotCancelable {
            task_id: String::new(),
            state: TaskState::Unspecified,
        },
        -32004 => A2aError::UnsupportedOperation(message.clone()),
        -32602 => A2aError::invalid_params("params", message.clone()),
        -32006 => A2aError::InvalidAgentResponse(message.clone()),
        _ => {
            return ClientError::Unclassified {
                status: format!("JSON-RPC {code}"),
                message,
            };
        }
    };
    ClientError::A2a(a2a)
}

impl V03Client {
    /// Binds to the card's JSON-RPC interface (a 0.3 card names it `url` with
    /// `preferredTransport`; a 1.0-shaped card, its first JSONRPC interface).
    pub fn from_card(
        card: &AgentCard,
        http: reqwest::Client,
        timeout: Duration,
    ) -> Result<Self, String> {
        let url = card
            .supported_interfaces
            .iter()
            .find(|i| i.protocol_binding.eq_ignore_ascii_case("JSONRPC"))
            .map(|i| i.url.clone())
            .ok_or_else(|| format!("the card of {:?} has no JSONRPC interface", card.name))?;
        Ok(Self {
            url,
            http,
            timeout,
            headers: Vec::new(),
        })
    }

    /// The JSON-RPC endpoint it calls.
    pub fn url(&self) -> &str {
        &self.url
    }

    pub fn with_header(&self, name: String, value: String) -> Self {
        let mut c = self.clone();
        c.headers.push((name, value));
        c
    }

    fn request(&self, method: &str, params: Value) -> reqwest::RequestBuilder {
        let body = json!({"jsonrpc": "2.0", "id": uuid::Uuid::now_v7().to_string(),
                          "method": method, "params": params});
        let mut req = self
            .http
            .post(&self.url)
            .header("content-type", "application/json")
            .body(body.to_string());
        for (k, v) in &self.headers {
            req = req.header(k, v);
        }
        req
    }

    async fn call(&self, method: &str, params: Value) -> Result<Value, ClientError> {
        let send = self.request(method, params).send();
        let resp = tokio::time::timeout(self.timeout, send)
            .await
            .map_err(|e| transport(method, e))?
            .map_err(|e| transport(method, e))?;
        let status = resp.status();
        let bytes = resp.bytes().await.map_err(|e| transport(method, e))?;
        if bytes.len() > MAX_BYTES {
            return Err(decode(method, "the answer is too large"));
        }
        let body: Value = serde_json::from_slice(&bytes).map_err(|e| {
            if status.is_server_error() {
                ClientError::Unclassified {
                    status: format!("HTTP {}", status.as_u16()),
                    message: String::new(),
                }
            } else {
                decode(method, e)
            }
        })?;
        if let Some(err) = body.get("error") {
            return Err(rpc_error(err));
        }
        body.get("result")
            .cloned()
            .ok_or_else(|| decode(method, "no result and no error"))
    }

    async fn open_stream(&self, method: &str, params: Value) -> Result<EventStream, ClientError> {
        let send = self
            .request(method, params)
            .header("accept", "text/event-stream")
            .send();
        let resp = tokio::time::timeout(self.timeout, send)
            .await
            .map_err(|e| transport(method, e))?
            .map_err(|e| transport(method, e))?;
        let is_sse = resp
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        if !is_sse {
            let body: Value = resp.json().await.map_err(|e| decode(method, e))?;
            return Err(body
                .get("error")
                .map(rpc_error)
                .unwrap_or_else(|| decode(method, "not an event stream")));
        }
        let method = method.to_owned();
        let events = a2a_client::sse::events(resp.bytes_stream(), MAX_BYTES);
        Ok(events
            .map(move |ev| {
                let ev = ev?;
                let body: Value = serde_json::from_str(&ev.data).map_err(|e| decode(&method, e))?;
                if let Some(err) = body.get("error") {
                    return Err(rpc_error(err));
                }
                let response =
                    v03::stream_response(&body["result"]).map_err(|e| decode(&method, e))?;
                Ok(StreamEvent {
                    response,
                    id: ev.id,
                })
            })
            .boxed())
    }

    pub async fn send_message(
        &self,
        req: SendMessageRequest,
    ) -> Result<SendMessageResponse, ClientError> {
        let params = v03::send_params(&req).map_err(ClientError::Config)?;
        let result = self.call(method::SEND, params).await?;
        let payload = match v03::stream_response(&result)
            .map_err(|e| decode(method::SEND, e))?
            .payload
        {
            Some(Payload::Task(t)) => send_message_response::Payload::Task(t),
            Some(Payload::Message(m)) => send_message_response::Payload::Message(m),
            _ => return Err(decode(method::SEND, "neither a task nor a message")),
        };
        Ok(SendMessageResponse {
            payload: Some(payload),
        })
    }

    pub async fn send_streaming_message(
        &self,
        req: SendMessageRequest,
    ) -> Result<EventStream, ClientError> {
        let params = v03::send_params(&req).map_err(ClientError::Config)?;
        self.open_stream(method::STREAM, params).await
    }

    pub async fn get_task(&self, req: GetTaskRequest) -> Result<Task, ClientError> {
        let mut params = json!({"id": req.id});
        if let Some(n) = req.history_length {
            params["historyLength"] = json!(n);
        }
        let result = self.call(method::GET, params).await?;
        v03::task(&result).map_err(|e| decode(method::GET, e))
    }

    pub async fn cancel_task(&self, req: CancelTaskRequest) -> Result<Task, ClientError> {
        let result = self.call(method::CANCEL, json!({"id": req.id})).await?;
        v03::task(&result).map_err(|e| decode(method::CANCEL, e))
    }

    pub async fn subscribe_to_task(
        &self,
        req: SubscribeToTaskRequest,
    ) -> Result<EventStream, ClientError> {
        self.open_stream(method::RESUBSCRIBE, json!({"id": req.id}))
            .await
    }
}
