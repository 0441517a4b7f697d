//! `google.protobuf.Struct`, `Value` and `ListValue` with the ProtoJSON form that Go protojson
//! and Python print: a `Value` number that is finite and integral (and exactly representable,
//! |x| < 2^53) prints as a JSON integer (`5`, not `5.0`). `pbjson_types` prints every number as
//! an `f64`. Field numbers and the `kind` oneof are those of `google/protobuf/struct.proto`, so
//! the binary encoding is unchanged. Re-exported from [`crate::wkt`].

use std::collections::BTreeMap;
use std::fmt;

use serde::de::{Deserializer, MapAccess, SeqAccess, Visitor};
use serde::ser::{self, SerializeMap, SerializeSeq, Serializer};
use serde::{Deserialize, Serialize};

/// `google.protobuf.Struct`: a JSON object. Keys are kept sorted (like `serde_json::Map`), so the
/// printed form is deterministic.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Struct {
    #[prost(btree_map = "string, message", tag = "1")]
    pub fields: BTreeMap<String, Value>,
}

/// `google.protobuf.Value`: any JSON value. `kind: None` prints as `null`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Value {
    #[prost(oneof = "value::Kind", tags = "1, 2, 3, 4, 5, 6")]
    pub kind: Option<value::Kind>,
}

/// Nested types of [`Value`].
pub mod value {
    /// The `kind` oneof of `google.protobuf.Value`.
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub enum Kind {
        #[prost(enumeration = "super::NullValue", tag = "1")]
        NullValue(i32),
        #[prost(double, tag = "2")]
        NumberValue(f64),
        #[prost(string, tag = "3")]
        StringValue(String),
        #[prost(bool, tag = "4")]
        BoolValue(bool),
        #[prost(message, tag = "5")]
        StructValue(super::Struct),
        #[prost(message, tag = "6")]
        ListValue(super::ListValue),
    }
}

/// `google.protobuf.ListValue`: a JSON array.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ListValue {
    #[prost(message, repeated, tag = "1")]
    pub values: Vec<Value>,
}

/// `google.protobuf.NullValue`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum NullValue {
    NullValue = 0,
}

use value::Kind;

/// 2^53: above this, not every integer is an `f64`, so we no longer claim the number is one.
const MAX_SAFE: f64 = 9_007_199_254_740_992.0;

/// `Some(i)` when `x` prints as the JSON integer `i`: finite, integral, |x| < 2^53, and not `-0`.
fn as_integer(x: f64) -> Option<i64> {
    (x.fract() == 0.0 && x.abs() < MAX_SAFE && !(x == 0.0 && x.is_sign_negative()))
        .then_some(x as i64)
}

impl Value {
    /// `null` (`kind: NullValue`).
    pub fn null() -> Self {
        Kind::NullValue(NullValue::NullValue as i32).into()
    }

    /// Where the first NaN or ±Infinity in this value is, as a path below it (`""` for the
    /// value itself, `.a[2].b` inside it); `None` when every number is finite. JSON cannot
    /// carry such a number, and ProtoJSON refuses to print one, but protobuf's binary form
    /// (gRPC) can: what comes from there is checked with this before it is kept.
    pub fn non_finite(&self) -> Option<String> {
        match &self.kind {
            Some(Kind::NumberValue(x)) if !x.is_finite() => Some(String::new()),
            Some(Kind::StructValue(s)) => s.non_finite(),
            Some(Kind::ListValue(l)) => l
                .values
                .iter()
                .enumerate()
                .find_map(|(i, v)| v.non_finite().map(|path| format!("[{i}]{path}"))),
            _ => None,
        }
    }
}

impl Struct {
    /// As [`Value::non_finite`]: the path of the first NaN or ±Infinity (`.key...`).
    pub fn non_finite(&self) -> Option<String> {
        self.fields.iter().find_map(|(k, v)| {
            v.non_finite().map(|path| {
                if k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') && !k.is_empty() {
                    format!(".{k}{path}")
                } else {
                    // A key that is not a plain name is quoted (JSON string form).
                    let quoted = serde_json::to_string(k).unwrap_or_default();
                    format!("[{quoted}]{path}")
                }
            })
        })
    }
}

