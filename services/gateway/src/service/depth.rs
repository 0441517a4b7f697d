//! How deeply a caller's `google.protobuf.Value`s may nest (README, Security: the edge). The
//! JSON decoders stop at 128 levels (serde_json), but a task is stored and published as
//! protobuf, which prost decodes to at most 100 nested messages, and each JSON level is two
//! (`Value`, then `ListValue` or `Struct`) below the task's own (`Task`, `Message`, `Part`). A
//! value accepted deeper than that would be stored and then never read again (GetTask failing,
//! the event dropped by every follower): so requests are refused at [`MAX_VALUE_DEPTH`] on every
//! binding, well inside both limits.

use a2a_types::A2aError;
use a2a_types::v1::{Artifact, Message, Part, part};
use a2a_types::wkt::{Struct, Value, value};

/// JSON levels a value may nest (an array or object inside another counts one more).
pub const MAX_VALUE_DEPTH: usize = 32;

/// The first field of `message` (its parts' data and metadata, its own metadata) or of the
/// request's `metadata` that nests deeper than [`MAX_VALUE_DEPTH`], as an invalid-params error.
pub fn check_request(message: &Message, metadata: Option<&Struct>) -> Result<(), A2aError> {
    let deep = |field: String| {
        A2aError::invalid_params(
            field,
            format!("nests values more than {MAX_VALUE_DEPTH} levels deep"),
        )
    };
    for (i, p) in message.parts.iter().enumerate() {
        if part_too_deep(p) {
            return Err(deep(format!("message.parts[{i}]")));
        }
    }
    if struct_too_deep(message.metadata.as_ref(), 0) {
        return Err(deep("message.metadata".into()));
    }
    if struct_too_deep(metadata, 0) {
        return Err(deep("metadata".into()));
    }
    Ok(())
}

/// Whether an agent's message or artifact nests deeper than [`MAX_VALUE_DEPTH`]: an upstream's
/// JSON may nest to serde_json's 128 levels, which the stored protobuf could not be read back
/// from, so the runner fails such a turn instead of storing it.
pub fn agent_event_too_deep(message: Option<&Message>, artifact: Option<&Artifact>) -> bool {
    let parts_deep = |parts: &[Part]| parts.iter().any(part_too_deep);
    message.is_some_and(|m| parts_deep(&m.parts) || struct_too_deep(m.metadata.as_ref(), 0))
        || artifact.is_some_and(|a| parts_deep(&a.parts) || struct_too_deep(a.metadata.as_ref(), 0))
}

fn part_too_deep(p: &Part) -> bool {
    let data = match &p.content {
        Some(part::Content::Data(v)) => too_deep(v, 0),
        _ => false,
    };
    data || struct_too_deep(p.metadata.as_ref(), 0)
}

/// A `Struct` is one level (an object); `depth` levels are above it. The values came from a
/// decoder that bounds nesting, so the recursion is bounded too.
fn struct_too_deep(s: Option<&Struct>, depth: usize) -> bool {
    let Some(s) = s else { return false };
    if depth + 1 > MAX_VALUE_DEPTH {
        return true;
    }
    s.fields.values().any(|v| too_deep(v, depth + 1))
}

fn too_deep(v: &Value, depth: usize) -> bool {
    match &v.kind {
        Some(value::Kind::StructValue(s)) => struct_too_deep(Some(s), depth),
        Some(value::Kind::ListValue(l)) => {
            depth + 1 > MAX_VALUE_DEPTH || l.values.iter().any(|v| too_deep(v, depth + 1))
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use a2a_types::wkt::ListValue;

    fn nested(levels: usize) -> Value {
        let mut v = Value {
            kind: Some(value::Kind::NumberValue(1.0)),
        };
        for i in 0..levels {
            v = if i % 2 == 0 {
                Value {
                    kind: Some(value::Kind::ListValue(ListValue { values: vec![v] })),
                }
            } else {
                let mut s = Struct::default();
                s.fields.insert("k".into(), v);
                Value {
                    kind: Some(value::Kind::StructValue(s)),
                }
            };
        }
        v
    }

    fn message(data: Value) -> Message {
        Message {
            parts: vec![Part {
                content: Some(part::Content::Data(data)),
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    #[test]
    fn values_nest_at_most_32_levels_in_data_and_metadata() {
        assert!(check_request(&message(nested(MAX_VALUE_DEPTH)), None).is_ok());
        let err = check_request(&message(nested(MAX_VALUE_DEPTH + 1)), None).unwrap_err();
        assert!(
            matches!(err, A2aError::InvalidParams { ref field, .. } if field == "message.parts[0]"),
            "{err:?}"
        );
        let mut meta = Struct::default();
        meta.fields.insert("deep".into(), nested(MAX_VALUE_DEPTH));
        let err = check_request(&message(nested(1)), Some(&meta)).unwrap_err();
        assert!(
            matches!(err, A2aError::InvalidParams { ref field, .. } if field == "metadata"),
            "{err:?}"
        );
        let mut ok = Struct::default();
        ok.fields
            .insert("shallow".into(), nested(MAX_VALUE_DEPTH - 1));
        assert!(check_request(&message(nested(1)), Some(&ok)).is_ok());
    }

    #[test]
    fn agent_events_nesting_too_deep_are_found() {
        let shallow = message(nested(MAX_VALUE_DEPTH));
        let deep = message(nested(MAX_VALUE_DEPTH + 1));
        assert!(!agent_event_too_deep(Some(&shallow), None));
        assert!(agent_event_too_deep(Some(&deep), None));
        let artifact = Artifact {
            parts: deep.parts.clone(),
            ..Default::default()
        };
        assert!(agent_event_too_deep(None, Some(&artifact)));
        assert!(!agent_event_too_deep(None, None));
    }
}
