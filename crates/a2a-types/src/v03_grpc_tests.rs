use prost::Message as _;

use super::*;
use crate::v1::{part::Content, stream_response::Payload};
use crate::wkt::Timestamp;

fn meta(key: &str, v: &str) -> Option<Struct> {
    Some(Struct {
        fields: [(
            key.to_owned(),
            Value {
                kind: Some(value::Kind::StringValue(v.to_owned())),
            },
        )]
        .into(),
    })
}

fn object(key: &str, n: f64) -> Struct {
    Struct {
        fields: [(
            key.to_owned(),
            Value {
                kind: Some(value::Kind::NumberValue(n)),
            },
        )]
        .into(),
    }
}

fn part_of(content: Content) -> v1::Part {
    v1::Part {
        content: Some(content),
        ..Default::default()
    }
}

/// Every kind of part 0.3 can carry, with the fields it keeps.
fn parts() -> Vec<v1::Part> {
    vec![
        v1::Part {
            metadata: meta("k", "v"),
            ..part_of(Content::Text("hello".into()))
        },
        v1::Part {
            media_type: "image/png".into(),
            filename: "a.png".into(),
            ..part_of(Content::Raw(vec![0, 1, 2, 255]))
        },
        v1::Part {
            media_type: "application/pdf".into(),
            filename: "doc.pdf".into(),
            ..part_of(Content::Url("https://example.com/doc.pdf".into()))
        },
        part_of(Content::Data(Value {
            kind: Some(value::Kind::StructValue(object("n", 5.0))),
        })),
    ]
}

fn message_1_0(role: v1::Role) -> v1::Message {
    v1::Message {
        message_id: "m-1".into(),
        context_id: "ctx-1".into(),
        task_id: "t-1".into(),
        role: role as i32,
        parts: parts(),
        metadata: meta("from", "test"),
        extensions: vec!["https://example.com/ext".into()],
        reference_task_ids: Vec::new(),
    }
}

fn artifact_1_0() -> v1::Artifact {
    v1::Artifact {
        artifact_id: "a-1".into(),
        name: "result".into(),
        description: "the result".into(),
        parts: parts(),
        metadata: meta("a", "b"),
        extensions: vec!["https://example.com/ext".into()],
    }
}

fn status_1_0(state: v1::TaskState) -> v1::TaskStatus {
    v1::TaskStatus {
        state: state as i32,
        message: Some(message_1_0(v1::Role::Agent)),
        timestamp: Some(Timestamp {
            seconds: 1_700_000_000,
            nanos: 123_000_000,
        }),
    }
}

fn task_1_0(state: v1::TaskState) -> v1::Task {
    v1::Task {
        id: "t-1".into(),
        context_id: "ctx-1".into(),
        status: Some(status_1_0(state)),
        artifacts: vec![artifact_1_0()],
        history: vec![message_1_0(v1::Role::User), message_1_0(v1::Role::Agent)],
        metadata: meta("x", "y"),
    }
}

#[test]
fn messages_and_parts_round_trip() {
    let m = message_1_0(v1::Role::User);
    let out = message(m.clone());
    assert_eq!(out.content.len(), 4);
    assert_eq!(out.role, proto::Role::User as i32);
    assert_eq!(message_from(out), m);
    for p in parts() {
        assert_eq!(part_from(part(p.clone())), p);
    }
}

#[test]
fn parts_take_the_0_3_shapes() {
    use proto::file_part::File;
    use proto::part::Part as P;
    let out: Vec<_> = parts().into_iter().map(part).collect();
    assert_eq!(out[0].part, Some(P::Text("hello".into())));
    assert_eq!(out[0].metadata, meta("k", "v"));
    assert_eq!(
        out[1].part,
        Some(P::File(proto::FilePart {
            file: Some(File::FileWithBytes(vec![0, 1, 2, 255])),
            mime_type: "image/png".into(),
            name: "a.png".into(),
        }))
    );
    assert!(matches!(
        &out[2].part,
        Some(P::File(proto::FilePart { file: Some(File::FileWithUri(u)), .. }))
            if u == "https://example.com/doc.pdf"
    ));
    assert_eq!(
        out[3].part,
        Some(P::Data(proto::DataPart {
            data: Some(object("n", 5.0))
        }))
    );
}

