//! JSON-RPC 2.0 at `POST /a2a/jsonrpc`: the 11 PascalCase methods of A2A 1.0, and beside them
//! the slash-named methods of 0.3 ([`super::jsonrpc_v03`]; `A2A-Version` picks the dialect, its
//! absence the method name's). Errors travel with
//! HTTP 200 (413 for an oversized body, 401/403 for a caller who failed to authenticate, 429 for
//! a rate limit); streaming methods answer with SSE whose every event is a JSON-RPC response
//! carrying the request's id.

use a2a_types::v1::{
    CancelTaskRequest, DeleteTaskPushNotificationConfigRequest, GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest, GetTaskRequest, ListTaskPushNotificationConfigsRequest,
    ListTasksRequest, SendMessageRequest, SubscribeToTaskRequest, TaskPushNotificationConfig,
};
use a2a_types::v03::serve::StreamEnd;
use axum::Extension;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{ConnectInfo, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;

use a2a_types::{A2aError, Dialect, Method};

use super::pipeline::{Binding, Call};
use super::{check_content_type, decode, jsonrpc_v03, refused, sse};
use crate::gateway::Gateway;
use crate::service::{A2aService, Dialects, EventStream, RequestContext};
use crate::tls::PeerCert;

pub const PATH: &str = "/a2a/jsonrpc";

#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(default)]
    jsonrpc: Option<Value>,
    #[serde(default)]
    id: Option<Value>,
    #[serde(default)]
    method: Option<Value>,
    #[serde(default, borrow)]
    params: Option<&'a RawValue>,
}

#[derive(Serialize)]
struct Success<'a, T: Serialize> {
    jsonrpc: &'static str,
    id: &'a Value,
    result: &'a T,
}

pub(super) enum Outcome {
    Json(Vec<u8>),
    /// Events, encoded in the dialect (0.3: with `final` where the stream ends).
    Stream(EventStream, Dialect, StreamEnd),
}

pub async fn handle(
    State(gw): State<Gateway>,
    peer: Option<Extension<ConnectInfo<std::net::SocketAddr>>>,
    uri: Uri,
    headers: HeaderMap,
    cert: PeerCert,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let mut call = Call::start(Binding::JsonRpc);
    let body = match body {
        Ok(b) => b,
        Err(rejection) if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE => {
            let err = A2aError::PayloadTooLarge {
                limit: gw.max_body_bytes(),
            };
            let body = json_response(error_body(&Value::Null, &err));
            call.failed(&err);
            return (StatusCode::PAYLOAD_TOO_LARGE, body).into_response();
        }
        Err(rejection) => {
            let err = A2aError::InvalidRequest(rejection.body_text());
            return failed(call, &Value::Null, &err);
        }
    };
    // Checked before the envelope is read, so its error has no id (the body may not be JSON).
    if let Err(err) = check_content_type(&headers, &body) {
        return failed(call, &Value::Null, &err);
    }
    let (id, method, params) = match parse_envelope(&body) {
        Ok(e) => e,
        Err((id, err)) => return failed(call, &id, &err),
    };
    let family = jsonrpc_v03::dialect_of(&method);
    if let Some(m) = jsonrpc_v03::method_label(&method).or_else(|| Method::from_name(&method)) {
        call.method(m);
    }
    call.dialects(Dialects::both(family));
    call.http("POST", || PATH.into());
    let peer = peer.map(|Extension(ConnectInfo(addr))| addr.ip());
    let admitted = match call
        .admit(&gw, &headers, uri.query(), peer, cert.0.as_ref())
        .await
    {
        Ok(a) => a,
        Err(r) => {
            // Refused before the version was settled: answered in the method name's dialect.
            let response = json_response(dialect_error(family, &id, r.error()));
            call.failed(r.error());
            return refused(response, r);
        }
    };
    let dialect = admitted.ctx.dialect;
    let outcome = match dialect {
        Dialect::V1 => {
            call.traced(dispatch(gw.service(), &admitted.ctx, &id, &method, params))
                .await
        }
        Dialect::V03 => {
            call.traced(jsonrpc_v03::dispatch(
                gw.service(),
                &admitted.ctx,
                &id,
                &method,
                params,
            ))
            .await
        }
    };
    let mut response = match outcome {
        Ok(Outcome::Json(body)) => {
            call.ok_sized(body.len());
            json_response(body)
        }
        Ok(Outcome::Stream(events, dialect, end)) => {
            let id = id.clone();
            sse::respond(call.stream(events), gw.keep_alive(), move |item| {
                let bytes = match (item, dialect) {
                    (Ok(ev), Dialect::V1) => success_body(&id, &ev.event),
                    (Ok(ev), Dialect::V03) => {
                        success_body(&id, &a2a_types::v03::serve::stream_event(&ev.event, end))
                    }
                    (Err(err), d) => dialect_error(d, &id, err),
                };
                String::from_utf8(bytes).expect("serde_json writes UTF-8")
            })
        }
        Err(err) => {
            call.failed(&err);
            super::rate_headers::on_refusal(json_response(dialect_error(dialect, &id, &err)), &err)
        }
    };
    if let Some(v) = admitted.extensions {
        response.headers_mut().insert(super::EXTENSIONS_HEADER, v);
    }
    if let Some(rate) = &admitted.rate_limit {
        rate.apply(response.headers_mut());
    }
    response
}

