//! Rate limits (`[limits.rate]`) on every binding: a per-principal and a per-IP limit refuse
//! the call past the burst with the binding's error (HTTP 429 for REST and JSON-RPC, with
//! `Retry-After` and the `RateLimit` headers; gRPC RESOURCE_EXHAUSTED with a RetryInfo), the
//! per-IP one before authentication; the Redis backend holds one limit across two replicas; an
//! unreachable Redis fails open to the local limiter.

use std::time::{Duration, Instant};

use a2a_types::v1::ListTasksRequest;
use a2a_types::v1::a2a_service_client::A2aServiceClient;
use serde_json::{Value, json};
use tonic::transport::Channel;
use tonic::{Code, Request, Status};
use tonic_types::StatusExt;

use crate::harness::{TestGateway, user_message};
use crate::metrics::Scrape;

const AUTH: &str = r#"
[auth.schemes.key]
scheme = { apiKeySecurityScheme = { location = "header", name = "X-API-Key" } }
keys = [{ id = "rest", key = "rest-secret" }, { id = "rpc", key = "rpc-secret" },
        { id = "grpc", key = "grpc-secret" }, { id = "vip", key = "vip-secret" }]
"#;

/// One call over a binding: ListTasks (cost 1), with an API key and an `X-Forwarded-For`.
#[derive(Clone, Copy, Debug)]
enum Via {
    Rest,
    JsonRpc,
    Grpc,
}

const BINDINGS: [Via; 3] = [Via::Rest, Via::JsonRpc, Via::Grpc];

/// What came back: the HTTP status (gRPC: 200 for OK), the headers, and the error if any.
struct Answer {
    ok: bool,
    headers: Vec<(String, String)>,
    /// REST/JSON-RPC: the error body; gRPC: none.
    body: Value,
    status: Option<Status>,
    http: u16,
}

impl Answer {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

async fn call(gw: &TestGateway, via: Via, key: Option<&str>, from: Option<&str>) -> Answer {
    match via {
        Via::Rest | Via::JsonRpc => {
            let mut req = match via {
                Via::Rest => gw.client.get(gw.url("/a2a/rest/tasks")),
                _ => gw
                    .client
                    .post(gw.url("/a2a/jsonrpc"))
                    .json(&json!({"jsonrpc": "2.0", "id": 7, "method": "ListTasks", "params": {}})),
            };
            req = req.header("a2a-version", "1.0");
            if let Some(key) = key {
                req = req.header("x-api-key", key);
            }
            if let Some(from) = from {
                req = req.header("x-forwarded-for", from);
            }
            let resp = req.send().await.unwrap();
            let http = resp.status().as_u16();
            let headers = resp
                .headers()
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_str().unwrap().to_owned()))
                .collect();
            let body: Value = resp.json().await.unwrap();
            let ok = http == 200 && body.get("error").is_none();
            Answer {
                ok,
                headers,
                body,
                status: None,
                http,
            }
        }
        Via::Grpc => {
            let mut client = A2aServiceClient::new(channel(gw).await);
            let mut req = Request::new(ListTasksRequest::default());
            let md = req.metadata_mut();
            md.insert("a2a-version", "1.0".parse().unwrap());
            if let Some(key) = key {
                md.insert("x-api-key", key.parse().unwrap());
            }
            if let Some(from) = from {
                md.insert("x-forwarded-for", from.parse().unwrap());
            }
            match client.list_tasks(req).await {
                Ok(resp) => Answer {
                    ok: true,
                    headers: metadata(resp.metadata()),
                    body: Value::Null,
                    status: None,
                    http: 200,
                },
                Err(status) => Answer {
                    ok: false,
                    headers: metadata(status.metadata()),
                    body: Value::Null,
                    status: Some(status),
                    http: 0,
                },
            }
        }
    }
}

fn metadata(md: &tonic::metadata::MetadataMap) -> Vec<(String, String)> {
    md.clone()
        .into_headers()
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_str().unwrap_or_default().to_owned()))
        .collect()
}