#[test]
fn data_that_is_not_an_object_is_wrapped() {
    let p = part_of(Content::Data(Value {
        kind: Some(value::Kind::NumberValue(7.0)),
    }));
    let Some(proto::part::Part::Data(d)) = part(p).part else {
        panic!("a data part");
    };
    assert_eq!(d.data, Some(object("value", 7.0)));
}

#[test]
fn tasks_and_artifacts_round_trip() {
    let a = artifact_1_0();
    assert_eq!(artifact_from(artifact(a.clone())), a);
    for state in [
        v1::TaskState::Submitted,
        v1::TaskState::Working,
        v1::TaskState::InputRequired,
        v1::TaskState::Canceled,
    ] {
        let t = task_1_0(state);
        assert_eq!(task_from(task(t.clone())), t);
    }
    // The status message travels in 0.3's `update` field.
    let out = status(status_1_0(v1::TaskState::Working));
    assert_eq!(out.update.unwrap().message_id, "m-1");
}

#[test]
fn artifact_field_numbers_are_the_0_3_ones() {
    // 1.0 numbers name 2 / description 3 / parts 4; 0.3 name 3 / description 4 / parts 5.
    let bytes = artifact(artifact_1_0()).encode_to_vec();
    let field = |tag: u8, text: &str| {
        let mut f = vec![(tag << 3) | 2, text.len() as u8];
        f.extend_from_slice(text.as_bytes());
        f
    };
    let has = |f: Vec<u8>| bytes.windows(f.len()).any(|w| w == f.as_slice());
    assert!(has(field(3, "result")), "name is field 3");
    assert!(has(field(4, "the result")), "description is field 4");
}

#[test]
fn enum_names_are_the_0_3_spellings_with_the_same_numbers() {
    let cancelled = task(task_1_0(v1::TaskState::Canceled))
        .status
        .unwrap()
        .state;
    assert_eq!(
        proto::TaskState::try_from(cancelled).unwrap().as_str_name(),
        "TASK_STATE_CANCELLED"
    );
    for (one, three) in [
        (v1::TaskState::Submitted, "TASK_STATE_SUBMITTED"),
        (v1::TaskState::Working, "TASK_STATE_WORKING"),
        (v1::TaskState::Completed, "TASK_STATE_COMPLETED"),
        (v1::TaskState::Failed, "TASK_STATE_FAILED"),
        (v1::TaskState::InputRequired, "TASK_STATE_INPUT_REQUIRED"),
        (v1::TaskState::Rejected, "TASK_STATE_REJECTED"),
        (v1::TaskState::AuthRequired, "TASK_STATE_AUTH_REQUIRED"),
    ] {
        let out = status(status_1_0(one)).state;
        assert_eq!(
            proto::TaskState::try_from(out).unwrap().as_str_name(),
            three
        );
    }
    assert_eq!(proto::Role::Agent as i32, v1::Role::Agent as i32);
    assert_eq!(proto::Role::User as i32, v1::Role::User as i32);
}

fn status_event(state: v1::TaskState) -> v1::StreamResponse {
    v1::StreamResponse {
        payload: Some(Payload::StatusUpdate(v1::TaskStatusUpdateEvent {
            task_id: "t-1".into(),
            context_id: "ctx-1".into(),
            status: Some(status_1_0(state)),
            metadata: meta("e", "1"),
        })),
    }
}

