//! The ListTasks keyset cursor: the (status timestamp, id) of the last task of a page, encoded
//! as URL-safe base64 so clients treat it as opaque.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

use crate::StoreError;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cursor {
    pub status_millis: i64,
    pub task_id: String,
}

impl Cursor {
    const VERSION: &'static str = "v1";

    pub fn encode(&self) -> String {
        URL_SAFE_NO_PAD.encode(format!(
            "{}:{}:{}",
            Self::VERSION,
            self.status_millis,
            self.task_id
        ))
    }

    pub fn decode(token: &str) -> Result<Self, StoreError> {
        let raw = URL_SAFE_NO_PAD
            .decode(token)
            .map_err(|_| StoreError::InvalidPageToken)?;
        let raw = String::from_utf8(raw).map_err(|_| StoreError::InvalidPageToken)?;
        let mut parts = raw.splitn(3, ':');
        match (parts.next(), parts.next(), parts.next()) {
            (Some(Self::VERSION), Some(ms), Some(id)) if !id.is_empty() => Ok(Self {
                status_millis: ms.parse().map_err(|_| StoreError::InvalidPageToken)?,
                task_id: id.to_owned(),
            }),
            _ => Err(StoreError::InvalidPageToken),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_rejects_garbage() {
        let c = Cursor {
            status_millis: 1_700_000_000_123,
            task_id: "0199-abc".into(),
        };
        assert_eq!(Cursor::decode(&c.encode()).unwrap(), c);
        assert!(Cursor::decode("not a cursor!").is_err());
        assert!(Cursor::decode(&URL_SAFE_NO_PAD.encode("v9:1:x")).is_err());
    }
}
