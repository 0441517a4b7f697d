//! Decoding JSON into a canonical request type, shared by the JSON bindings: every failure is an
//! [`A2aError`] that names the offending field.

use a2a_types::A2aError;
use serde::de::DeserializeOwned;

/// Decodes `json` into `T`. Malformed JSON is [`A2aError::Parse`]; JSON that does not match `T`
/// is [`A2aError::InvalidParams`] naming the field by its path (`message.role`), or `root` when
/// the value as a whole is wrong.
pub fn json<T: DeserializeOwned>(json: &str, root: &str) -> Result<T, A2aError> {
    // The fast path: plain serde_json. Path tracking costs on every field, so it only runs
    // again to explain a failure.
    if let Ok(value) = serde_json::from_str(json) {
        return Ok(value);
    }
    let mut de = serde_json::Deserializer::from_str(json);
    let value = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        if inner.is_syntax() || inner.is_eof() {
            return A2aError::Parse(inner.to_string());
        }
        let field = if path == "." { root.to_owned() } else { path };
        A2aError::invalid_params(field, inner.to_string())
    })?;
    // Trailing characters after the value are a syntax error, as in `serde_json::from_str`.
    de.end().map_err(|e| A2aError::Parse(e.to_string()))?;
    Ok(value)
}

#[cfg(test)]
mod tests {
    use a2a_types::v1::{GetTaskRequest, SendMessageRequest};

    use super::*;

    #[test]
    fn errors_name_the_field_or_the_root() {
        match json::<SendMessageRequest>(
            r#"{"message":{"messageId":"m","role":"ROLE_ROBOT","parts":[]}}"#,
            "params",
        ) {
            Err(A2aError::InvalidParams { field, .. }) => assert_eq!(field, "message.role"),
            other => panic!("{other:?}"),
        }
        match json::<GetTaskRequest>("[]", "body") {
            Err(A2aError::InvalidParams { field, .. }) => assert_eq!(field, "body"),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            json::<GetTaskRequest>("{oops", "body"),
            Err(A2aError::Parse(_))
        ));
        assert!(matches!(
            json::<GetTaskRequest>("{} x", "body"),
            Err(A2aError::Parse(_))
        ));
        let req: GetTaskRequest = json(r#"{"id":"t"}"#, "body").unwrap();
        assert_eq!(req.id, "t");
    }
}
