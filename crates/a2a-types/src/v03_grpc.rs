//! The A2A 0.3 gRPC service (`a2a.v1.A2AService`, [`proto`]) and its translation to and from
//! the 1.0 model, for the gateway's 0.3 gRPC binding: requests come in as 0.3 messages and go to
//! the service as 1.0 ones; answers and stream events go back out as 0.3 messages.
//!
//! The two protos mostly share field numbers; where they differ (parts, artifacts, the status
//! `update` field, resource names instead of ids, push configs nested in a named wrapper, the
//! card's `url`/`preferredTransport`) the functions here say so. What 0.3 cannot say is dropped
//! on the way out (`referenceTaskIds`, a text part's `filename`/`mediaType`, device-code OAuth
//! flows, the 1.0 `tenant`); what 1.0 cannot say is dropped on the way in (`final`, which 1.0
//! expresses by the state itself). Enum numbers are the same in both (0.3 spells state 5
//! `TASK_STATE_CANCELLED`), so states and roles pass through as numbers.

use crate::A2aError;
use crate::state::is_settled;
use crate::v1;
use crate::wkt::{Struct, Value, value};

/// Generated from `proto/a2a/v1/a2a.proto` (package `a2a.v1`).
#[allow(clippy::all, missing_docs)]
pub mod proto {
    include!(concat!(env!("OUT_DIR"), "/a2a.v1.rs"));
}

/// The encoded `FileDescriptorSet` of the 0.3 proto, for gRPC reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/a2a_v03_descriptor.bin"));

/// What a 0.3 card says in `protocolVersion`.
pub const PROTOCOL_VERSION: &str = "0.3.0";

// === resource names ===

/// The task id of `tasks/{id}` (a bare id is accepted too: some 0.3 clients send one).
pub fn task_name(name: &str, field: &str) -> Result<String, A2aError> {
    let id = name.strip_prefix("tasks/").unwrap_or(name);
    if id.is_empty() || id.contains('/') {
        return Err(A2aError::invalid_params(
            field,
            "must be a task resource name, tasks/{id}",
        ));
    }
    Ok(id.to_owned())
}

/// The task and config ids of `tasks/{task_id}/pushNotificationConfigs/{config_id}`.
pub fn push_config_name(name: &str) -> Result<(String, String), A2aError> {
    let invalid = || {
        A2aError::invalid_params(
            "name",
            "must be tasks/{task_id}/pushNotificationConfigs/{config_id}",
        )
    };
    let rest = name.strip_prefix("tasks/").ok_or_else(invalid)?;
    let (task, config) = rest
        .split_once("/pushNotificationConfigs/")
        .ok_or_else(invalid)?;
    if task.is_empty() || task.contains('/') || config.is_empty() || config.contains('/') {
        return Err(invalid());
    }
    Ok((task.to_owned(), config.to_owned()))
}

fn config_resource(task_id: &str, id: &str) -> String {
    format!("tasks/{task_id}/pushNotificationConfigs/{id}")
}

// === requests: 0.3 → 1.0 ===

/// SendMessage / SendStreamingMessage. Without a configuration the send blocks, as in 1.0 and
/// the 0.3 SDKs; with one, `blocking` decides (its proto default, false, returns at once).
/// `historyLength` 0 means the whole history in 0.3.
pub fn send_request(req: proto::SendMessageRequest) -> v1::SendMessageRequest {
    v1::SendMessageRequest {
        tenant: String::new(),
        message: req.request.map(message_from),
        configuration: req.configuration.map(|c| v1::SendMessageConfiguration {
            accepted_output_modes: c.accepted_output_modes,
            task_push_notification_config: c
                .push_notification
                .map(|p| push_config_body_from(p, String::new())),
            history_length: history_length(c.history_length),
            return_immediately: !c.blocking,
        }),
        metadata: req.metadata,
    }
}

/// 0.3's plain int32: 0 (unset) is the whole history.
fn history_length(n: i32) -> Option<i32> {
    (n != 0).then_some(n)
}

pub fn get_task_request(req: proto::GetTaskRequest) -> Result<v1::GetTaskRequest, A2aError> {
    Ok(v1::GetTaskRequest {
        tenant: String::new(),
        id: task_name(&req.name, "name")?,
        history_length: history_length(req.history_length),
    })
}

pub fn cancel_task_request(
    req: proto::CancelTaskRequest,
) -> Result<v1::CancelTaskRequest, A2aError> {
    Ok(v1::CancelTaskRequest {
        id: task_name(&req.name, "name")?,
        ..Default::default()
    })
}

pub fn subscribe_request(
    req: proto::TaskSubscriptionRequest,
) -> Result<v1::SubscribeToTaskRequest, A2aError> {
    Ok(v1::SubscribeToTaskRequest {
        tenant: String::new(),
        id: task_name(&req.name, "name")?,
    })
}

