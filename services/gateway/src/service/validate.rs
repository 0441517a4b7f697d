//! Edge validation shared by every operation: each failure names the offending field.

use a2a_push::AddressPolicy;
use a2a_types::v1::{
    Artifact, Message, Part, Role, SendMessageRequest, TaskPushNotificationConfig, part,
};
use a2a_types::wkt::{Struct, Timestamp};
use a2a_types::{A2aError, Dialect};

/// `A2A-Version` negotiation: which dialect a request speaks. `1.x` (`1.0`, `1.0.1`, `1.2`: patch
/// and minor numbers within major 1 are served as 1.0) is 1.0; `0.3` (`0.3.0`) is 0.3 where the
/// binding serves it (`dialects.v03`); a missing or empty value is `dialects.default`, the
/// dialect of the method name or path (spec: a missing header means 0.3; a 1.0 method name or
/// path can only mean 1.0, so that is how it is served). Anything else is VersionNotSupported.
pub fn negotiate_version(value: Option<&str>, dialects: Dialects) -> Result<Dialect, A2aError> {
    let Some(v) = value.map(str::trim).filter(|v| !v.is_empty()) else {
        return Ok(dialects.default);
    };
    let numeric = v
        .split('.')
        .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
    let mut parts = v.split('.');
    match (parts.next(), parts.next()) {
        (Some("1"), _) if numeric => Ok(Dialect::V1),
        (Some("0"), Some("3")) if numeric && dialects.v03 => Ok(Dialect::V03),
        _ => Err(A2aError::VersionNotSupported {
            version: v.to_owned(),
        }),
    }
}

/// The dialects a request can be served in, known from its binding and its method or path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dialects {
    /// What a request without `A2A-Version` speaks.
    pub default: Dialect,
    /// Whether `A2A-Version: 0.3` is served.
    pub v03: bool,
}

impl Dialects {
    /// 1.0 only (the gRPC `lf.a2a.v1` service).
    pub const V1_ONLY: Dialects = Dialects {
        default: Dialect::V1,
        v03: false,
    };

    /// Both, 0.3 without a header where the method or path is a 0.3 one.
    pub fn both(default: Dialect) -> Self {
        Dialects { default, v03: true }
    }
}

/// `historyLength`: unset = everything, 0 = none, n = the n most recent; negative is invalid.
pub fn history_length(value: Option<i32>, field: &str) -> Result<Option<usize>, A2aError> {
    match value {
        None => Ok(None),
        Some(n) if n < 0 => Err(A2aError::invalid_params(field, "must not be negative")),
        Some(n) => Ok(Some(n as usize)),
    }
}

/// The range of `google.protobuf.Timestamp`: 0001-01-01T00:00:00Z to 9999-12-31T23:59:59Z,
/// nanos in 0..1e9. gRPC carries seconds and nanos as they are, so anything else (i64::MAX
/// seconds, negative nanos) is refused here before it is computed with.
pub fn timestamp(t: &Timestamp, field: &str) -> Result<(), A2aError> {
    const MIN_SECONDS: i64 = -62_135_596_800;
    const MAX_SECONDS: i64 = 253_402_300_799;
    if !(MIN_SECONDS..=MAX_SECONDS).contains(&t.seconds) {
        return Err(A2aError::invalid_params(
            field,
            format!(
                "seconds {} is outside 0001-01-01T00:00:00Z..9999-12-31T23:59:59Z",
                t.seconds
            ),
        ));
    }
    if !(0..1_000_000_000).contains(&t.nanos) {
        return Err(A2aError::invalid_params(
            field,
            format!("nanos {} is outside 0..999999999", t.nanos),
        ));
    }
    Ok(())
}

pub fn required_id(value: &str, field: &str) -> Result<(), A2aError> {
    if value.trim().is_empty() {
        Err(A2aError::invalid_params(field, "is required"))
    } else if value.len() > 256 {
        Err(A2aError::invalid_params(
            field,
            "is longer than 256 characters",
        ))
    } else {
        Ok(())
    }
}

/// A client message: REQUIRED fields present, role USER, every part with exactly one content.
pub fn message(message: Option<&Message>, max_parts: usize) -> Result<&Message, A2aError> {
    let m = message.ok_or_else(|| A2aError::invalid_params("message", "is required"))?;
    required_id(&m.message_id, "message.messageId")?;
    match Role::try_from(m.role) {
        Ok(Role::User) => {}
        Ok(Role::Unspecified) => {
            return Err(A2aError::invalid_params(
                "message.role",
                "is required (ROLE_USER)",
            ));
        }
        _ => {
            return Err(A2aError::invalid_params(
                "message.role",
                "must be ROLE_USER for messages sent to the agent",
            ));
        }
    }
    if m.parts.is_empty() {
        return Err(A2aError::invalid_params(
            "message.parts",
            "must contain at least one part",
        ));
    }
    if m.parts.len() > max_parts {
        return Err(A2aError::invalid_params(
            "message.parts",
            format!("must contain at most {max_parts} parts"),
        ));
    }
    if let Some(i) = m.parts.iter().position(|p| p.content.is_none()) {
        return Err(A2aError::invalid_params(
            format!("message.parts[{i}]"),
            "must set exactly one of text, raw, url, data",
        ));
    }
    Ok(m)
}

