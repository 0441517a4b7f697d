//! The 0.3 column of the equivalence suite, for what 0.3 can express over JSON-RPC: each
//! scenario runs once in 1.0 (`SendMessage`, ...) and once in 0.3 (`message/send`, ...) against
//! a fresh gateway; 0.3 requests are made from the 1.0 ones and 0.3 results read back as 1.0
//! through `a2a_types::v03` (the translation toward 0.3 upstreams), so after normalisation both
//! traces must be the same step for step. Not expressible in 0.3, so not here: ListTasks,
//! tenants (messages reach the scenario agent by skill hint in both columns), `final`.

use a2a_types::v1::{Message, StreamResponse};
use a2a_types::v03;
use futures::future::BoxFuture;
use serde_json::{Value, json};

use super::normalise;
use crate::harness::{SseStream, TestGateway};

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Column {
    V1,
    V03,
}

struct Client {
    gw: TestGateway,
    column: Column,
}

/// One operation, named by its 1.0 method.
enum Op {
    Send(Value),
    Stream(Value),
    Get(Value, Option<i32>),
    Cancel(Value),
    PushSet(Value, Value),
    PushGet(Value, &'static str),
    PushList(Value),
    PushDelete(Value, &'static str),
}

impl Client {
    async fn post(&self, method: &str, params: Value) -> reqwest::Response {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let version = match self.column {
            Column::V1 => "1.0",
            Column::V03 => "0.3",
        };
        self.gw
            .client
            .post(self.gw.url("/a2a/jsonrpc"))
            .header("a2a-version", version)
            .json(&body)
            .send()
            .await
            .unwrap()
    }

    /// The outcome of `op` as 1.0 JSON: a StreamResponse (or a list of them), a push config
    /// (or a list), `null`, or `{"error": code, "reason": ...}`.
    async fn call(&self, op: Op) -> Value {
        let v1 = self.column == Column::V1;
        let (method, params) = match op {
            Op::Send(m) if v1 => ("SendMessage", json!({"message": m})),
            Op::Send(m) => (v03::method::SEND, json!({"message": message03(&m)})),
            Op::Stream(m) => {
                let (method, params) = if v1 {
                    ("SendStreamingMessage", json!({"message": m}))
                } else {
                    (v03::method::STREAM, json!({"message": message03(&m)}))
                };
                let events = SseStream::new(self.post(method, params).await)
                    .collect()
                    .await;
                let out: Vec<Value> = events
                    .iter()
                    .map(|e| self.as_event(&e.data["result"]))
                    .collect();
                return Value::Array(out);
            }
            Op::Get(id, n) if v1 => ("GetTask", json!({"id": id, "historyLength": n})),
            Op::Get(id, n) => (v03::method::GET, json!({"id": id, "historyLength": n})),
            Op::Cancel(id) if v1 => ("CancelTask", json!({"id": id})),
            Op::Cancel(id) => (v03::method::CANCEL, json!({"id": id})),
            Op::PushSet(task, cfg) if v1 => {
                let mut c = cfg.clone();
                c["taskId"] = task;
                ("CreateTaskPushNotificationConfig", c)
            }
            Op::PushSet(task, cfg) => (
                v03::method::PUSH_SET,
                json!({"taskId": task, "pushNotificationConfig": {"id": cfg["id"],
                       "url": cfg["url"], "token": cfg["token"],
                       "authentication": {"schemes": [cfg["authentication"]["scheme"]],
                                          "credentials": cfg["authentication"]["credentials"]}}}),
            ),
            Op::PushGet(task, id) if v1 => (
                "GetTaskPushNotificationConfig",
                json!({"taskId": task, "id": id}),
            ),
            Op::PushGet(task, id) => (
                v03::method::PUSH_GET,
                json!({"id": task, "pushNotificationConfigId": id}),
            ),
            Op::PushList(task) if v1 => {
                ("ListTaskPushNotificationConfigs", json!({"taskId": task}))
            }
            Op::PushList(task) => (v03::method::PUSH_LIST, json!({"id": task})),
            Op::PushDelete(task, id) if v1 => (
                "DeleteTaskPushNotificationConfig",
                json!({"taskId": task, "id": id}),
            ),
            Op::PushDelete(task, id) => (
                v03::method::PUSH_DELETE,
                json!({"id": task, "pushNotificationConfigId": id}),
            ),
        };
        let r: Value = self
            .post(method, params.clone())
            .await
            .json()
            .await
            .unwrap();
        if let Some(e) = r.get("error") {
            let reason = if v1 {
                e["data"][0]["reason"].clone()
            } else {
                e["data"]["reason"].clone()
            };
            return json!({"error": e["code"], "reason": reason});
        }
        let result = &r["result"];
        match method {
            "SendMessage" | "GetTask" | "CancelTask" => {
                // A Task, or SendMessage's {"task"} / {"message"}: as a StreamResponse.
                if result.get("task").is_some() || result.get("message").is_some() {
                    result.clone()
                } else {
                    json!({"task": result})
                }
            }
            "CreateTaskPushNotificationConfig" | "GetTaskPushNotificationConfig" => result.clone(),
            "ListTaskPushNotificationConfigs" => result["configs"].clone(),
            "DeleteTaskPushNotificationConfig" => Value::Null,
            m if m == v03::method::PUSH_SET || m == v03::method::PUSH_GET => push10(result),
            m if m == v03::method::PUSH_LIST => {
                Value::Array(result.as_array().unwrap().iter().map(push10).collect())
            }
            m if m == v03::method::PUSH_DELETE => result.clone(),
            _ => self.as_event(result),
        }
    }

    /// A result or stream event as a 1.0 StreamResponse.
    fn as_event(&self, v: &Value) -> Value {
        match self.column {
            Column::V1 => v.clone(),
            Column::V03 => {
                let ev: StreamResponse =
                    v03::stream_response(v).unwrap_or_else(|e| panic!("{e}: {v}"));
                serde_json::to_value(ev).unwrap()
            }
        }
    }
}

/// A 1.0 message JSON as 0.3 (through the typed 1.0 Message, as toward an upstream).
fn message03(m: &Value) -> Value {
    let message: Message = serde_json::from_value(m.clone()).unwrap();
    v03::message_to_v03(&message).unwrap()
}

/// A 0.3 push config as the 1.0 one.
fn push10(v: &Value) -> Value {
    let c = &v["pushNotificationConfig"];
    let mut out = json!({"taskId": v["taskId"], "id": c["id"], "url": c["url"]});
    if let Some(t) = c.get("token") {
        out["token"] = t.clone();
    }
    if let Some(a) = c.get("authentication") {
        out["authentication"] = json!({"scheme": a["schemes"][0], "credentials": a["credentials"]});
    }
    out
}

fn scenario_message(script: Value, text: &str) -> Value {
    json!({"messageId": uuid::Uuid::new_v4().to_string(), "role": "ROLE_USER",
           "parts": [{"text": text}, {"data": script}], "metadata": {"skill": "scenario"}})
}

type Steps = Vec<(String, Value)>;
type Scenario = for<'a> fn(&'a Client) -> BoxFuture<'a, Steps>;

fn task_id(step: &Value) -> Value {
    step["task"]["id"].clone()
}

fn lifecycle(c: &Client) -> BoxFuture<'_, Steps> {
    Box::pin(async move {
        let mut s = Steps::new();
        let echo = json!({"messageId": uuid::Uuid::new_v4().to_string(), "role": "ROLE_USER",
                          "parts": [{"text": "hello"}]});
        s.push(("send echo".into(), c.call(Op::Send(echo)).await));
        let streamed = c
            .call(Op::Stream(scenario_message(json!({"chunks": 3}), "run")))
            .await;
        s.push(("stream 3 chunks".into(), streamed));
        let asked = c
            .call(Op::Send(scenario_message(
                json!({"end": "input-required"}),
                "ask",
            )))
            .await;
        let id = task_id(&asked);
        s.push(("send input-required".into(), asked));
        s.push((
            "get history 1".into(),
            c.call(Op::Get(id.clone(), Some(1))).await,
        ));
        s.push(("cancel".into(), c.call(Op::Cancel(id.clone())).await));
        s.push(("cancel again".into(), c.call(Op::Cancel(id.clone())).await));
        s.push((
            "get unknown".into(),
            c.call(Op::Get(json!("nope"), None)).await,
        ));
        let reply = c
            .call(Op::Send(scenario_message(json!({"end": "message"}), "m")))
            .await;
        s.push(("direct message".into(), reply));
        s
    })
}