/// The task comes from `parent` (or, without one, from the config's `name`); the config id from
/// `configId`, else the config's own `id`, else the task id (0.3's default: a task's one
/// unnamed config is named after the task).
pub fn create_push_request(
    req: proto::CreateTaskPushNotificationConfigRequest,
) -> Result<v1::TaskPushNotificationConfig, A2aError> {
    let config = req
        .config
        .ok_or_else(|| A2aError::invalid_params("config", "is required"))?;
    let task_id = if req.parent.is_empty() {
        push_config_name(&config.name)?.0
    } else {
        task_name(&req.parent, "parent")?
    };
    let body = config
        .push_notification_config
        .ok_or_else(|| A2aError::invalid_params("config.pushNotificationConfig", "is required"))?;
    let mut out = push_config_body_from(body, task_id);
    if !req.config_id.is_empty() {
        out.id = req.config_id;
    }
    if out.id.is_empty() {
        out.id = out.task_id.clone();
    }
    Ok(out)
}

pub fn get_push_request(
    req: proto::GetTaskPushNotificationConfigRequest,
) -> Result<v1::GetTaskPushNotificationConfigRequest, A2aError> {
    let (task_id, id) = push_config_name(&req.name)?;
    Ok(v1::GetTaskPushNotificationConfigRequest {
        tenant: String::new(),
        task_id,
        id,
    })
}

pub fn delete_push_request(
    req: proto::DeleteTaskPushNotificationConfigRequest,
) -> Result<v1::DeleteTaskPushNotificationConfigRequest, A2aError> {
    let (task_id, id) = push_config_name(&req.name)?;
    Ok(v1::DeleteTaskPushNotificationConfigRequest {
        tenant: String::new(),
        task_id,
        id,
    })
}

pub fn list_push_request(
    req: proto::ListTaskPushNotificationConfigRequest,
) -> Result<v1::ListTaskPushNotificationConfigsRequest, A2aError> {
    Ok(v1::ListTaskPushNotificationConfigsRequest {
        task_id: task_name(&req.parent, "parent")?,
        page_size: req.page_size,
        page_token: req.page_token,
        tenant: String::new(),
    })
}

// === the data model: 0.3 → 1.0 ===

pub fn message_from(m: proto::Message) -> v1::Message {
    v1::Message {
        message_id: m.message_id,
        context_id: m.context_id,
        task_id: m.task_id,
        role: m.role,
        parts: m.content.into_iter().map(part_from).collect(),
        metadata: m.metadata,
        extensions: m.extensions,
        reference_task_ids: Vec::new(),
    }
}

/// A file part becomes a `url` or `raw` part with its media type and name; a data part's object
/// becomes the part's value.
pub fn part_from(p: proto::Part) -> v1::Part {
    use proto::file_part::File;
    use v1::part::Content;
    let mut out = v1::Part {
        metadata: p.metadata,
        ..Default::default()
    };
    out.content = match p.part {
        Some(proto::part::Part::Text(t)) => Some(Content::Text(t)),
        Some(proto::part::Part::File(f)) => {
            out.media_type = f.mime_type;
            out.filename = f.name;
            match f.file {
                Some(File::FileWithUri(u)) => Some(Content::Url(u)),
                Some(File::FileWithBytes(b)) => Some(Content::Raw(b)),
                None => None,
            }
        }
        Some(proto::part::Part::Data(d)) => Some(Content::Data(Value {
            kind: Some(value::Kind::StructValue(d.data.unwrap_or_default())),
        })),
        None => None,
    };
    out
}

pub fn artifact_from(a: proto::Artifact) -> v1::Artifact {
    v1::Artifact {
        artifact_id: a.artifact_id,
        name: a.name,
        description: a.description,
        parts: a.parts.into_iter().map(part_from).collect(),
        metadata: a.metadata,
        extensions: a.extensions,
    }
}

pub fn status_from(s: proto::TaskStatus) -> v1::TaskStatus {
    v1::TaskStatus {
        state: s.state,
        message: s.update.map(message_from),
        timestamp: s.timestamp,
    }
}

pub fn task_from(t: proto::Task) -> v1::Task {
    v1::Task {
        id: t.id,
        context_id: t.context_id,
        status: t.status.map(status_from),
        artifacts: t.artifacts.into_iter().map(artifact_from).collect(),
        history: t.history.into_iter().map(message_from).collect(),
        metadata: t.metadata,
    }
}