/// What a refused non-finite number is told: JSON (and so JSON-RPC, HTTP+JSON, webhooks and
/// every stored task read over them) has no form for it.
pub const NON_FINITE: &str =
    "holds NaN or Infinity, which a google.protobuf.Value cannot carry (JSON has no form for it)";

/// Where the first NaN or ±Infinity of `s` is, below `field` (`metadata.a[2]`).
pub fn non_finite_struct(s: Option<&Struct>, field: &str) -> Option<String> {
    s.and_then(Struct::non_finite)
        .map(|path| format!("{field}{path}"))
}

/// The first NaN or ±Infinity of `parts` (data, then metadata of each), as a path below the
/// parts (`.parts[1].data.x`). Nothing is allocated unless one is found: this runs on every
/// send and every agent event.
fn non_finite_parts(parts: &[Part]) -> Option<String> {
    parts.iter().enumerate().find_map(|(i, p)| {
        if let Some(part::Content::Data(v)) = &p.content
            && let Some(path) = v.non_finite()
        {
            return Some(format!(".parts[{i}].data{path}"));
        }
        p.metadata
            .as_ref()
            .and_then(Struct::non_finite)
            .map(|path| format!(".parts[{i}].metadata{path}"))
    })
}

/// Where the first NaN or ±Infinity of a message is (its parts' data and metadata, its
/// metadata), named below `field`.
pub fn non_finite_message(m: &Message, field: &str) -> Option<String> {
    non_finite_parts(&m.parts)
        .or_else(|| {
            m.metadata
                .as_ref()
                .and_then(Struct::non_finite)
                .map(|p| format!(".metadata{p}"))
        })
        .map(|path| format!("{field}{path}"))
}

/// As [`non_finite_message`], for an artifact.
pub fn non_finite_artifact(a: &Artifact, field: &str) -> Option<String> {
    non_finite_parts(&a.parts)
        .or_else(|| {
            a.metadata
                .as_ref()
                .and_then(Struct::non_finite)
                .map(|p| format!(".metadata{p}"))
        })
        .map(|path| format!("{field}{path}"))
}

/// A send carries no NaN or ±Infinity (gRPC can encode them in a `Value`; nothing else that
/// reads the task could print it): InvalidParams naming the first one's place. Checked first,
/// before anything computes with the request (its idempotency fingerprint included).
pub fn finite_send(req: &SendMessageRequest) -> Result<(), A2aError> {
    let found = req
        .message
        .as_ref()
        .and_then(|m| non_finite_message(m, "message"))
        .or_else(|| non_finite_struct(req.metadata.as_ref(), "metadata"));
    match found {
        Some(field) => Err(A2aError::invalid_params(field, NON_FINITE)),
        None => Ok(()),
    }
}

/// `metadata` (of a request other than a send) carries no NaN or ±Infinity.
pub fn finite_metadata(metadata: Option<&Struct>) -> Result<(), A2aError> {
    match non_finite_struct(metadata, "metadata") {
        Some(field) => Err(A2aError::invalid_params(field, NON_FINITE)),
        None => Ok(()),
    }
}

/// Characters allowed in client-chosen push config ids (they appear in REST paths).
fn is_id_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')
}

