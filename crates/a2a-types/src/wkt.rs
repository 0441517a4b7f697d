//! `google.protobuf.Timestamp` with the A2A JSON form: RFC 3339 in UTC, ending in `Z`, with
//! millisecond precision on output; any offset and 0–9 fractional digits accepted on input
//! (digits past the millisecond are dropped there, so a value reads back as itself).
//!
//! Also re-exports `google.protobuf.Struct`, `Value` (with [`value::Kind`]), `ListValue` and
//! `NullValue`, whose JSON form prints integral numbers as integers (see `wkt_struct.rs`).

use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

pub use crate::wkt_struct::{ListValue, NullValue, Struct, Value, lossy, value};

/// Wire-compatible with `google.protobuf.Timestamp` (same field numbers), so the generated A2A
/// messages can use it in place of `pbjson_types::Timestamp`.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Message)]
pub struct Timestamp {
    #[prost(int64, tag = "1")]
    pub seconds: i64,
    #[prost(int32, tag = "2")]
    pub nanos: i32,
}

impl Timestamp {
    /// The current time, truncated to milliseconds so that what is stored equals what is printed.
    pub fn now() -> Self {
        Self::from_millis(Utc::now().timestamp_millis())
    }

    pub fn from_millis(ms: i64) -> Self {
        Self {
            seconds: ms.div_euclid(1000),
            nanos: (ms.rem_euclid(1000) * 1_000_000) as i32,
        }
    }

    /// Milliseconds since the Unix epoch (sub-millisecond digits are dropped). Saturates for a
    /// timestamp outside any calendar (gRPC carries seconds as they come), instead of
    /// overflowing.
    pub fn as_millis(&self) -> i64 {
        self.seconds
            .saturating_mul(1000)
            .saturating_add(i64::from(self.nanos) / 1_000_000)
    }

    pub fn to_datetime(self) -> Option<DateTime<Utc>> {
        DateTime::from_timestamp(self.seconds, u32::try_from(self.nanos).ok()?)
    }

    /// Parses any RFC 3339 timestamp (any offset, 0–9 fractional digits), truncated to
    /// milliseconds: the precision it is printed with, so that a value read from JSON prints
    /// and reads back as itself (the fuzz target `protojson_requests` found `.6178Z` coming
    /// back as `.617Z`).
    pub fn parse(s: &str) -> Result<Self, chrono::ParseError> {
        let d = DateTime::parse_from_rfc3339(s)?.with_timezone(&Utc);
        let mut t = Self::from(d);
        t.nanos -= t.nanos % 1_000_000;
        Ok(t)
    }
}

impl From<DateTime<Utc>> for Timestamp {
    fn from(d: DateTime<Utc>) -> Self {
        Self {
            seconds: d.timestamp(),
            nanos: d.timestamp_subsec_nanos() as i32,
        }
    }
}

impl std::fmt::Display for Timestamp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.to_datetime() {
            Some(d) => f.write_str(&d.to_rfc3339_opts(SecondsFormat::Millis, true)),
            None => write!(f, "<invalid timestamp {}s {}ns>", self.seconds, self.nanos),
        }
    }
}

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let d = self
            .to_datetime()
            .ok_or_else(|| serde::ser::Error::custom("timestamp out of range"))?;
        serializer.serialize_str(&d.to_rfc3339_opts(SecondsFormat::Millis, true))
    }
}

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let s = std::borrow::Cow::<str>::deserialize(deserializer)?;
        Self::parse(&s)
            .map_err(|e| serde::de::Error::custom(format!("invalid RFC 3339 timestamp {s:?}: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prints_utc_with_z_and_millis() {
        let t = Timestamp::parse("2026-01-01T02:00:00.123456+02:00").unwrap();
        assert_eq!(
            serde_json::to_string(&t).unwrap(),
            "\"2026-01-01T00:00:00.123Z\""
        );
        let t = Timestamp::parse("2026-01-01T00:00:00Z").unwrap();
        assert_eq!(t.to_string(), "2026-01-01T00:00:00.000Z");
    }

    #[test]
    fn sub_millisecond_digits_read_from_json_are_dropped_so_it_round_trips() {
        let t: Timestamp = serde_json::from_str("\"2026-01-02T03:04:05.6178Z\"").unwrap();
        assert_eq!(t.nanos, 617_000_000);
        let json = serde_json::to_string(&t).unwrap();
        assert_eq!(json, "\"2026-01-02T03:04:05.617Z\"");
        assert_eq!(serde_json::from_str::<Timestamp>(&json).unwrap(), t);
        let before: Timestamp = serde_json::from_str("\"1969-12-31T23:59:59.9999Z\"").unwrap();
        assert_eq!(before.to_string(), "1969-12-31T23:59:59.999Z");
    }

    #[test]
    fn millis_round_trip_before_epoch() {
        let t = Timestamp::from_millis(-1);
        assert_eq!(t.as_millis(), -1);
        assert_eq!(t.to_string(), "1969-12-31T23:59:59.999Z");
    }

    #[test]
    fn millis_saturate_out_of_range() {
        let t = Timestamp {
            seconds: i64::MAX,
            nanos: 999_999_999,
        };
        assert_eq!(t.as_millis(), i64::MAX);
        let t = Timestamp {
            seconds: i64::MIN,
            nanos: -1,
        };
        assert_eq!(t.as_millis(), i64::MIN);
    }

    #[test]
    fn rejects_garbage() {
        assert!(serde_json::from_str::<Timestamp>("\"yesterday\"").is_err());
    }
}