/// The error body in `dialect`'s shape.
fn dialect_error(dialect: Dialect, id: &Value, err: &A2aError) -> Vec<u8> {
    match dialect {
        Dialect::V1 => error_body(id, err),
        Dialect::V03 => jsonrpc_v03::error_body(id, err),
    }
}

/// The error response of a call, with its outcome recorded (HTTP 429 for a rate limit).
fn failed(call: Call, id: &Value, err: &A2aError) -> Response {
    call.failed(err);
    super::rate_headers::on_refusal(json_response(error_body(id, err)), err)
}

/// Splits a request into (id, method, params), with the JSON-RPC error for each malformation.
/// The error carries the request's id whenever one could be read (JSON-RPC 2.0 §5: null only
/// when the id cannot be determined: a parse error, or an id that is not a string, a number or
/// null).
fn parse_envelope(body: &[u8]) -> Result<(Value, String, Option<&RawValue>), (Value, A2aError)> {
    let envelope: Envelope = match serde_json::from_slice(body) {
        Ok(e) => e,
        Err(e) if e.is_syntax() || e.is_eof() => {
            return Err((Value::Null, A2aError::Parse(e.to_string())));
        }
        Err(_) => {
            let err = A2aError::InvalidRequest(
                "the request must be a JSON-RPC 2.0 request object (batches are not supported)"
                    .into(),
            );
            return Err((salvaged_id(body), err));
        }
    };
    let id = match envelope.id {
        None => Value::Null,
        Some(id @ (Value::Null | Value::String(_) | Value::Number(_))) => id,
        Some(_) => {
            return Err((
                Value::Null,
                A2aError::InvalidRequest("id must be a string, a number or null".into()),
            ));
        }
    };
    let invalid = |msg: &str| Err((id.clone(), A2aError::InvalidRequest(msg.to_owned())));
    if envelope.jsonrpc.as_ref().and_then(Value::as_str) != Some("2.0") {
        return invalid("jsonrpc must be \"2.0\"");
    }
    match envelope.method {
        Some(Value::String(m)) if !m.is_empty() => Ok((id, m, envelope.params)),
        Some(_) => invalid("method must be a non-empty string"),
        None => invalid("method is required"),
    }
}

/// The id of an object that is JSON but not a well-formed envelope (a duplicated member, say),
/// if it has a usable one.
fn salvaged_id(body: &[u8]) -> Value {
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(mut o)) => match o.remove("id") {
            Some(id @ (Value::String(_) | Value::Number(_))) => id,
            _ => Value::Null,
        },
        _ => Value::Null,
    }
}

/// Decodes `params` into a request type; every failure names the offending field.
fn params<T: DeserializeOwned + Default>(
    raw: Option<&RawValue>,
    required: bool,
) -> Result<T, A2aError> {
    let Some(raw) = raw.filter(|r| r.get().trim() != "null") else {
        return if required {
            Err(A2aError::invalid_params("params", "is required"))
        } else {
            Ok(T::default())
        };
    };
    decode::json(raw.get(), "params")
}

fn json<T: Serialize>(id: &Value, result: &T) -> Outcome {
    Outcome::Json(success_body(id, result))
}