/// A push config: absolute http(s) URL that `policy` allows (no loopback, private, link-local,
/// multicast or unspecified address unless allowlisted), a usable authentication scheme, a
/// path-safe id.
pub fn push_config(
    cfg: &TaskPushNotificationConfig,
    prefix: &str,
    policy: &AddressPolicy,
) -> Result<(), A2aError> {
    let field = |f: &str| format!("{prefix}{f}");
    if cfg.url.trim().is_empty() {
        return Err(A2aError::invalid_params(field("url"), "is required"));
    }
    let url = url::Url::parse(&cfg.url)
        .map_err(|e| A2aError::invalid_params(field("url"), format!("is not a URL: {e}")))?;
    if !matches!(url.scheme(), "http" | "https") || url.host().is_none() {
        return Err(A2aError::invalid_params(
            field("url"),
            "must be an absolute http or https URL",
        ));
    }
    if let Err(blocked) = policy.check_url(&url) {
        return Err(A2aError::invalid_params(field("url"), blocked.to_string()));
    }
    if cfg.url.len() > 2048 {
        return Err(A2aError::invalid_params(
            field("url"),
            "is longer than 2048 characters",
        ));
    }
    if !cfg.id.is_empty() && (cfg.id.len() > 128 || !cfg.id.chars().all(is_id_char)) {
        return Err(A2aError::invalid_params(
            field("id"),
            "must be at most 128 characters of A-Z a-z 0-9 - _ .",
        ));
    }
    if let Some(auth) = &cfg.authentication
        && (auth.scheme.trim().is_empty()
            || !auth
                .scheme
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-'))
    {
        return Err(A2aError::invalid_params(
            field("authentication.scheme"),
            "must be an HTTP authentication scheme such as Bearer or Basic",
        ));
    }
    if cfg.token.len() > 4096 {
        return Err(A2aError::invalid_params(
            field("token"),
            "is longer than 4096 characters",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions() {
        let v1 = Dialects::V1_ONLY;
        for ok in [None, Some(""), Some("1.0"), Some("1.0.1"), Some("1")] {
            assert_eq!(negotiate_version(ok, v1), Ok(Dialect::V1), "{ok:?}");
        }
        for bad in ["99.0", "0.3", "2.0", "1.x", "abc"] {
            assert!(
                matches!(
                    negotiate_version(Some(bad), v1),
                    Err(A2aError::VersionNotSupported { .. })
                ),
                "{bad}"
            );
        }
        let both = Dialects::both(Dialect::V03);
        assert_eq!(negotiate_version(None, both), Ok(Dialect::V03));
        assert_eq!(negotiate_version(Some("0.3.0"), both), Ok(Dialect::V03));
        assert_eq!(negotiate_version(Some("1.0"), both), Ok(Dialect::V1));
        for bad in ["0.2", "0.3.x", "99.0"] {
            assert!(negotiate_version(Some(bad), both).is_err(), "{bad}");
        }
    }

    #[test]
    fn timestamps_in_the_protobuf_range() {
        let ts = |seconds, nanos| Timestamp { seconds, nanos };
        for ok in [
            ts(0, 0),
            ts(-62_135_596_800, 0),
            ts(253_402_300_799, 999_999_999),
        ] {
            assert!(timestamp(&ok, "t").is_ok(), "{ok:?}");
        }
        for bad in [
            ts(i64::MAX, 0),
            ts(i64::MIN, 0),
            ts(253_402_300_800, 0),
            ts(0, -1),
            ts(0, 1_000_000_000),
        ] {
            match timestamp(&bad, "statusTimestampAfter") {
                Err(A2aError::InvalidParams { field, .. }) => {
                    assert_eq!(field, "statusTimestampAfter")
                }
                other => panic!("{bad:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn non_finite_numbers_are_named_by_their_place() {
        use a2a_types::wkt::Value;
        let nan = |k: &str| -> Struct {
            [(k.to_owned(), Value::from(f64::NAN))]
                .into_iter()
                .collect()
        };
        let text = Part {
            content: Some(part::Content::Text("hi".into())),
            ..Default::default()
        };
        let mut req = SendMessageRequest {
            message: Some(Message {
                parts: vec![text.clone()],
                ..Default::default()
            }),
            ..Default::default()
        };
        assert!(finite_send(&req).is_ok());
        let field = |req: &SendMessageRequest| match finite_send(req) {
            Err(A2aError::InvalidParams { field, .. }) => field,
            other => panic!("{other:?}"),
        };
        req.metadata = Some(nan("m"));
        assert_eq!(field(&req), "metadata.m");
        let m = req.message.as_mut().unwrap();
        m.metadata = Some(nan("k"));
        assert_eq!(field(&req), "message.metadata.k");
        let m = req.message.as_mut().unwrap();
        m.parts.push(Part {
            content: Some(part::Content::Data(
                vec![Value::from(1.0), Value::from(f64::INFINITY)].into(),
            )),
            ..Default::default()
        });
        assert_eq!(field(&req), "message.parts[1].data[1]");
        let m = req.message.as_mut().unwrap();
        m.parts[0].metadata = Some(nan("p"));
        assert_eq!(field(&req), "message.parts[0].metadata.p");
        assert!(finite_metadata(None).is_ok());
        assert!(finite_metadata(Some(&nan("x"))).is_err());
        let artifact = Artifact {
            metadata: Some(nan("a")),
            ..Default::default()
        };
        assert_eq!(
            non_finite_artifact(&artifact, "artifact").as_deref(),
            Some("artifact.metadata.a")
        );
    }

    #[test]
    fn push_config_rules() {
        let ok = TaskPushNotificationConfig {
            url: "https://hooks.example.com/a2a".into(),
            ..Default::default()
        };
        let none = AddressPolicy::default();
        assert!(push_config(&ok, "", &none).is_ok());
        let bad_url = TaskPushNotificationConfig {
            url: "ftp://x".into(),
            ..ok.clone()
        };
        assert!(push_config(&bad_url, "", &none).is_err());
        let private = TaskPushNotificationConfig {
            url: "http://10.0.0.7:8080/hook".into(),
            ..ok.clone()
        };
        let err = push_config(&private, "", &none).unwrap_err();
        assert!(
            matches!(&err, A2aError::InvalidParams { field, .. } if field == "url"),
            "{err:?}"
        );
        let allow = AddressPolicy::parse("10.0.0.7").unwrap();
        assert!(push_config(&private, "", &allow).is_ok());
        let bad_id = TaskPushNotificationConfig {
            id: "a/b".into(),
            ..ok.clone()
        };
        assert!(
            matches!(push_config(&bad_id, "", &none).unwrap_err(), A2aError::InvalidParams { field, .. } if field == "id")
        );
    }
}