pub fn stream_response_from(r: proto::StreamResponse) -> v1::StreamResponse {
    use proto::stream_response::Payload as P03;
    use v1::stream_response::Payload;
    v1::StreamResponse {
        payload: r.payload.map(|p| match p {
            P03::Task(t) => Payload::Task(task_from(t)),
            P03::Msg(m) => Payload::Message(message_from(m)),
            P03::StatusUpdate(s) => Payload::StatusUpdate(v1::TaskStatusUpdateEvent {
                task_id: s.task_id,
                context_id: s.context_id,
                status: s.status.map(status_from),
                metadata: s.metadata,
            }),
            P03::ArtifactUpdate(a) => Payload::ArtifactUpdate(v1::TaskArtifactUpdateEvent {
                task_id: a.task_id,
                context_id: a.context_id,
                artifact: a.artifact.map(artifact_from),
                append: a.append,
                last_chunk: a.last_chunk,
                metadata: a.metadata,
            }),
        }),
    }
}

/// 0.3's authentication names a list of schemes; 1.0's one scheme is the first.
fn push_config_body_from(
    p: proto::PushNotificationConfig,
    task_id: String,
) -> v1::TaskPushNotificationConfig {
    v1::TaskPushNotificationConfig {
        tenant: String::new(),
        id: p.id,
        task_id,
        url: p.url,
        token: p.token,
        authentication: p.authentication.map(|a| v1::AuthenticationInfo {
            scheme: a.schemes.into_iter().next().unwrap_or_default(),
            credentials: a.credentials,
        }),
    }
}

/// A named 0.3 config (as the gateway answers it) as the 1.0 config.
pub fn push_config_from(
    c: proto::TaskPushNotificationConfig,
) -> Result<v1::TaskPushNotificationConfig, A2aError> {
    let (task_id, id) = push_config_name(&c.name)?;
    let mut out = push_config_body_from(c.push_notification_config.unwrap_or_default(), task_id);
    out.id = id;
    Ok(out)
}

// === answers: 1.0 → 0.3 ===

pub fn send_response(r: v1::SendMessageResponse) -> proto::SendMessageResponse {
    use proto::send_message_response::Payload as P03;
    use v1::send_message_response::Payload;
    proto::SendMessageResponse {
        payload: r.payload.map(|p| match p {
            Payload::Task(t) => P03::Task(task(t)),
            Payload::Message(m) => P03::Msg(message(m)),
        }),
    }
}

/// A stream event. A status update is `final` when its state ends the interaction (terminal or
/// interrupted): the gateway ends the 0.3 stream right after it, as it ends the 1.0 one.
pub fn stream_response(r: v1::StreamResponse) -> proto::StreamResponse {
    use proto::stream_response::Payload as P03;
    use v1::stream_response::Payload;
    proto::StreamResponse {
        payload: r.payload.map(|p| match p {
            Payload::Task(t) => P03::Task(task(t)),
            Payload::Message(m) => P03::Msg(message(m)),
            Payload::StatusUpdate(s) => {
                let final_ = s
                    .status
                    .as_ref()
                    .and_then(|st| v1::TaskState::try_from(st.state).ok())
                    .is_some_and(is_settled);
                P03::StatusUpdate(proto::TaskStatusUpdateEvent {
                    task_id: s.task_id,
                    context_id: s.context_id,
                    status: s.status.map(status),
                    r#final: final_,
                    metadata: s.metadata,
                })
            }
            Payload::ArtifactUpdate(a) => P03::ArtifactUpdate(proto::TaskArtifactUpdateEvent {
                task_id: a.task_id,
                context_id: a.context_id,
                artifact: a.artifact.map(artifact),
                append: a.append,
                last_chunk: a.last_chunk,
                metadata: a.metadata,
            }),
        }),
    }
}

pub fn task(t: v1::Task) -> proto::Task {
    proto::Task {
        id: t.id,
        context_id: t.context_id,
        status: t.status.map(status),
        artifacts: t.artifacts.into_iter().map(artifact).collect(),
        history: t.history.into_iter().map(message).collect(),
        metadata: t.metadata,
    }
}

pub fn status(s: v1::TaskStatus) -> proto::TaskStatus {
    proto::TaskStatus {
        state: s.state,
        update: s.message.map(message),
        timestamp: s.timestamp,
    }
}

pub fn message(m: v1::Message) -> proto::Message {
    proto::Message {
        message_id: m.message_id,
        context_id: m.context_id,
        task_id: m.task_id,
        role: m.role,
        content: m.parts.into_iter().map(part).collect(),
        metadata: m.metadata,
        extensions: m.extensions,
    }
}

pub fn artifact(a: v1::Artifact) -> proto::Artifact {
    proto::Artifact {
        artifact_id: a.artifact_id,
        name: a.name,
        description: a.description,
        parts: a.parts.into_iter().map(part).collect(),
        metadata: a.metadata,
        extensions: a.extensions,
    }
}

