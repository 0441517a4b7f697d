//! Query parameters of the REST GETs, decoded into the canonical request type. The parameters
//! of an operation are turned into the ProtoJSON object they stand for (`pageSize=5` →
//! `{"pageSize":5}`) and decoded like a JSON body, so every rule of the JSON form (enums by name
//! or number, RFC 3339 timestamps) applies and an error names the parameter. Parameters an
//! operation does not define (`A2A-Version`, ...) are ignored.

use a2a_types::A2aError;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::bindings::decode;

/// How a parameter's text becomes JSON.
#[derive(Debug, Clone, Copy)]
pub enum Kind {
    /// Strings and timestamps: the text as is.
    Text,
    /// Decimal integers.
    Int,
    /// `true` or `false`.
    Bool,
    /// An enum by name (`TASK_STATE_WORKING`) or by number.
    Enum,
}

pub const GET_TASK: &[(&str, Kind)] = &[("historyLength", Kind::Int)];

pub const LIST_TASKS: &[(&str, Kind)] = &[
    ("contextId", Kind::Text),
    ("status", Kind::Enum),
    ("pageSize", Kind::Int),
    ("pageToken", Kind::Text),
    ("historyLength", Kind::Int),
    ("statusTimestampAfter", Kind::Text),
    ("includeArtifacts", Kind::Bool),
];

pub const LIST_PUSH_CONFIGS: &[(&str, Kind)] =
    &[("pageSize", Kind::Int), ("pageToken", Kind::Text)];

/// Decodes the parameters `params` defines from `query` into `T` (the last value of a repeated
/// parameter wins).
pub fn parse<T: DeserializeOwned>(
    query: Option<&str>,
    params: &[(&str, Kind)],
) -> Result<T, A2aError> {
    let mut object = Map::new();
    for (key, text) in url::form_urlencoded::parse(query.unwrap_or_default().as_bytes()) {
        let Some(&(name, kind)) = params.iter().find(|(name, _)| *name == key) else {
            continue;
        };
        object.insert(name.to_owned(), value(name, kind, &text)?);
    }
    let json = Value::Object(object).to_string();
    decode::json(&json, "query")
}

fn value(name: &str, kind: Kind, text: &str) -> Result<Value, A2aError> {
    Ok(match kind {
        Kind::Text => Value::from(text),
        Kind::Int => Value::from(
            text.parse::<i64>()
                .map_err(|_| A2aError::invalid_params(name, "must be a decimal integer"))?,
        ),
        Kind::Bool => match text {
            "true" => Value::Bool(true),
            "false" => Value::Bool(false),
            _ => return Err(A2aError::invalid_params(name, "must be true or false")),
        },
        Kind::Enum => match text.parse::<i64>() {
            Ok(n) => Value::from(n),
            Err(_) => Value::from(text),
        },
    })
}

#[cfg(test)]
mod tests {
    use a2a_types::v1::{ListTasksRequest, TaskState};

    use super::*;

    fn field(err: A2aError) -> String {
        match err {
            A2aError::InvalidParams { field, .. } => field,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn list_tasks_parameters() {
        let req: ListTasksRequest = parse(
            Some(
                "contextId=c%201&status=TASK_STATE_WORKING&pageSize=5&pageToken=abc&historyLength=0\
                 &statusTimestampAfter=2026-01-01T00%3A00%3A00Z&includeArtifacts=true&A2A-Version=1.0",
            ),
            LIST_TASKS,
        )
        .unwrap();
        assert_eq!(req.context_id, "c 1");
        assert_eq!(req.status, TaskState::Working as i32);
        assert_eq!(req.page_size, Some(5));
        assert_eq!(req.page_token, "abc");
        assert_eq!(req.history_length, Some(0));
        assert_eq!(req.include_artifacts, Some(true));
        assert_eq!(
            req.status_timestamp_after.unwrap().to_string(),
            "2026-01-01T00:00:00.000Z"
        );
        let by_number: ListTasksRequest = parse(Some("status=3"), LIST_TASKS).unwrap();
        assert_eq!(by_number.status, 3);
        let none: ListTasksRequest = parse(None, LIST_TASKS).unwrap();
        assert_eq!(none, ListTasksRequest::default());
    }

    #[test]
    fn errors_name_the_parameter() {
        for (query, name) in [
            ("status=TASK_STATE_BOGUS", "status"),
            ("status=99", "status"),
            ("pageSize=ten", "pageSize"),
            ("includeArtifacts=yes", "includeArtifacts"),
            ("statusTimestampAfter=yesterday", "statusTimestampAfter"),
            ("historyLength=99999999999", "historyLength"),
        ] {
            let err = parse::<ListTasksRequest>(Some(query), LIST_TASKS).unwrap_err();
            assert_eq!(field(err), name, "{query}");
        }
    }
}