/// A request's params decoded into the canonical request type of its method.
#[derive(Debug, Clone, PartialEq)]
pub enum Request {
    SendMessage(SendMessageRequest),
    SendStreamingMessage(SendMessageRequest),
    GetTask(GetTaskRequest),
    ListTasks(ListTasksRequest),
    CancelTask(CancelTaskRequest),
    SubscribeToTask(SubscribeToTaskRequest),
    CreatePushConfig(TaskPushNotificationConfig),
    GetPushConfig(GetTaskPushNotificationConfigRequest),
    ListPushConfigs(ListTaskPushNotificationConfigsRequest),
    DeletePushConfig(DeleteTaskPushNotificationConfigRequest),
    GetExtendedAgentCard(GetExtendedAgentCardRequest),
}

/// Decodes the `params` of `method`: the one table of the binding's methods and their types.
pub fn decode_params(method: &str, raw: Option<&RawValue>) -> Result<Request, A2aError> {
    Ok(match method {
        "SendMessage" => Request::SendMessage(params(raw, true)?),
        "SendStreamingMessage" => Request::SendStreamingMessage(params(raw, true)?),
        "GetTask" => Request::GetTask(params(raw, true)?),
        "ListTasks" => Request::ListTasks(params(raw, false)?),
        "CancelTask" => Request::CancelTask(params(raw, true)?),
        "SubscribeToTask" => Request::SubscribeToTask(params(raw, true)?),
        "CreateTaskPushNotificationConfig" => Request::CreatePushConfig(params(raw, true)?),
        "GetTaskPushNotificationConfig" => Request::GetPushConfig(params(raw, true)?),
        "ListTaskPushNotificationConfigs" => Request::ListPushConfigs(params(raw, true)?),
        "DeleteTaskPushNotificationConfig" => Request::DeletePushConfig(params(raw, true)?),
        "GetExtendedAgentCard" => Request::GetExtendedAgentCard(params(raw, false)?),
        other => {
            return Err(A2aError::MethodNotFound {
                method: other.to_owned(),
            });
        }
    })
}

/// Decodes a whole request body as [`handle`] does before it calls the service: the envelope,
/// then the params (for the fuzz targets and the binding-equivalence tests).
pub fn decode_request(body: &[u8]) -> Result<(Value, Request), (Value, A2aError)> {
    let (id, method, raw) = parse_envelope(body)?;
    match decode_params(&method, raw) {
        Ok(request) => Ok((id, request)),
        Err(err) => Err((id, err)),
    }
}

async fn dispatch(
    svc: &A2aService,
    ctx: &RequestContext,
    id: &Value,
    method: &str,
    raw: Option<&RawValue>,
) -> Result<Outcome, A2aError> {
    Ok(match decode_params(method, raw)? {
        Request::SendMessage(req) => json(id, &svc.send_message(ctx, req).await?),
        Request::SendStreamingMessage(req) => Outcome::Stream(
            svc.send_streaming_message(ctx, req).await?,
            Dialect::V1,
            StreamEnd::Settled,
        ),
        Request::GetTask(req) => json(id, &svc.get_task(ctx, req).await?),
        Request::ListTasks(req) => json(id, &svc.list_tasks(ctx, req).await?),
        Request::CancelTask(req) => json(id, &svc.cancel_task(ctx, req).await?),
        Request::SubscribeToTask(req) => Outcome::Stream(
            svc.subscribe_to_task(ctx, req).await?,
            Dialect::V1,
            StreamEnd::Terminal,
        ),
        Request::CreatePushConfig(req) => json(id, &svc.create_push_config(ctx, req).await?),
        Request::GetPushConfig(req) => json(id, &svc.get_push_config(ctx, req).await?),
        Request::ListPushConfigs(req) => json(id, &svc.list_push_configs(ctx, req).await?),
        Request::DeletePushConfig(req) => {
            svc.delete_push_config(ctx, req).await?;
            json(id, &serde_json::json!({}))
        }
        Request::GetExtendedAgentCard(req) => {
            json(id, &svc.get_extended_agent_card(ctx, req).await?)
        }
    })
}