#[test]
fn status_updates_are_final_when_the_interaction_ends() {
    use proto::stream_response::Payload as P;
    for (state, expected) in [
        (v1::TaskState::Submitted, false),
        (v1::TaskState::Working, false),
        (v1::TaskState::Completed, true),
        (v1::TaskState::Failed, true),
        (v1::TaskState::Canceled, true),
        (v1::TaskState::Rejected, true),
        (v1::TaskState::InputRequired, true),
        (v1::TaskState::AuthRequired, true),
    ] {
        let ev = status_event(state);
        let out = stream_response(ev.clone());
        let Some(P::StatusUpdate(s)) = &out.payload else {
            panic!("a status update");
        };
        assert_eq!(s.r#final, expected, "{state:?}");
        assert_eq!(stream_response_from(out), ev);
    }
}

#[test]
fn stream_events_round_trip() {
    let events = [
        v1::StreamResponse {
            payload: Some(Payload::Task(task_1_0(v1::TaskState::Submitted))),
        },
        v1::StreamResponse {
            payload: Some(Payload::Message(message_1_0(v1::Role::Agent))),
        },
        v1::StreamResponse {
            payload: Some(Payload::ArtifactUpdate(v1::TaskArtifactUpdateEvent {
                task_id: "t-1".into(),
                context_id: "ctx-1".into(),
                artifact: Some(artifact_1_0()),
                append: true,
                last_chunk: true,
                metadata: meta("c", "d"),
            })),
        },
    ];
    for ev in events {
        assert_eq!(stream_response_from(stream_response(ev.clone())), ev);
    }
    let sent = send_response(v1::SendMessageResponse {
        payload: Some(v1::send_message_response::Payload::Message(message_1_0(
            v1::Role::Agent,
        ))),
    });
    assert!(matches!(
        sent.payload,
        Some(proto::send_message_response::Payload::Msg(_))
    ));
}

fn push_1_0() -> v1::TaskPushNotificationConfig {
    v1::TaskPushNotificationConfig {
        tenant: String::new(),
        id: "cfg-1".into(),
        task_id: "t-1".into(),
        url: "https://hooks.example.com/a2a".into(),
        token: "tok".into(),
        authentication: Some(v1::AuthenticationInfo {
            scheme: "Bearer".into(),
            credentials: "secret".into(),
        }),
    }
}

#[test]
fn push_configs_round_trip_with_resource_names() {
    let c = push_1_0();
    let out = push_config(c.clone());
    assert_eq!(out.name, "tasks/t-1/pushNotificationConfigs/cfg-1");
    let body = out.push_notification_config.clone().unwrap();
    assert_eq!(body.authentication.unwrap().schemes, ["Bearer"]);
    assert_eq!(push_config_from(out.clone()).unwrap(), c);

    // Create: the task from `parent`, the id from `configId`.
    let created = create_push_request(proto::CreateTaskPushNotificationConfigRequest {
        parent: "tasks/t-1".into(),
        config_id: "cfg-1".into(),
        config: Some(out),
    })
    .unwrap();
    assert_eq!(created, c);
    // Without any id the config is named after its task (0.3's default).
    let unnamed = create_push_request(proto::CreateTaskPushNotificationConfigRequest {
        parent: "tasks/t-2".into(),
        config_id: String::new(),
        config: Some(proto::TaskPushNotificationConfig {
            name: String::new(),
            push_notification_config: Some(proto::PushNotificationConfig {
                url: "https://hooks.example.com/x".into(),
                ..Default::default()
            }),
        }),
    })
    .unwrap();
    assert_eq!(
        (unnamed.task_id.as_str(), unnamed.id.as_str()),
        ("t-2", "t-2")
    );

    let got = get_push_request(proto::GetTaskPushNotificationConfigRequest {
        name: "tasks/t-1/pushNotificationConfigs/cfg-1".into(),
    })
    .unwrap();
    assert_eq!((got.task_id.as_str(), got.id.as_str()), ("t-1", "cfg-1"));
    let listed = list_push_response(v1::ListTaskPushNotificationConfigsResponse {
        configs: vec![push_1_0()],
        next_page_token: "next".into(),
    });
    assert_eq!(
        listed.configs[0].name,
        "tasks/t-1/pushNotificationConfigs/cfg-1"
    );
    assert_eq!(listed.next_page_token, "next");
}

#[test]
fn requests_name_their_resources() {
    assert_eq!(task_name("tasks/abc", "name").unwrap(), "abc");
    assert_eq!(task_name("abc", "name").unwrap(), "abc");
    for bad in ["", "tasks/", "tasks/a/b", "agents/x/y"] {
        let err = task_name(bad, "name").unwrap_err();
        assert_eq!(err.codes().reason, "INVALID_PARAMS", "{bad:?}");
    }
    for bad in [
        "tasks/t-1",
        "tasks/t-1/pushNotificationConfigs/",
        "tasks//pushNotificationConfigs/c",
        "t-1/pushNotificationConfigs/c",
    ] {
        assert!(push_config_name(bad).is_err(), "{bad:?}");
    }
    let get = get_task_request(proto::GetTaskRequest {
        name: "tasks/t-1".into(),
        history_length: 0,
    })
    .unwrap();
    assert_eq!((get.id.as_str(), get.history_length), ("t-1", None));
    let get = get_task_request(proto::GetTaskRequest {
        name: "tasks/t-1".into(),
        history_length: 2,
    })
    .unwrap();
    assert_eq!(get.history_length, Some(2));
}

#[test]
fn blocking_is_the_default_and_an_explicit_false_returns_at_once() {
    let send = |configuration| {
        send_request(proto::SendMessageRequest {
            request: Some(message(message_1_0(v1::Role::User))),
            configuration,
            metadata: meta("r", "1"),
        })
    };
    let plain = send(None);
    assert!(plain.configuration.is_none());
    assert_eq!(plain.message.unwrap(), message_1_0(v1::Role::User));
    assert_eq!(plain.metadata, meta("r", "1"));
    let blocking = send(Some(proto::SendMessageConfiguration {
        accepted_output_modes: vec!["text/plain".into()],
        push_notification: Some(proto::PushNotificationConfig {
            url: "https://hooks.example.com/a2a".into(),
            ..Default::default()
        }),
        history_length: 0,
        blocking: true,
    }))
    .configuration
    .unwrap();
    assert!(!blocking.return_immediately);
    assert_eq!(blocking.history_length, None);
    assert_eq!(
        blocking.task_push_notification_config.unwrap().url,
        "https://hooks.example.com/a2a"
    );
    let immediate = send(Some(proto::SendMessageConfiguration {
        history_length: 3,
        ..Default::default()
    }))
    .configuration
    .unwrap();
    assert!(immediate.return_immediately);
    assert_eq!(immediate.history_length, Some(3));
}

#[test]
fn the_card_speaks_0_3() {
    let card = v1::AgentCard {
        name: "gw".into(),
        description: "d".into(),
        supported_interfaces: vec![
            v1::AgentInterface {
                url: "https://gw.example.com/".into(),
                protocol_binding: "JSONRPC".into(),
                tenant: String::new(),
                protocol_version: "1.0".into(),
            },
            v1::AgentInterface {
                url: "https://gw.example.com/".into(),
                protocol_binding: "GRPC".into(),
                tenant: String::new(),
                protocol_version: "1.0".into(),
            },
            v1::AgentInterface {
                url: "https://gw.example.com/".into(),
                protocol_binding: "GRPC".into(),
                tenant: String::new(),
                protocol_version: "0.3".into(),
            },
        ],
        version: "1.2.3".into(),
        documentation_url: Some("https://docs.example.com".into()),
        capabilities: Some(v1::AgentCapabilities {
            streaming: Some(true),
            push_notifications: Some(false),
            extensions: vec![v1::AgentExtension {
                uri: "https://example.com/ext".into(),
                required: true,
                ..Default::default()
            }],
            extended_agent_card: Some(true),
        }),
        security_schemes: [(
            "key".to_owned(),
            v1::SecurityScheme {
                scheme: Some(v1::security_scheme::Scheme::ApiKeySecurityScheme(
                    v1::ApiKeySecurityScheme {
                        description: String::new(),
                        location: "header".into(),
                        name: "x-api-key".into(),
                    },
                )),
            },
        )]
        .into(),
        skills: vec![v1::AgentSkill {
            id: "echo".into(),
            name: "Echo".into(),
            description: "echoes".into(),
            tags: vec!["t".into()],
            ..Default::default()
        }],
        default_input_modes: vec!["text/plain".into()],
        default_output_modes: vec!["text/plain".into()],
        signatures: vec![v1::AgentCardSignature {
            protected: "p".into(),
            signature: "s".into(),
            header: None,
        }],
        ..Default::default()
    };
    let out = super::card(card);
    assert_eq!(out.protocol_version, "0.3.0");
    assert_eq!(
        (out.url.as_str(), out.preferred_transport.as_str()),
        ("https://gw.example.com/", "GRPC")
    );
    let transports: Vec<_> = out
        .additional_interfaces
        .iter()
        .map(|i| i.transport.as_str())
        .collect();
    assert_eq!(transports, ["JSONRPC", "GRPC"]);
    assert!(out.supports_authenticated_extended_card);
    let caps = out.capabilities.unwrap();
    assert!(caps.streaming && !caps.push_notifications);
    assert_eq!(caps.extensions[0].uri, "https://example.com/ext");
    assert!(caps.extensions[0].required);
    let Some(proto::security_scheme::Scheme::ApiKeySecurityScheme(k)) =
        &out.security_schemes["key"].scheme
    else {
        panic!("the API key scheme");
    };
    assert_eq!(
        (k.location.as_str(), k.name.as_str()),
        ("header", "x-api-key")
    );
    assert_eq!(out.skills[0].tags, ["t"]);
    assert_eq!(out.documentation_url, "https://docs.example.com");
    assert!(out.signatures.is_empty());
}
