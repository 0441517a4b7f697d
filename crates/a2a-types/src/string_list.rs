//! `lf.a2a.v1.StringList`, whose ProtoJSON form is `{"list":[...]}`. Some SDKs emit a bare array
//! (`["read"]`) instead, so deserialisation accepts both (and `{}`); serialisation is ProtoJSON.

use serde::de::{self, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

#[derive(Clone, PartialEq, Eq, Hash, prost::Message)]
pub struct StringList {
    #[prost(string, repeated, tag = "1")]
    pub list: Vec<String>,
}

impl Serialize for StringList {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut s = serializer.serialize_struct("StringList", 1)?;
        if !self.list.is_empty() {
            s.serialize_field("list", &self.list)?;
        }
        s.end()
    }
}

impl<'de> Deserialize<'de> for StringList {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = StringList;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str(r#"{"list":[...]} or an array of strings"#)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<StringList, A::Error> {
                let mut list = Vec::new();
                while let Some(s) = seq.next_element::<String>()? {
                    list.push(s);
                }
                Ok(StringList { list })
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<StringList, A::Error> {
                let mut list = Vec::new();
                while let Some(key) = map.next_key::<String>()? {
                    if key == "list" {
                        list = map.next_value::<Option<Vec<String>>>()?.unwrap_or_default();
                    } else {
                        map.next_value::<de::IgnoredAny>()?;
                    }
                }
                Ok(StringList { list })
            }
        }
        deserializer.deserialize_any(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_both_forms_emits_protojson() {
        let a: StringList = serde_json::from_str(r#"{"list":["read","write"]}"#).unwrap();
        let b: StringList = serde_json::from_str(r#"["read","write"]"#).unwrap();
        let c: StringList = serde_json::from_str("{}").unwrap();
        assert_eq!(a, b);
        assert!(c.list.is_empty());
        assert_eq!(
            serde_json::to_string(&a).unwrap(),
            r#"{"list":["read","write"]}"#
        );
        assert_eq!(serde_json::to_string(&c).unwrap(), "{}");
    }
}