/// `raw` and `url` parts become file parts; a data part holds an object in 0.3, so another JSON
/// value is wrapped as `{"value": …}` (as the 0.3 JSON-RPC dialect does).
pub fn part(p: v1::Part) -> proto::Part {
    use proto::file_part::File;
    use proto::part::Part as P03;
    use v1::part::Content;
    let file = |file| {
        P03::File(proto::FilePart {
            file: Some(file),
            mime_type: p.media_type.clone(),
            name: p.filename.clone(),
        })
    };
    let content = match p.content {
        Some(Content::Text(t)) => Some(P03::Text(t)),
        Some(Content::Raw(b)) => Some(file(File::FileWithBytes(b))),
        Some(Content::Url(u)) => Some(file(File::FileWithUri(u))),
        Some(Content::Data(v)) => Some(P03::Data(proto::DataPart {
            data: Some(match v.kind {
                Some(value::Kind::StructValue(s)) => s,
                kind => Struct {
                    fields: [("value".to_owned(), Value { kind })].into(),
                },
            }),
        })),
        None => None,
    };
    proto::Part {
        part: content,
        metadata: p.metadata,
    }
}

pub fn push_config(c: v1::TaskPushNotificationConfig) -> proto::TaskPushNotificationConfig {
    proto::TaskPushNotificationConfig {
        name: config_resource(&c.task_id, &c.id),
        push_notification_config: Some(proto::PushNotificationConfig {
            id: c.id,
            url: c.url,
            token: c.token,
            authentication: c.authentication.map(|a| proto::AuthenticationInfo {
                schemes: vec![a.scheme],
                credentials: a.credentials,
            }),
        }),
    }
}

pub fn list_push_response(
    r: v1::ListTaskPushNotificationConfigsResponse,
) -> proto::ListTaskPushNotificationConfigResponse {
    proto::ListTaskPushNotificationConfigResponse {
        configs: r.configs.into_iter().map(push_config).collect(),
        next_page_token: r.next_page_token,
    }
}

/// The 0.3 card of a 1.0 card. The main `url` and `preferredTransport` are the first interface
/// that speaks 0.3 (else the first one); `additionalInterfaces` lists every interface once.
/// Signatures are left out: they sign the card's JSON document, which a 0.3 card is not, so a
/// 0.3 client could not verify them.
pub fn card(c: v1::AgentCard) -> proto::AgentCard {
    let main = c
        .supported_interfaces
        .iter()
        .find(|i| i.protocol_version.starts_with("0.3"))
        .or_else(|| c.supported_interfaces.first())
        .cloned()
        .unwrap_or_default();
    let mut additional: Vec<proto::AgentInterface> = Vec::new();
    for i in &c.supported_interfaces {
        if !additional
            .iter()
            .any(|a| a.url == i.url && a.transport == i.protocol_binding)
        {
            additional.push(proto::AgentInterface {
                url: i.url.clone(),
                transport: i.protocol_binding.clone(),
            });
        }
    }
    let caps = c.capabilities.unwrap_or_default();
    proto::AgentCard {
        protocol_version: PROTOCOL_VERSION.to_owned(),
        name: c.name,
        description: c.description,
        url: main.url,
        preferred_transport: main.protocol_binding,
        additional_interfaces: additional,
        provider: c.provider.map(|p| recode(&p)),
        version: c.version,
        documentation_url: c.documentation_url.unwrap_or_default(),
        capabilities: Some(proto::AgentCapabilities {
            streaming: caps.streaming.unwrap_or(false),
            push_notifications: caps.push_notifications.unwrap_or(false),
            extensions: caps.extensions.iter().map(recode).collect(),
        }),
        security_schemes: c
            .security_schemes
            .iter()
            .map(|(k, v)| (k.clone(), recode(v)))
            .collect(),
        security: c.security_requirements.iter().map(recode).collect(),
        default_input_modes: c.default_input_modes,
        default_output_modes: c.default_output_modes,
        skills: c.skills.iter().map(recode).collect(),
        supports_authenticated_extended_card: caps.extended_agent_card.unwrap_or(false),
        signatures: Vec::new(),
        icon_url: c.icon_url.unwrap_or_default(),
    }
}

/// A message whose 0.3 and 1.0 definitions share every field number that both have (providers,
/// extensions, skills, security requirements and schemes): re-read from its encoding. Fields
/// only 1.0 has (device-code flows, `pkceRequired`) are unknown to 0.3 and dropped.
fn recode<A: prost::Message, B: prost::Message + Default>(m: &A) -> B {
    B::decode(m.encode_to_vec().as_slice()).unwrap_or_default()
}

#[cfg(test)]
#[path = "v03_grpc_tests.rs"]
mod tests;