async fn channel(gw: &TestGateway) -> Channel {
    Channel::from_shared(format!("http://{}", gw.addr))
        .unwrap()
        .connect()
        .await
        .unwrap()
}

/// Asserts the refusal of `via` by the limit of `scope` (`limit` units): status, error, retry
/// hint (at least 1 s and at most `max_retry`), and the policy headers of the HTTP bindings.
fn assert_limited(a: &Answer, via: Via, scope: &str, limit: u32, max_retry: Duration) {
    assert!(!a.ok, "{via:?}: refused");
    match via {
        Via::Grpc => {
            let status = a.status.as_ref().expect("a gRPC status");
            assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
            let info = status.get_details_error_info().expect("an ErrorInfo");
            assert_eq!(info.reason, "RATE_LIMIT_EXCEEDED");
            assert_eq!(info.metadata["scope"], scope);
            let delay = status
                .get_details_retry_info()
                .and_then(|r| r.retry_delay)
                .expect("a RetryInfo with a delay");
            assert!(
                delay > Duration::ZERO && delay <= max_retry,
                "{via:?}: {delay:?}"
            );
        }
        Via::Rest | Via::JsonRpc => {
            assert_eq!(a.http, 429, "{via:?}: {}", a.body);
            let retry: u64 = a
                .header("retry-after")
                .expect("Retry-After")
                .parse()
                .unwrap();
            assert!(
                retry >= 1 && retry <= max_retry.as_secs().max(1),
                "{via:?}: Retry-After {retry}"
            );
            let policy = a.header("ratelimit-policy").expect("RateLimit-Policy");
            assert!(
                policy.starts_with(&format!("\"{scope}\";q={limit};w=")),
                "{policy}"
            );
            assert_eq!(
                a.header("ratelimit"),
                Some(format!("\"{scope}\";r=0;t={retry}").as_str())
            );
            let (reason, details) = match via {
                Via::JsonRpc => {
                    assert_eq!(a.body["error"]["code"], -32029, "{}", a.body);
                    assert_eq!(a.body["id"], 7);
                    ("reason", &a.body["error"]["data"][0])
                }
                _ => {
                    assert_eq!(a.body["error"]["code"], 429);
                    assert_eq!(a.body["error"]["status"], "RESOURCE_EXHAUSTED");
                    ("reason", &a.body["error"]["details"][0])
                }
            };
            assert_eq!(details[reason], "RATE_LIMIT_EXCEEDED", "{}", a.body);
            assert_eq!(details["metadata"]["scope"], scope);
        }
    }
}

#[tokio::test]
async fn a_principal_past_its_burst_is_refused_on_every_binding() {
    // 0.1 units/s: no unit comes back while the test runs, however slow the machine; a refused
    // caller is told to come back in about 10 s.
    let gw = TestGateway::with_config(&format!(
        "{AUTH}
[limits.rate]
principal = {{ rate = 0.1, burst = 5 }}
[[limits.rate.overrides]]
key = \"vip\"
rate = 100
burst = 50
"
    ))
    .await;
    for (via, key) in BINDINGS
        .into_iter()
        .zip(["rest-secret", "rpc-secret", "grpc-secret"])
    {
        for left in (0..5).rev() {
            let a = call(&gw, via, Some(key), None).await;
            assert!(a.ok, "{via:?}: call {} passes", 5 - left);
            // Successful answers say what is left of the caller's limit.
            assert_eq!(
                a.header("ratelimit"),
                Some(format!("\"principal\";r={left};t={}", (5 - left) * 10).as_str()),
                "{via:?}"
            );
            assert_eq!(a.header("ratelimit-policy"), Some("\"principal\";q=5;w=50"));
        }
        let refused = call(&gw, via, Some(key), None).await;
        assert_limited(&refused, via, "principal", 5, Duration::from_secs(10));
    }
    // `a2a-client` reads each binding's refusal as the typed error, with its retry hint.
    let clients = [
        (a2a_client::BindingKind::HttpJson, "rest-secret"),
        (a2a_client::BindingKind::JsonRpc, "rpc-secret"),
        (a2a_client::BindingKind::Grpc, "grpc-secret"),
    ];
    for (kind, key) in clients {
        let client = crate::auth::client(&gw, kind, Some(("X-API-Key", key)));
        let err = client.list_tasks(Default::default()).await.unwrap_err();
        match err.as_a2a() {
            Some(a2a_types::A2aError::RateLimited { scope, limit, .. }) => {
                assert_eq!((scope.as_str(), *limit), ("principal", 5), "{kind:?}")
            }
            other => panic!("{kind:?}: {other:?} ({err})"),
        }
        assert!(err.as_a2a().and_then(|e| e.retry_after()).is_some());
    }
    // Each principal has its own bucket; an override has its own rate and burst.
    for _ in 0..20 {
        assert!(call(&gw, Via::Rest, Some("vip-secret"), None).await.ok);
    }
    gw.stop().await;
}