fn push_configs(c: &Client) -> BoxFuture<'_, Steps> {
    Box::pin(async move {
        let mut s = Steps::new();
        let echo = json!({"messageId": uuid::Uuid::new_v4().to_string(), "role": "ROLE_USER",
                          "parts": [{"text": "push"}]});
        let task = task_id(&c.call(Op::Send(echo)).await);
        let cfg = json!({"id": "hook", "url": "https://hooks.example.com/a", "token": "t",
                         "authentication": {"scheme": "Bearer", "credentials": "c"}});
        s.push(("set".into(), c.call(Op::PushSet(task.clone(), cfg)).await));
        s.push((
            "get".into(),
            c.call(Op::PushGet(task.clone(), "hook")).await,
        ));
        s.push(("list".into(), c.call(Op::PushList(task.clone())).await));
        s.push((
            "delete".into(),
            c.call(Op::PushDelete(task.clone(), "hook")).await,
        ));
        s.push((
            "get deleted".into(),
            c.call(Op::PushGet(task.clone(), "hook")).await,
        ));
        s.push((
            "set on unknown task".into(),
            c.call(Op::PushSet(
                json!("nope"),
                json!({"id": "x", "url": "https://hooks.example.com/b", "token": "",
                   "authentication": {"scheme": "Bearer", "credentials": ""}}),
            ))
            .await,
        ));
        s
    })
}