thread_local! {
    /// Set while [`lossy`] runs: a non-finite number prints as `null` instead of failing.
    static LOSSY: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `f` (a serialisation) with NaN and ±Infinity in a `Value` printed as `null`, as
/// `serde_json` prints a non-finite `f64`, instead of failing. For output that must not fail
/// (a task stored before non-finite numbers were refused is still readable); never for what
/// must be exact (a fingerprint, a signature).
pub fn lossy<R>(f: impl FnOnce() -> R) -> R {
    struct Reset(bool);
    impl Drop for Reset {
        fn drop(&mut self) {
            LOSSY.with(|l| l.set(self.0));
        }
    }
    let _reset = Reset(LOSSY.with(|l| l.replace(true)));
    f()
}

// ---- constructors ---------------------------------------------------------------------------

impl From<Kind> for Value {
    fn from(kind: Kind) -> Self {
        Self { kind: Some(kind) }
    }
}

macro_rules! value_from {
    ($($t:ty => |$v:ident| $kind:expr),+ $(,)?) => {$(
        impl From<$t> for Value {
            fn from($v: $t) -> Self {
                $kind.into()
            }
        }
    )+};
}

value_from! {
    f64 => |v| Kind::NumberValue(v),
    bool => |v| Kind::BoolValue(v),
    String => |v| Kind::StringValue(v),
    &str => |v| Kind::StringValue(v.to_owned()),
    Struct => |v| Kind::StructValue(v),
    ListValue => |v| Kind::ListValue(v),
    Vec<Value> => |v| Kind::ListValue(ListValue { values: v }),
}

impl FromIterator<(String, Value)> for Struct {
    fn from_iter<I: IntoIterator<Item = (String, Value)>>(iter: I) -> Self {
        Self {
            fields: iter.into_iter().collect(),
        }
    }
}

impl FromIterator<Value> for ListValue {
    fn from_iter<I: IntoIterator<Item = Value>>(iter: I) -> Self {
        Self {
            values: iter.into_iter().collect(),
        }
    }
}

// ---- serde_json conversions -----------------------------------------------------------------

impl From<serde_json::Value> for Value {
    fn from(v: serde_json::Value) -> Self {
        match v {
            serde_json::Value::Null => Value::null(),
            serde_json::Value::Bool(b) => b.into(),
            // Without serde_json's `arbitrary_precision`, every number has an f64 form.
            // (A number without one would be `null`, never NaN: NaN has no JSON form.)
            serde_json::Value::Number(n) => n.as_f64().map_or_else(Value::null, Value::from),
            serde_json::Value::String(s) => s.into(),
            serde_json::Value::Array(a) => {
                a.into_iter().map(Value::from).collect::<ListValue>().into()
            }
            serde_json::Value::Object(o) => Struct::from(o).into(),
        }
    }
}

/// Integral numbers become JSON integers. NaN and ±Infinity have no JSON form and become `null`,
/// as in `serde_json::Value::from(f64::NAN)`; serialising such a `Value` with serde is an error.
impl From<Value> for serde_json::Value {
    fn from(v: Value) -> Self {
        match v.kind {
            None | Some(Kind::NullValue(_)) => serde_json::Value::Null,
            Some(Kind::BoolValue(b)) => b.into(),
            Some(Kind::NumberValue(x)) => match as_integer(x) {
                Some(i) => i.into(),
                None => serde_json::Number::from_f64(x).map_or(serde_json::Value::Null, Into::into),
            },
            Some(Kind::StringValue(s)) => s.into(),
            Some(Kind::StructValue(s)) => serde_json::Value::Object(s.into()),
            Some(Kind::ListValue(l)) => l.into(),
        }
    }
}

impl From<serde_json::Map<String, serde_json::Value>> for Struct {
    fn from(m: serde_json::Map<String, serde_json::Value>) -> Self {
        m.into_iter().map(|(k, v)| (k, v.into())).collect()
    }
}

impl From<Struct> for serde_json::Map<String, serde_json::Value> {
    fn from(s: Struct) -> Self {
        s.fields.into_iter().map(|(k, v)| (k, v.into())).collect()
    }
}

impl From<Struct> for serde_json::Value {
    fn from(s: Struct) -> Self {
        serde_json::Value::Object(s.into())
    }
}

impl From<Vec<serde_json::Value>> for ListValue {
    fn from(a: Vec<serde_json::Value>) -> Self {
        a.into_iter().map(Value::from).collect()
    }
}

impl From<ListValue> for serde_json::Value {
    fn from(l: ListValue) -> Self {
        serde_json::Value::Array(l.values.into_iter().map(Into::into).collect())
    }
}

// ---- serde ----------------------------------------------------------------------------------

impl Serialize for Value {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match &self.kind {
            None | Some(Kind::NullValue(_)) => serializer.serialize_unit(),
            Some(Kind::BoolValue(b)) => serializer.serialize_bool(*b),
            Some(Kind::StringValue(s)) => serializer.serialize_str(s),
            Some(Kind::StructValue(s)) => s.serialize(serializer),
            Some(Kind::ListValue(l)) => l.serialize(serializer),
            Some(Kind::NumberValue(x)) if !x.is_finite() => {
                if LOSSY.with(std::cell::Cell::get) {
                    serializer.serialize_unit()
                } else {
                    Err(ser::Error::custom(format!(
                        "google.protobuf.Value cannot hold the number {x}"
                    )))
                }
            }
            Some(Kind::NumberValue(x)) => match as_integer(*x) {
                Some(i) => serializer.serialize_i64(i),
                None => serializer.serialize_f64(*x),
            },
        }
    }
}

