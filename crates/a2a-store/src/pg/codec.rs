//! How a task lives in the tables: the format envelope of the stored bytes, the task row's
//! columns, and the write plan that turns "snapshot before" and "snapshot after" into row changes.
//!
//! The snapshot after an event is computed in Rust with `a2a_types::state` (the same functions the
//! in-memory store uses); this module only works out which rows differ, so the two stores cannot
//! disagree on what an event does.

use a2a_types::state::state_of;
use a2a_types::v1::{Artifact, Message, Part, Task};
use prost::Message as _;

use crate::{StoreError, StoreResult};

/// Format 1: a protobuf encoding of the canonical lf.a2a.v1 message. Two encodings of the same
/// message type concatenated decode as the merge of both, which is how artifact chunks append.
const FORMAT_PROTOBUF: u8 = 1;

/// `FORMAT_PROTOBUF` followed by the encoding of `m`.
pub(super) fn encode<M: prost::Message>(m: &M) -> Vec<u8> {
    let mut buf = Vec::with_capacity(1 + m.encoded_len());
    buf.push(FORMAT_PROTOBUF);
    m.encode_raw(&mut buf);
    buf
}

/// Decodes a stored value, refusing formats this build does not know.
pub(super) fn decode<M: prost::Message + Default>(bytes: &[u8], what: &str) -> StoreResult<M> {
    match bytes.split_first() {
        Some((&FORMAT_PROTOBUF, body)) => M::decode(body)
            .map_err(|e| StoreError::Internal(format!("stored {what} does not decode: {e}"))),
        Some((format, _)) => Err(StoreError::Internal(format!(
            "stored {what} has format {format}, unknown to this build"
        ))),
        None => Err(StoreError::Internal(format!("stored {what} is empty"))),
    }
}

/// The columns of a task row that follow from its snapshot.
#[derive(Debug, Clone)]
pub(super) struct TaskRow {
    pub state: i16,
    pub status_ms: i64,
    /// The snapshot without history and artifacts (those have rows of their own).
    pub snapshot: Vec<u8>,
    pub history_len: i32,
    pub artifacts_len: i32,
    /// [`crate::stored_bytes`] of the task.
    pub bytes: i64,
}

impl TaskRow {
    pub fn of(task: &Task) -> Self {
        let core = Task {
            id: task.id.clone(),
            context_id: task.context_id.clone(),
            status: task.status.clone(),
            artifacts: Vec::new(),
            history: Vec::new(),
            metadata: task.metadata.clone(),
        };
        Self {
            state: state_of(task) as i16,
            status_ms: status_millis(task),
            snapshot: encode(&core),
            history_len: len_i32(task.history.len()),
            artifacts_len: len_i32(task.artifacts.len()),
            bytes: i64::try_from(crate::stored_bytes(task)).unwrap_or(i64::MAX),
        }
    }
}

/// The ListTasks sort key; 0 when the status has no timestamp (as in the in-memory store).
pub(super) fn status_millis(task: &Task) -> i64 {
    task.status
        .as_ref()
        .and_then(|s| s.timestamp)
        .map_or(0, |t| t.as_millis())
}

fn len_i32(n: usize) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

/// The row changes that turn the stored `old` snapshot into `new`.
#[derive(Debug, Default)]
pub(super) struct Plan {
    /// History rows to insert or overwrite: (position, message).
    pub history: Vec<(i32, Vec<u8>)>,
    /// History rows at positions >= the new length must go (only a Task event shortens history).
    pub history_cut: bool,
    /// Artifact rows to insert or overwrite: (position, artifact id, artifact).
    pub artifacts: Vec<(i32, String, Vec<u8>)>,
    /// Chunks appended to an existing artifact row: (position, encoding of `Artifact { parts }`
    /// without the envelope, concatenated to the stored bytes in SQL).
    pub chunks: Vec<(i32, Vec<u8>)>,
    /// Artifact rows at positions >= the new length must go.
    pub artifacts_cut: bool,
}