pub(super) fn success_body<T: Serialize>(id: &Value, result: &T) -> Vec<u8> {
    let success = Success {
        jsonrpc: "2.0",
        id,
        result,
    };
    // A NaN stored before such numbers were refused prints as null: the task stays readable.
    serde_json::to_vec(&success)
        .or_else(|_| a2a_types::wkt::lossy(|| serde_json::to_vec(&success)))
        .unwrap_or_else(|e| {
            tracing::error!(error = %e, "cannot serialise a result");
            error_body(
                id,
                &A2aError::Internal("cannot serialise the result".into()),
            )
        })
}

/// `{"jsonrpc":"2.0","id":…,"error":{"code","message","data":[ErrorInfo, BadRequest?]}}`.
pub fn error_body(id: &Value, err: &A2aError) -> Vec<u8> {
    let mut data = vec![err.error_info().to_json()];
    if let A2aError::InvalidParams { field, reason } = err {
        data.push(serde_json::json!({
            "@type": "type.googleapis.com/google.rpc.BadRequest",
            "fieldViolations": [{"field": field, "description": reason}],
        }));
    }
    let body = serde_json::json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": {"code": err.codes().json_rpc, "message": err.to_string(), "data": data},
    });
    serde_json::to_vec(&body).expect("a JSON value always serialises")
}

fn json_response(body: Vec<u8>) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        body,
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn envelope_errors() {
        let null = Value::Null;
        assert!(matches!(
            parse_envelope(b"{oops"),
            Err((Value::Null, A2aError::Parse(_)))
        ));
        assert!(matches!(
            parse_envelope(b"[]"),
            Err((Value::Null, A2aError::InvalidRequest(_)))
        ));
        // Once the id could be read, the error carries it.
        for (body, id) in [
            (
                &br#"{"jsonrpc":"1.0","id":1,"method":"GetTask"}"#[..],
                Value::from(1),
            ),
            (br#"{"id":"a","method":"GetTask"}"#, Value::from("a")),
            (br#"{"jsonrpc":"2.0","id":7}"#, Value::from(7)),
            (br#"{"jsonrpc":"2.0","id":7,"method":3}"#, Value::from(7)),
            (
                br#"{"jsonrpc":"2.0","id":"d","id":"d","method":"GetTask"}"#,
                Value::from("d"),
            ),
            (
                br#"{"jsonrpc":"2.0","id":{},"method":"GetTask"}"#,
                null.clone(),
            ),
        ] {
            match parse_envelope(body) {
                Err((got, A2aError::InvalidRequest(_))) => {
                    assert_eq!(got, id, "{}", String::from_utf8_lossy(body))
                }
                other => panic!("{}: {other:?}", String::from_utf8_lossy(body)),
            }
        }
        let (id, method, params) =
            parse_envelope(br#"{"jsonrpc":"2.0","id":"a","method":"GetTask","params":{"id":"x"}}"#)
                .unwrap();
        assert_eq!((id, method.as_str()), (Value::from("a"), "GetTask"));
        assert_eq!(params.unwrap().get(), r#"{"id":"x"}"#);
    }

    #[test]
    fn params_errors_name_the_field() {
        let raw = RawValue::from_string(
            r#"{"message":{"messageId":"m","role":"ROLE_ROBOT","parts":[]}}"#.into(),
        )
        .unwrap();
        match params::<SendMessageRequest>(Some(&raw), true) {
            Err(A2aError::InvalidParams { field, .. }) => assert_eq!(field, "message.role"),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            params::<GetTaskRequest>(None, true),
            Err(A2aError::InvalidParams { .. })
        ));
    }

    /// A task holding a NaN (stored before such numbers were refused at the edge) is still
    /// answered, the number as null, not -32603.
    #[test]
    fn a_stored_nan_prints_as_null() {
        let task = a2a_types::v1::Task {
            id: "t".into(),
            metadata: Some(
                [("x".to_owned(), a2a_types::wkt::Value::from(f64::NAN))]
                    .into_iter()
                    .collect(),
            ),
            ..Default::default()
        };
        let body: Value = serde_json::from_slice(&success_body(&Value::from(1), &task)).unwrap();
        assert_eq!(body["result"]["id"], "t", "{body}");
        assert_eq!(body["result"]["metadata"]["x"], Value::Null, "{body}");
        // Strict everywhere else: the fingerprint and signatures still refuse it.
        assert!(serde_json::to_vec(&task).is_err());
    }
}