impl Serialize for Struct {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.fields.len()))?;
        for (k, v) in &self.fields {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

impl Serialize for ListValue {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut seq = serializer.serialize_seq(Some(self.values.len()))?;
        for v in &self.values {
            seq.serialize_element(v)?;
        }
        seq.end()
    }
}

struct ValueVisitor;

impl<'de> Visitor<'de> for ValueVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::null())
    }
    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::null())
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        Value::deserialize(d)
    }
    fn visit_bool<E>(self, b: bool) -> Result<Value, E> {
        Ok(b.into())
    }
    fn visit_i64<E>(self, n: i64) -> Result<Value, E> {
        Ok((n as f64).into())
    }
    fn visit_u64<E>(self, n: u64) -> Result<Value, E> {
        Ok((n as f64).into())
    }
    fn visit_f64<E>(self, x: f64) -> Result<Value, E> {
        Ok(x.into())
    }
    fn visit_str<E>(self, s: &str) -> Result<Value, E> {
        Ok(s.into())
    }
    fn visit_string<E>(self, s: String) -> Result<Value, E> {
        Ok(s.into())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Value, A::Error> {
        ListVisitor.visit_seq(seq).map(Value::from)
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Value, A::Error> {
        StructVisitor.visit_map(map).map(Value::from)
    }
}

struct StructVisitor;

impl<'de> Visitor<'de> for StructVisitor {
    type Value = Struct;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Struct, A::Error> {
        let mut fields = BTreeMap::new();
        while let Some((k, v)) = map.next_entry::<String, Value>()? {
            fields.insert(k, v);
        }
        Ok(Struct { fields })
    }
}

struct ListVisitor;

impl<'de> Visitor<'de> for ListVisitor {
    type Value = ListValue;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON array")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<ListValue, A::Error> {
        let mut values = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1024));
        while let Some(v) = seq.next_element::<Value>()? {
            values.push(v);
        }
        Ok(ListValue { values })
    }
}

impl<'de> Deserialize<'de> for Value {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(ValueVisitor)
    }
}

impl<'de> Deserialize<'de> for Struct {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(StructVisitor)
    }
}