impl Plan {
    pub fn diff(old: &Task, new: &Task) -> Self {
        let mut plan = Plan::default();
        let same = old
            .history
            .iter()
            .zip(&new.history)
            .take_while(|(a, b)| a == b)
            .count();
        plan.history = new.history[same..]
            .iter()
            .enumerate()
            .map(|(i, m): (usize, &Message)| (len_i32(same + i), encode(m)))
            .collect();
        plan.history_cut = new.history.len() < old.history.len();
        for (i, artifact) in new.artifacts.iter().enumerate() {
            let position = len_i32(i);
            match old.artifacts.get(i) {
                Some(before) if before == artifact => {}
                Some(before) => match appended_parts(before, artifact) {
                    Some(parts) => {
                        let delta = Artifact {
                            parts: parts.to_vec(),
                            ..Default::default()
                        };
                        plan.chunks.push((position, delta.encode_to_vec()));
                    }
                    None => plan.artifacts.push((
                        position,
                        artifact.artifact_id.clone(),
                        encode(artifact),
                    )),
                },
                None => {
                    plan.artifacts
                        .push((position, artifact.artifact_id.clone(), encode(artifact)))
                }
            }
        }
        plan.artifacts_cut = new.artifacts.len() < old.artifacts.len();
        plan
    }
}

/// The parts `new` adds at the end of `old` when nothing else differs (a chunk append).
fn appended_parts<'a>(old: &Artifact, new: &'a Artifact) -> Option<&'a [Part]> {
    // Exhaustive on purpose: a new Artifact field must be considered here.
    let Artifact {
        artifact_id,
        name,
        description,
        parts,
        metadata,
        extensions,
    } = new;
    let n = old.parts.len();
    let appends = parts.len() > n
        && *artifact_id == old.artifact_id
        && *name == old.name
        && *description == old.description
        && *metadata == old.metadata
        && *extensions == old.extensions
        && parts[..n] == old.parts[..];
    appends.then(|| &parts[n..])
}

#[cfg(test)]
mod tests {
    use super::*;
    use a2a_types::v1::part::Content;

    fn part(s: &str) -> Part {
        Part {
            content: Some(Content::Text(s.into())),
            ..Default::default()
        }
    }

    #[test]
    fn envelope_round_trips_and_rejects_unknown_formats() {
        let m = Message {
            message_id: "m".into(),
            ..Default::default()
        };
        let bytes = encode(&m);
        assert_eq!(bytes[0], FORMAT_PROTOBUF);
        assert_eq!(decode::<Message>(&bytes, "message").unwrap(), m);
        let mut future = bytes.clone();
        future[0] = 9;
        assert!(decode::<Message>(&future, "message").is_err());
    }

    #[test]
    fn a_chunk_is_an_appendable_delta() {
        let a = Artifact {
            artifact_id: "a".into(),
            name: "n".into(),
            parts: vec![part("1")],
            ..Default::default()
        };
        let b = Artifact {
            parts: vec![part("1"), part("2"), part("3")],
            ..a.clone()
        };
        let old = Task {
            artifacts: vec![a.clone()],
            ..Default::default()
        };
        let new = Task {
            artifacts: vec![b.clone()],
            ..Default::default()
        };
        let plan = Plan::diff(&old, &new);
        assert!(plan.artifacts.is_empty());
        let (position, delta) = &plan.chunks[0];
        assert_eq!(*position, 0);
        // What SQL does: stored bytes || delta.
        let mut stored = encode(&a);
        stored.extend_from_slice(delta);
        assert_eq!(decode::<Artifact>(&stored, "artifact").unwrap(), b);
        // A changed name is a replacement, not a chunk.
        let renamed = Task {
            artifacts: vec![Artifact {
                name: "other".into(),
                ..b
            }],
            ..Default::default()
        };
        let plan = Plan::diff(&old, &renamed);
        assert_eq!((plan.chunks.len(), plan.artifacts.len()), (0, 1));
    }

    #[test]
    fn history_diff_appends_or_rewrites() {
        let msg = |id: &str| Message {
            message_id: id.into(),
            ..Default::default()
        };
        let old = Task {
            history: vec![msg("a"), msg("b")],
            ..Default::default()
        };
        let grown = Task {
            history: vec![msg("a"), msg("b"), msg("c")],
            ..Default::default()
        };
        let plan = Plan::diff(&old, &grown);
        assert_eq!(plan.history.len(), 1);
        assert_eq!(plan.history[0].0, 2);
        assert!(!plan.history_cut);
        let replaced = Task {
            history: vec![msg("x")],
            ..Default::default()
        };
        let plan = Plan::diff(&old, &replaced);
        assert_eq!(plan.history[0].0, 0);
        assert!(plan.history_cut);
    }
}
