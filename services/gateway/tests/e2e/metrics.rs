//! Metrics on the admin listener (`A2A_ADMIN_LISTEN`): a few requests over each binding, then
//! `GET /metrics` over HTTP. The recorder is one per process and other tests in it record too,
//! so every assertion is on the difference between two scrapes (never less than what this test
//! did) or on a series that only has to exist.

use a2a_types::v1::a2a_service_client::A2aServiceClient;
use a2a_types::v1::{GetTaskRequest, Message, Part, Role, SendMessageRequest, part};
use serde_json::json;
use tonic::Request;

use crate::harness::{TestGateway, script_message, user_message};
use crate::upstream::{agent, script, upstream};

#[tokio::test]
async fn admin_listener_serves_the_catalogue_after_requests_on_every_binding() {
    let gw = TestGateway::with_admin("").await;
    let before = Scrape::take(&gw).await;

    // JSON-RPC: a send, an error, a keyed send and its retry, a stream.
    let params = json!({"message": user_message("hi")});
    assert!(gw.rpc("SendMessage", params.clone()).await["result"].is_object());
    let err = gw.rpc("GetTask", json!({"id": "no-such-task"})).await;
    assert_eq!(err["error"]["code"], -32001);
    let keyed = json!({"message": user_message("keyed")});
    let first = gw
        .rpc_keyed("SendMessage", keyed.clone(), "metrics-key")
        .await;
    let retry = gw.rpc_keyed("SendMessage", keyed, "metrics-key").await;
    assert_eq!(first["result"]["task"]["id"], retry["result"]["task"]["id"]);
    let events = gw
        .stream(
            "SendStreamingMessage",
            json!({"message": user_message("s")}),
        )
        .await
        .collect()
        .await;
    assert!(!events.is_empty());
    // A stream whose events come after it opened: on Redis they reach it through the bus.
    let chunks = json!({"tenant": "scenario", "message": script_message(json!({"chunks": 3, "delayMs": 20}))});
    let events = gw
        .stream("SendStreamingMessage", chunks)
        .await
        .collect()
        .await;
    assert!(events.len() >= 4, "{events:?}");

    // HTTP+JSON: a send and an error.
    let rest = |path: &str| gw.client.request(reqwest::Method::GET, gw.url(path));
    let sent = gw
        .client
        .post(gw.url("/a2a/rest/message:send"))
        .header("a2a-version", "1.0")
        .json(&json!({"message": user_message("rest")}))
        .send()
        .await
        .unwrap();
    assert_eq!(sent.status(), 200);
    let missing = rest("/a2a/rest/tasks/no-such-task").send().await.unwrap();
    assert_eq!(missing.status(), 404);

    // gRPC: a send and an error.
    let channel = tonic::transport::Channel::from_shared(format!("http://{}", gw.addr))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut grpc = A2aServiceClient::new(channel);
    grpc.send_message(Request::new(grpc_text("grpc")))
        .await
        .unwrap();
    let status = grpc
        .get_task(Request::new(GetTaskRequest {
            id: "no-such-task".into(),
            ..Default::default()
        }))
        .await
        .unwrap_err();
    assert_eq!(status.code(), tonic::Code::NotFound);

    let after = Scrape::take(&gw).await;
    let grew = |name: &str, labels: &[(&str, &str)], at_least: f64| {
        let delta = after.value(name, labels) - before.value(name, labels);
        assert!(
            delta >= at_least,
            "{name}{labels:?} grew by {delta}, expected at least {at_least}\n{}",
            after.text
        );
    };
    let requests = "a2a_requests_total";
    let ok = ("outcome", "ok");
    let not_found = ("outcome", "TASK_NOT_FOUND");
    for binding in ["jsonrpc", "rest", "grpc"] {
        let b = ("binding", binding);
        grew(requests, &[b, ("method", "SendMessage"), ok], 1.0);
        grew(requests, &[b, ("method", "GetTask"), not_found], 1.0);
        grew(
            "a2a_request_duration_seconds_count",
            &[b, ("method", "SendMessage")],
            1.0,
        );
    }
    let jsonrpc = ("binding", "jsonrpc");
    grew(requests, &[jsonrpc, ("method", "SendMessage"), ok], 3.0);
    grew(
        requests,
        &[jsonrpc, ("method", "SendStreamingMessage"), ok],
        1.0,
    );
    grew(
        "a2a_idempotent_requests_total",
        &[("result", "claimed")],
        1.0,
    );
    grew(
        "a2a_idempotent_requests_total",
        &[("result", "replayed")],
        1.0,
    );
    // The A2A semantic conventions' server metrics (OpenTelemetry draft, Prometheus naming).
    for binding in ["JSONRPC", "HTTP+JSON", "GRPC"] {
        let b = ("a2a_protocol_binding", binding);
        let send = ("a2a_method_name", "SendMessage");
        grew(
            "a2a_server_operation_duration_seconds_count",
            &[b, send],
            1.0,
        );
        grew(
            "a2a_server_operation_duration_seconds_count",
            &[
                b,
                ("a2a_method_name", "GetTask"),
                ("error_type", "TASK_NOT_FOUND"),
            ],
            1.0,
        );
    }
    for binding in ["JSONRPC", "HTTP+JSON"] {
        grew(
            "a2a_server_response_body_size_bytes_count",
            &[
                ("a2a_protocol_binding", binding),
                ("a2a_method_name", "SendMessage"),
            ],
            1.0,
        );
    }
    let streams = [
        ("a2a_protocol_binding", "JSONRPC"),
        ("a2a_method_name", "SendStreamingMessage"),
    ];
    grew(
        "a2a_server_response_time_to_first_event_seconds_count",
        &streams,
        2.0,
    );
    // A stream's count is recorded when the server drops it, just after its last event went.
    let mut counted = Scrape::take(&gw).await;
    for _ in 0..50 {
        if counted.value("a2a_server_response_sse_events_count", &streams)
            - before.value("a2a_server_response_sse_events_count", &streams)
            >= 2.0
        {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        counted = Scrape::take(&gw).await;
    }
    let count = |suffix: &str| {
        let name = format!("a2a_server_response_sse_events_{suffix}");
        counted.value(&name, &streams) - before.value(&name, &streams)
    };
    assert!(count("count") >= 2.0, "{}", counted.text);
    // Events: at least the one of the echo stream and the four of the chunked one.
    assert!(count("sum") >= 5.0, "{}", counted.text);
    let echo = ("agent", "echo");
    grew("a2a_tasks_created_total", &[echo], 5.0);
    grew(
        "a2a_task_transitions_total",
        &[echo, ("state", "TASK_STATE_COMPLETED")],
        5.0,
    );
    grew(
        "a2a_task_transitions_total",
        &[echo, ("state", "TASK_STATE_SUBMITTED")],
        5.0,
    );
    grew("a2a_turn_duration_seconds_count", &[echo], 5.0);
    grew(
        "a2a_store_operation_duration_seconds_count",
        &[("operation", "create"), ok],
        6.0,
    );
    assert!(after.has("a2a_open_streams", &[jsonrpc]), "{}", after.text);
    assert_eq!(
        after.value("a2a_build_info", &[("binary", "a2a-gateway")]),
        1.0
    );
    assert!(after.value("process_resident_memory_bytes", &[]) > 0.0);
    assert!(after.value("process_open_fds", &[]) > 0.0);
    if let Some((database_url, redis)) = gw.backends() {
        assert!(after.has("a2a_store_pool_connections", &[("state", "idle")]));
        bus_lag_is_measured_where_another_replica_published(&gw, database_url, redis).await;
    }

    // The operations guide's catalogue names every series the gateway exports.
    let doc = include_str!("../../../../docs/operations.md");
    let section = doc
        .split("\n## Metrics\n")
        .nth(1)
        .and_then(|rest| rest.split("\n## ").next())
        .expect("a Metrics section");
    for line in after.text.lines() {
        if let Some(name) = line
            .strip_prefix("# TYPE ")
            .and_then(|l| l.split_whitespace().next())
            .filter(|n| n.starts_with("a2a_"))
        {
            assert!(
                section.contains(&format!("`{name}`")),
                "the Metrics section of docs/operations.md misses {name}"
            );
        }
    }

    // The probes are on the admin listener too.
    let admin = gw.admin.expect("an admin listener");
    for path in ["/healthz", "/readyz"] {
        let resp = reqwest::get(format!("http://{admin}{path}")).await.unwrap();
        assert_eq!(resp.status(), 200, "{path}");
    }
    gw.stop().await;
}

/// The bus's delivery lag is what a replica's reader measures for the entries another process
/// published: a follower on `gw` of a chunked task that a second replica runs (on one gateway
/// alone the histogram measured only a reader that won a race against its own publish's reply).
async fn bus_lag_is_measured_where_another_replica_published(
    gw: &TestGateway,
    database_url: &str,
    redis: &a2a_testing::TestRedis,
) {
    let other = TestGateway::with_database_and_redis("", database_url, redis).await;
    let before = Scrape::take(gw).await;
    let (created, _, id) =
        crate::redis::start_scenario(&other, json!({"chunks": 5, "delayMs": 50})).await;
    let followed = gw
        .stream("SubscribeToTask", json!({"id": id}))
        .await
        .expect_sse("the follower")
        .await;
    let (_, seen) = tokio::join!(created.collect(), followed.collect());
    assert!(
        seen.len() >= 2,
        "the follower saw the task's events: {seen:?}"
    );
    let after = Scrape::take(gw).await;
    let lag = "a2a_bus_delivery_lag_seconds_count";
    assert!(
        after.value(lag, &[]) - before.value(lag, &[]) >= 1.0,
        "{lag} did not grow\n{}",
        after.text
    );
}

#[tokio::test]
async fn refused_callers_are_counted_by_reason() {
    let gw = TestGateway::with_admin(
        r#"
        [auth.schemes.key]
        scheme = { apiKeySecurityScheme = { location = "header", name = "X-API-Key" } }
        keys = [{ id = "k", key = "secret-key" }]
        "#,
    )
    .await;
    let before = Scrape::take(&gw).await;
    let anonymous = gw.rpc_status("GetTask", json!({"id": "x"}), None).await;
    assert_eq!(anonymous, 401);
    let bad = gw
        .rpc_status("GetTask", json!({"id": "x"}), Some("wrong"))
        .await;
    assert_eq!(bad, 401);
    let after = Scrape::take(&gw).await;
    for reason in ["missing_credentials", "invalid_token"] {
        let labels = [("reason", reason)];
        let delta = after.value("a2a_auth_failures_total", &labels)
            - before.value("a2a_auth_failures_total", &labels);
        assert!(delta >= 1.0, "{reason}: {delta}\n{}", after.text);
    }
    let labels = [
        ("binding", "jsonrpc"),
        ("method", "GetTask"),
        ("outcome", "UNAUTHENTICATED"),
    ];
    let delta =
        after.value("a2a_requests_total", &labels) - before.value("a2a_requests_total", &labels);
    assert!(delta >= 2.0, "{delta}\n{}", after.text);
    gw.stop().await;
}

#[tokio::test]
async fn upstream_calls_health_and_queues_are_measured_by_agent() {
    let up = upstream("").await;
    let front = TestGateway::with_env(
        &agent("metered", &up.url(""), ""),
        &[("A2A_ADMIN_LISTEN", "127.0.0.1:0".to_owned())],
    )
    .await;
    let before = Scrape::take(&front).await;
    let task = front
        .ok(
            "SendMessage",
            script("metered", json!({"chunks": 1}), json!({})),
        )
        .await;
    assert_eq!(
        task["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{task}"
    );
    let after = Scrape::take(&front).await;
    let metered = ("agent", "metered");
    let calls = |s: &Scrape| s.value("a2a_upstream_calls_total", &[metered, ("outcome", "ok")]);
    assert!(calls(&after) - calls(&before) >= 1.0, "{}", after.text);
    assert!(after.has("a2a_upstream_call_duration_seconds_count", &[metered]));
    assert_eq!(after.value("a2a_upstream_healthy", &[metered]), 1.0);
    assert!(
        after.has("a2a_upstream_queue_depth", &[metered]),
        "{}",
        after.text
    );
    let created = |s: &Scrape| s.value("a2a_tasks_created_total", &[metered]);
    assert_eq!(created(&after) - created(&before), 1.0);
    front.stop().await;
    up.stop().await;
}

impl TestGateway {
    /// A JSON-RPC call's HTTP status, with `X-API-Key: key` when given.
    async fn rpc_status(&self, method: &str, params: serde_json::Value, key: Option<&str>) -> u16 {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let mut req = self
            .client
            .post(self.url("/a2a/jsonrpc"))
            .header("a2a-version", "1.0")
            .json(&body);
        if let Some(key) = key {
            req = req.header("x-api-key", key);
        }
        req.send().await.unwrap().status().as_u16()
    }
}

fn grpc_text(t: &str) -> SendMessageRequest {
    SendMessageRequest {
        message: Some(Message {
            message_id: uuid::Uuid::new_v4().to_string(),
            role: Role::User as i32,
            parts: vec![Part {
                content: Some(part::Content::Text(t.into())),
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// One `GET /metrics` of the admin listener.
pub(crate) struct Scrape {
    text: String,
}

impl Scrape {
    pub(crate) async fn take(gw: &TestGateway) -> Self {
        let admin = gw.admin.expect("the gateway has an admin listener");
        let resp = reqwest::get(format!("http://{admin}/metrics"))
            .await
            .unwrap();
        assert_eq!(resp.status(), 200);
        let media = resp.headers()["content-type"].to_str().unwrap().to_owned();
        assert!(media.starts_with("text/plain"), "{media}");
        Self {
            text: resp.text().await.unwrap(),
        }
    }

    /// The sum of the samples of `name` whose labels include `labels` (0 when none).
    pub(crate) fn value(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.samples(name, labels).sum()
    }

    /// Whether a sample of `name` whose labels include `labels` is there.
    pub(crate) fn has(&self, name: &str, labels: &[(&str, &str)]) -> bool {
        self.samples(name, labels).next().is_some()
    }

    /// The value of `series` (name and labels, as Prometheus prints them); 0 when absent.
    pub(crate) fn series(&self, series: &str) -> f64 {
        self.text
            .lines()
            .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
            .unwrap_or(0.0)
    }

    /// The whole scrape, for failure messages.
    pub(crate) fn text(&self) -> &str {
        &self.text
    }

    fn samples<'a>(
        &'a self,
        name: &'a str,
        labels: &'a [(&str, &str)],
    ) -> impl Iterator<Item = f64> + 'a {
        self.text.lines().filter_map(move |line| {
            let (series, value) = line.rsplit_once(' ')?;
            let (metric, set) = match series.split_once('{') {
                Some((m, rest)) => (m, rest.strip_suffix('}')?),
                None => (series, ""),
            };
            let wanted = labels
                .iter()
                .all(|(k, v)| set.split(',').any(|kv| kv == format!("{k}=\"{v}\"")));
            (metric == name && wanted)
                .then(|| value.parse().ok())
                .flatten()
        })
    }
}