#[tokio::test]
async fn a_client_ip_is_limited_before_authentication() {
    // Each binding's calls come from their own address (X-Forwarded-For, as a proxy sends it).
    let gw = TestGateway::with_admin(&format!(
        "{AUTH}
[limits.rate]
ip = {{ rate = 0.1, burst = 5 }}
client_ip_header = \"X-Forwarded-For\"
trusted_proxies = [\"127.0.0.1\"]
"
    ))
    .await;
    let before = Scrape::take(&gw).await;
    for (via, from) in BINDINGS
        .into_iter()
        .zip(["10.9.0.1", "10.9.0.2", "10.9.0.3"])
    {
        // A failed-auth flood: the first calls are refused by authentication, the next by the
        // limit, which is checked first.
        for _ in 0..5 {
            let a = call(&gw, via, Some("wrong-key"), Some(from)).await;
            assert!(!a.ok);
            assert!(
                a.http == 401
                    || a.status
                        .as_ref()
                        .is_some_and(|s| s.code() == Code::Unauthenticated)
            );
        }
        let refused = call(&gw, via, Some("rest-secret"), Some(from)).await;
        assert_limited(&refused, via, "ip", 5, Duration::from_secs(10));
    }
    // Another address is not limited by those.
    assert!(
        call(&gw, Via::Rest, Some("rest-secret"), Some("10.9.0.4"))
            .await
            .ok
    );
    let after = Scrape::take(&gw).await;
    let limited = |s: &Scrape| s.value("a2a_rate_limited_total", &[("scope", "ip")]);
    assert!(limited(&after) - limited(&before) >= 3.0);
    gw.stop().await;
}

#[tokio::test]
async fn without_a_client_ip_header_the_peer_address_is_the_key() {
    let gw = TestGateway::with_config("[limits.rate]\nip = { rate = 0.1, burst = 5 }").await;
    // The header is not trusted unless configured: every call below comes from 127.0.0.1.
    for (i, via) in [Via::Rest, Via::JsonRpc, Via::Grpc, Via::Rest, Via::Grpc]
        .into_iter()
        .enumerate()
    {
        assert!(call(&gw, via, None, Some(&format!("10.0.0.{i}"))).await.ok);
    }
    for via in BINDINGS {
        let refused = call(&gw, via, None, None).await;
        assert_limited(&refused, via, "ip", 5, Duration::from_secs(10));
    }
    gw.stop().await;
}

#[tokio::test]
async fn an_agent_limit_counts_the_sends_of_every_caller() {
    // A send costs 5: two pass, the third is refused by the agent's limit.
    let gw = TestGateway::with_config("[limits.rate]\nagent = { rate = 0.5, burst = 10 }").await;
    let send = json!({"message": user_message("hi")});
    for _ in 0..2 {
        assert!(gw.rpc("SendMessage", send.clone()).await["result"].is_object());
    }
    let resp = gw
        .post_raw(
            json!({"jsonrpc": "2.0", "id": 7, "method": "SendMessage", "params": send}).to_string(),
        )
        .await;
    let a = Answer {
        ok: false,
        http: resp.status().as_u16(),
        headers: resp
            .headers()
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_str().unwrap().to_owned()))
            .collect(),
        body: resp.json().await.unwrap(),
        status: None,
    };
    assert_limited(&a, Via::JsonRpc, "agent", 10, Duration::from_secs(10));
    // Reads do not reach the agent: not limited by it.
    assert!(gw.rpc("ListTasks", json!({})).await["result"].is_object());
    gw.stop().await;
}