impl<'de> Deserialize<'de> for ListValue {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_seq(ListVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message as _;

    const DOC: &str = r#"{"a":5,"b":[1,2.5,"x",null,true,{"c":{}}],"d":-3,"e":1e+300,"f":-0.0}"#;

    #[test]
    fn json_round_trip_prints_integers_without_fraction() {
        let v: Value = serde_json::from_str(DOC).unwrap();
        assert_eq!(serde_json::to_string(&v).unwrap(), DOC);
        let s: Struct =
            serde_json::from_str(r#"{"a":5,"b":[1,2.5,"x",null,true,{"c":{}}]}"#).unwrap();
        assert_eq!(
            serde_json::to_string(&s).unwrap(),
            r#"{"a":5,"b":[1,2.5,"x",null,true,{"c":{}}]}"#
        );
        let l: ListValue = serde_json::from_str("[9007199254740991,0.1]").unwrap();
        assert_eq!(serde_json::to_string(&l).unwrap(), "[9007199254740991,0.1]");
        // 2^53 is no longer printed as an integer.
        let big = Value::from(MAX_SAFE);
        assert_eq!(serde_json::to_string(&big).unwrap(), "9007199254740992.0");
    }

    #[test]
    fn serde_json_value_conversions_agree_with_serde() {
        let doc: serde_json::Value = serde_json::from_str(DOC).unwrap();
        let v = Value::from(doc.clone());
        assert_eq!(serde_json::Value::from(v.clone()), doc);
        assert_eq!(serde_json::to_value(&v).unwrap(), doc);
        let map = doc.as_object().unwrap().clone();
        assert_eq!(serde_json::Map::from(Struct::from(map.clone())), map);
        assert_eq!(serde_json::from_value::<Value>(doc).unwrap(), v);
    }

    #[test]
    fn protobuf_round_trip() {
        let v: Value = serde_json::from_str(DOC).unwrap();
        let bytes = v.encode_to_vec();
        assert_eq!(Value::decode(bytes.as_slice()).unwrap(), v);
        // Wire-compatible with the generated google.protobuf types: through them and back.
        let theirs = pbjson_types::Value::decode(bytes.as_slice()).unwrap();
        assert_eq!(Value::decode(theirs.encode_to_vec().as_slice()).unwrap(), v);
        let s: Struct = serde_json::from_str(DOC).unwrap();
        let theirs = pbjson_types::Struct::decode(s.encode_to_vec().as_slice()).unwrap();
        assert_eq!(
            theirs.fields["a"].kind,
            Some(pbjson_types::value::Kind::NumberValue(5.0))
        );
        assert_eq!(
            Struct::decode(theirs.encode_to_vec().as_slice()).unwrap(),
            s
        );
    }

    #[test]
    fn non_finite_numbers_are_rejected() {
        for x in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            assert!(serde_json::to_string(&Value::from(x)).is_err());
            let l: ListValue = vec![Value::from(x)].into_iter().collect();
            assert!(serde_json::to_string(&l).is_err());
        }
    }

    #[test]
    fn non_finite_numbers_are_found_and_printed_as_null_when_lossy() {
        let doc: Value = serde_json::from_str(r#"{"a":[1,{"b":2}],"c d":{"e":3}}"#).unwrap();
        assert_eq!(doc.non_finite(), None);
        let mut s = match doc.kind {
            Some(Kind::StructValue(s)) => s,
            _ => unreachable!(),
        };
        s.fields.insert(
            "c d".into(),
            vec![Value::from(1.0), Value::from(f64::NAN)].into(),
        );
        assert_eq!(s.non_finite().as_deref(), Some(r#"["c d"][1]"#));
        let v = Value::from(s.clone());
        assert!(serde_json::to_string(&v).is_err());
        let printed = lossy(|| serde_json::to_string(&v)).unwrap();
        assert_eq!(printed, r#"{"a":[1,{"b":2}],"c d":[1,null]}"#);
        // Strict again afterwards, also after a panic inside.
        assert!(serde_json::to_string(&v).is_err());
        let _ = std::panic::catch_unwind(|| lossy(|| panic!("inside")));
        assert!(serde_json::to_string(&v).is_err());
        let inf = Struct::from_iter([("x".to_owned(), Value::from(f64::NEG_INFINITY))]);
        assert_eq!(inf.non_finite().as_deref(), Some(".x"));
    }

    #[test]
    fn struct_and_list_want_their_json_shape() {
        assert!(serde_json::from_str::<Struct>("[1]").is_err());
        assert!(serde_json::from_str::<ListValue>("{}").is_err());
        assert_eq!(serde_json::to_string(&Value::default()).unwrap(), "null");
    }
}
