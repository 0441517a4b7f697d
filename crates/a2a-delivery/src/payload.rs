//! What a webhook receives, by the dialect its config was registered in: a 1.0 webhook the
//! event (its StreamResponse), a 0.3 one the Task as it is after the event, in the 0.3 shape.
//! The pipeline and the worker's dead-letter replay both build payloads here.

use std::collections::{HashMap, HashSet};

use a2a_types::state::apply_event;
use a2a_types::v1::{StreamResponse, Task};
use a2a_types::v03;
use bytes::Bytes;

/// A 1.0 webhook's body: the event's ProtoJSON.
pub fn event_body(event: &StreamResponse) -> Bytes {
    Bytes::from(serde_json::to_vec(event).unwrap_or_default())
}

/// A 0.3 webhook's body: `task` in the 0.3 shape.
pub fn task_body_v03(task: &Task) -> Bytes {
    Bytes::from(serde_json::to_vec(&v03::serve::task(task)).unwrap_or_default())
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
