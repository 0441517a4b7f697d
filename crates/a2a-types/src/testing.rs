//! proptest strategies for the wire model (feature `testing`): arbitrary tasks and messages
//! for the property tests here and in the gateway (ProtoJSON round trips, binding
//! equivalence).
//!
//! The generated values are the ones the JSON form can carry exactly: timestamps with
//! millisecond precision (the form prints milliseconds) in years 1 to 9999 (RFC 3339), and
//! numbers that are integers or short binary fractions (a decimal float printed and re-parsed
//! may differ in the last bit without serde_json's `float_roundtrip`).

use proptest::collection::{btree_map, vec};
use proptest::option;
use proptest::prelude::*;

use crate::v1::{Artifact, Message, Part, Role, Task, TaskState, TaskStatus, part::Content};
use crate::wkt::{ListValue, Struct, Timestamp, Value, value::Kind};

/// Short strings of any characters (also quotes, escapes, astral-plane characters).
fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => "[a-zA-Z0-9_.-]{0,12}",
        1 => any::<String>().prop_map(|s| s.chars().take(16).collect()),
    ]
}

fn number() -> impl Strategy<Value = f64> {
    prop_oneof![
        (-(1i64 << 53)..(1i64 << 53)).prop_map(|n| n as f64),
        (-1_000_000i32..1_000_000, 0u32..8).prop_map(|(n, e)| f64::from(n) / f64::from(1u32 << e)),
    ]
}

/// A `google.protobuf.Value` (the `data` of a part, metadata values), nested a few levels.
pub fn value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Kind::NullValue(0)),
        number().prop_map(Kind::NumberValue),
        text().prop_map(Kind::StringValue),
        any::<bool>().prop_map(Kind::BoolValue),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            vec(inner.clone(), 0..4).prop_map(|values| Kind::ListValue(ListValue {
                values: values
                    .into_iter()
                    .map(|k| Value { kind: Some(k) })
                    .collect(),
            })),
            btree_map(text(), inner, 0..4).prop_map(|fields| Kind::StructValue(Struct {
                fields: fields
                    .into_iter()
                    .map(|(k, v)| (k, Value { kind: Some(v) }))
                    .collect(),
            })),
        ]
    })
    .prop_map(|kind| Value { kind: Some(kind) })
}

pub fn metadata() -> impl Strategy<Value = Option<Struct>> {
    option::of(btree_map(text(), value(), 0..3).prop_map(|fields| Struct { fields }))
}

pub fn timestamp() -> impl Strategy<Value = Timestamp> {
    // 0001-01-01T00:00:00Z to 9999-12-31T23:59:59Z.
    (-62_135_596_800i64..253_402_300_799, 0i32..1000).prop_map(|(seconds, ms)| Timestamp {
        seconds,
        nanos: ms * 1_000_000,
    })
}

pub fn part() -> impl Strategy<Value = Part> {
    let content = prop_oneof![
        text().prop_map(Content::Text),
        vec(any::<u8>(), 0..16).prop_map(Content::Raw),
        "https://[a-z]{1,8}\\.example/[a-z]{0,8}".prop_map(Content::Url),
        value().prop_map(Content::Data),
    ];
    (option::of(content), text(), text(), metadata()).prop_map(
        |(content, filename, media_type, metadata)| Part {
            content,
            filename,
            media_type,
            metadata,
        },
    )
}

pub fn message() -> impl Strategy<Value = Message> {
    (
        (text(), text(), text()),
        prop_oneof![Just(Role::User), Just(Role::Agent), Just(Role::Unspecified)],
        vec(part(), 0..4),
        metadata(),
        vec(text(), 0..3),
        vec(text(), 0..3),
    )
        .prop_map(
            |((message_id, context_id, task_id), role, parts, metadata, extensions, refs)| {
                Message {
                    message_id,
                    context_id,
                    task_id,
                    role: role as i32,
                    parts,
                    metadata,
                    extensions,
                    reference_task_ids: refs,
                }
            },
        )
}

pub fn state() -> impl Strategy<Value = TaskState> {
    (0i32..=8).prop_map(|n| TaskState::try_from(n).expect("0..=8 are states"))
}

pub fn artifact() -> impl Strategy<Value = Artifact> {
    (
        (text(), text(), text()),
        vec(part(), 0..3),
        metadata(),
        vec(text(), 0..2),
    )
        .prop_map(
            |((artifact_id, name, description), parts, metadata, extensions)| Artifact {
                artifact_id,
                name,
                description,
                parts,
                metadata,
                extensions,
            },
        )
}

pub fn task() -> impl Strategy<Value = Task> {
    let status = (state(), option::of(message()), option::of(timestamp())).prop_map(
        |(state, message, timestamp)| TaskStatus {
            state: state as i32,
            message,
            timestamp,
        },
    );
    (
        (text(), text()),
        option::of(status),
        vec(artifact(), 0..3),
        vec(message(), 0..3),
        metadata(),
    )
        .prop_map(
            |((id, context_id), status, artifacts, history, metadata)| Task {
                id,
                context_id,
                status,
                artifacts,
                history,
                metadata,
            },
        )
}
