//! ProtoJSON for `ListTasksResponse`, written by hand because all four fields are REQUIRED on the
//! wire even at their default values: `nextPageToken` is `""` on the last page, and `tasks`,
//! `pageSize` and `totalSize` appear even when empty or zero (generic ProtoJSON would omit them).

use serde::de::{self, MapAccess, Visitor};
use serde::ser::SerializeStruct;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::v1::{ListTasksResponse, Task};

impl Serialize for ListTasksResponse {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut s = serializer.serialize_struct("lf.a2a.v1.ListTasksResponse", 4)?;
        s.serialize_field("tasks", &self.tasks)?;
        s.serialize_field("nextPageToken", &self.next_page_token)?;
        s.serialize_field("pageSize", &self.page_size)?;
        s.serialize_field("totalSize", &self.total_size)?;
        s.end()
    }
}

impl<'de> Deserialize<'de> for ListTasksResponse {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = ListTasksResponse;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a ListTasksResponse object")
            }
            fn visit_map<A: MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<ListTasksResponse, A::Error> {
                let mut out = ListTasksResponse::default();
                while let Some(key) = map.next_key::<String>()? {
                    match key.as_str() {
                        "tasks" => {
                            out.tasks = map.next_value::<Option<Vec<Task>>>()?.unwrap_or_default()
                        }
                        "nextPageToken" | "next_page_token" => {
                            out.next_page_token =
                                map.next_value::<Option<String>>()?.unwrap_or_default()
                        }
                        "pageSize" | "page_size" => {
                            out.page_size = map.next_value::<Option<i32>>()?.unwrap_or_default()
                        }
                        "totalSize" | "total_size" => {
                            out.total_size = map.next_value::<Option<i32>>()?.unwrap_or_default()
                        }
                        _ => {
                            map.next_value::<de::IgnoredAny>()?;
                        }
                    }
                }
                Ok(out)
            }
        }
        deserializer.deserialize_map(V)
    }
}