/// Two replicas on one Redis share each key's limit: together they let through what one would
/// (the burst plus the rate times the elapsed time), within 10%.
#[tokio::test]
async fn the_redis_backend_holds_one_limit_across_two_replicas() {
    let redis = a2a_testing::TestRedis::create().await;
    let env = [
        ("A2A_REDIS_URL", redis.url().to_owned()),
        ("A2A_REDIS_PREFIX", redis.prefix().to_owned()),
    ];
    // A generous Redis timeout: on a loaded machine a slow answer must not fail open (which
    // would let each replica through on its own).
    let toml = "[limits.rate]\nbackend = \"redis\"\nredis_timeout_ms = 2000\nip = { rate = 100, burst = 50 }";
    let a = TestGateway::with_env(toml, &env).await;
    let b = TestGateway::with_env(toml, &env).await;
    let started = Instant::now();
    let deadline = started + Duration::from_secs(3);
    let mut loops = Vec::new();
    for gw in [&a, &b] {
        for _ in 0..4 {
            let (client, url) = (gw.client.clone(), gw.url("/a2a/rest/tasks"));
            loops.push(tokio::spawn(async move {
                let (mut passed, mut refused) = (0u64, 0u64);
                while Instant::now() < deadline {
                    let resp = client.get(&url).send().await.unwrap();
                    match resp.status().as_u16() {
                        200 => passed += 1,
                        429 => refused += 1,
                        other => panic!("HTTP {other}"),
                    }
                }
                (passed, refused)
            }));
        }
    }
    let (mut passed, mut refused) = (0, 0);
    for l in loops {
        let (p, r) = l.await.unwrap();
        passed += p;
        refused += r;
    }
    let elapsed = started.elapsed().as_secs_f64();
    let allowed = 50.0 + 100.0 * elapsed;
    let ratio = passed as f64 / allowed;
    assert!(
        refused > passed,
        "the replicas were driven past the limit: {passed} passed, {refused} refused"
    );
    eprintln!(
        "two replicas: {passed} passed, {refused} refused in {elapsed:.2} s; one limit allows {allowed:.0} ({ratio:.3})"
    );
    assert!(
        (0.9..=1.1).contains(&ratio),
        "{passed} passed in {elapsed:.2} s on two replicas; one limit allows {allowed:.0} ({ratio:.3})"
    );
    a.stop().await;
    b.stop().await;
}

/// While the Redis of the shared limiter is unreachable, each replica limits on its own (fails
/// open to its local limiter) and says so in a metric.
#[tokio::test]
async fn an_unreachable_redis_fails_open_to_the_local_limiter() {
    // Nothing listens on port 1.
    let env = [
        ("A2A_REDIS_URL", "redis://127.0.0.1:1".to_owned()),
        ("A2A_ADMIN_LISTEN", "127.0.0.1:0".to_owned()),
    ];
    let toml = "[limits.rate]\nbackend = \"redis\"\nip = { rate = 0.1, burst = 5 }";
    let gw = TestGateway::with_env(toml, &env).await;
    let before = Scrape::take(&gw).await;
    let started = Instant::now();
    for _ in 0..5 {
        assert!(call(&gw, Via::Rest, None, None).await.ok);
    }
    let refused = call(&gw, Via::Rest, None, None).await;
    assert_limited(&refused, Via::Rest, "ip", 5, Duration::from_secs(10));
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "no call waited for Redis long"
    );
    let after = Scrape::take(&gw).await;
    let open = |s: &Scrape| s.value("a2a_rate_limit_fail_open_total", &[]);
    assert!(
        open(&after) - open(&before) >= 6.0,
        "every decision was local"
    );
    gw.stop().await;
}