/// The 1.0 and 0.3 traces of every scenario, equal after normalisation.
#[tokio::test]
async fn the_0_3_column_matches_1_0() {
    let scenarios: [(&str, Scenario); 2] =
        [("lifecycle", lifecycle), ("push configs", push_configs)];
    for (name, scenario) in scenarios {
        let mut traces = Vec::new();
        for column in [Column::V1, Column::V03] {
            let client = Client {
                gw: TestGateway::start().await,
                column,
            };
            let addr = client.gw.addr.to_string();
            let steps = scenario(&client).await;
            traces.push((column, normalise(steps, &addr)));
            client.gw.stop().await;
        }
        let (_, reference) = &traces[0];
        let (_, v03) = &traces[1];
        // The reference is what the scenario says it is (the comparison is not of nothing).
        let step = |name: &str| &reference.iter().find(|(s, _)| s == name).unwrap().1;
        if name == "lifecycle" {
            assert_eq!(
                step("stream 3 chunks").as_array().unwrap().len(),
                6,
                "{reference:?}"
            );
            assert_eq!(step("cancel again")["error"], -32002);
            assert_eq!(
                step("cancel")["task"]["status"]["state"],
                "TASK_STATE_CANCELED"
            );
            assert_eq!(step("direct message")["message"]["role"], "ROLE_AGENT");
        } else {
            assert_eq!(step("list").as_array().unwrap().len(), 1);
            assert_eq!(step("get deleted")["error"], -32001);
        }
        assert_eq!(reference.len(), v03.len(), "{name}: step count");
        for ((step, want), (_, got)) in reference.iter().zip(v03) {
            assert_eq!(
                got, want,
                "{name}: step `{step}` differs in 0.3 (left) from 1.0 (right)"
            );
        }
    }
}
