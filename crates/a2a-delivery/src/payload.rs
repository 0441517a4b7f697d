//! What a webhook receives, by the dialect its config was registered in: a 1.0 webhook the
//! event (its StreamResponse), a 0.3 one the Task as it is after the event, in the 0.3 shape.
//! The pipeline and the worker's dead-letter replay both build payloads here.
//!
//! Building a 1.0 payload can fail: an event whose JSON form does not exist (a non-finite
//! number in a `Struct`, from an old row or an upstream) cannot be sent. That is an error the
//! caller dead-letters with its reason, never an empty body or a panic (review H3). The 0.3
//! shape prints such a number as null, as the 0.3 bindings serve the task.

use std::collections::{HashMap, HashSet};
use std::panic::{AssertUnwindSafe, catch_unwind};

use a2a_types::state::apply_event;
use a2a_types::v1::{StreamResponse, Task};
use a2a_types::v03;
use bytes::Bytes;

/// A 1.0 webhook's body: the event's ProtoJSON.
pub fn event_body(event: &StreamResponse) -> Result<Bytes, String> {
    serde_json::to_vec(event)
        .map(Bytes::from)
        .map_err(|e| format!("the event cannot be serialised: {e}"))
}

/// A 0.3 webhook's body: `task` in the 0.3 shape.
pub fn task_body_v03(task: &Task) -> Result<Bytes, String> {
    // The 0.3 translation may panic on a value the 1.0 serialiser refuses; caught here, so one
    // task's event is a dead letter, not a dead runner.
    let shaped = catch_unwind(AssertUnwindSafe(|| v03::serve::task(task)))
        .map_err(|_| "the task cannot be translated to 0.3".to_owned())?;
    serde_json::to_vec(&shaped)
        .map(Bytes::from)
        .map_err(|e| format!("the task cannot be serialised: {e}"))
}

/// The task as it is after each sequence number of `wanted`, folded from the task's event log
/// `log` read from its start (the log starts with the Task itself, sequence number 1).
pub fn snapshots(log: &[(u64, StreamResponse)], wanted: &HashSet<u64>) -> HashMap<u64, Task> {
    let mut task = Task::default();
    let mut out = HashMap::new();
    for (seq, event) in log {
        apply_event(&mut task, event);
        if wanted.contains(seq) {
            out.insert(*seq, task.clone());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use a2a_types::v1::stream_response::Payload;

    fn with_number(n: f64) -> StreamResponse {
        let mut task = Task {
            id: "t".into(),
            ..Default::default()
        };
        let mut fields = std::collections::BTreeMap::new();
        fields.insert(
            "x".to_owned(),
            a2a_types::wkt::Value {
                kind: Some(a2a_types::wkt::value::Kind::NumberValue(n)),
            },
        );
        task.metadata = Some(a2a_types::wkt::Struct { fields });
        StreamResponse {
            payload: Some(Payload::Task(task)),
        }
    }

    /// A non-finite number is an error with its reason, not an empty body (review H3).
    #[test]
    fn an_event_that_cannot_be_serialised_is_an_error() {
        assert!(event_body(&with_number(1.5)).is_ok());
        let err = event_body(&with_number(f64::NAN)).unwrap_err();
        assert!(err.contains("cannot be serialised"), "{err}");
        let Some(Payload::Task(task)) = with_number(f64::INFINITY).payload else {
            unreachable!()
        };
        // The 0.3 shape prints a stored non-finite number as null, as the 0.3 bindings serve
        // it (a task an earlier release stored stays deliverable to a 0.3 webhook).
        let body = task_body_v03(&task).unwrap();
        let json: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(json["metadata"]["x"], serde_json::Value::Null, "{json}");
    }
}
