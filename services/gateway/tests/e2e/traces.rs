//! Traces and logs of the real binaries: an OTLP receiver in the test (a tonic TraceService,
//! `a2a_testing::otlp`) gets the spans of a front gateway and of its upstream (another gateway
//! exporting to the same receiver), and the webhook gets the trace; JSON log lines carry the trace
//! ids and never a credential.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use a2a_testing::otlp::{OtlpReceiver, ReceivedSpan};
use a2a_testing::receiver::Receiver;
use serde_json::{Value, json};

use crate::harness::{SseStream, script_message};

mod export;

/// A gateway binary; killed when dropped. Keeps every stdout line.
struct Gateway {
    _child: Stopped,
    url: String,
    lines: Arc<Mutex<Vec<String>>>,
}

/// A child process killed when dropped.
struct Stopped(Child);

impl Drop for Stopped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Gateway {
    /// Starts the binary (embedded mode) on a port of its own, with `toml` as its config file,
    /// exporting traces to `otlp` as `service`.
    fn start(service: &str, otlp: &OtlpReceiver, toml: &str, env: &[(&str, &str)]) -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let url = format!("http://127.0.0.1:{port}");
        let dir = std::env::temp_dir().join(format!("a2a-traces-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        let config = dir.join("gateway.toml");
        std::fs::write(&config, toml).unwrap();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_a2a-gateway"));
        cmd.env_remove("A2A_DATABASE_URL")
            .env_remove("A2A_REDIS_URL")
            .env_remove("A2A_ADMIN_LISTEN")
            .env("A2A_CONFIG", &config)
            .env("A2A_LISTEN", format!("127.0.0.1:{port}"))
            .env("A2A_PUBLIC_URL", &url)
            .env("RUST_LOG", "info")
            .env("NO_COLOR", "1")
            .env("OTEL_EXPORTER_OTLP_ENDPOINT", otlp.endpoint())
            .env("OTEL_SERVICE_NAME", service)
            // Export every 100 ms (the SDK's default waits 5 s).
            .env("OTEL_BSP_SCHEDULE_DELAY", "100")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("the gateway binary starts");
        let stdout = child.stdout.take().unwrap();
        let lines = Arc::new(Mutex::new(Vec::new()));
        let (tx, rx) = std::sync::mpsc::channel();
        let kept = lines.clone();
        std::thread::spawn(move || {
            let mut said = Some(tx);
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if line.contains("listening on http://")
                    && let Some(tx) = said.take()
                {
                    let _ = tx.send(());
                }
                kept.lock().unwrap().push(line);
            }
        });
        rx.recv_timeout(Duration::from_secs(30))
            .expect("the gateway says where it listens");
        Self {
            _child: Stopped(child),
            url,
            lines,
        }
    }

    fn lines(&self) -> Vec<String> {
        self.lines.lock().unwrap().clone()
    }
}

const CLIENT_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CLIENT_SPAN: &str = "00f067aa0ba902b7";

fn one<'a>(
    spans: &'a [ReceivedSpan],
    what: &str,
    f: impl Fn(&ReceivedSpan) -> bool,
) -> &'a ReceivedSpan {
    let found: Vec<&ReceivedSpan> = spans.iter().filter(|s| f(s)).collect();
    assert_eq!(found.len(), 1, "exactly one {what}: {found:#?}");
    found[0]
}

/// One streaming task through the upstream agent `up` of the gateway at `front`, with a push
/// config for `webhook`, under the client's trace; it must complete.
async fn stream_to_completion(front: &str, webhook: &Receiver) {
    let resp = reqwest::Client::new()
        .post(format!("{front}/a2a/jsonrpc"))
        .header("traceparent", format!("00-{CLIENT_TRACE}-{CLIENT_SPAN}-01"))
        .header("accept", "text/event-stream")
        .json(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage",
            "params": {"tenant": "up",
                       "message": script_message(json!({"chunks": 2})),
                       "configuration": {"taskPushNotificationConfig":
                           {"url": webhook.url("/hook")}}}}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let events = SseStream::new(resp).collect().await;
    assert!(!events.is_empty());
    let last: &Value = &events.last().unwrap().data;
    assert_eq!(
        last["result"]["statusUpdate"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{events:?}"
    );
}

/// Names the parent chain of a span, for failure messages.
fn is_child(child: &ReceivedSpan, parent: &ReceivedSpan) -> bool {
    child.trace_id == parent.trace_id && child.parent_span_id == parent.span_id
}

#[tokio::test]
async fn one_trace_runs_from_the_client_through_the_gateway_and_its_upstream_to_the_webhook() {
    let otlp = OtlpReceiver::start().await;
    let upstream = Gateway::start("upstream-gw", &otlp, "default_agent = \"scenario\"\n", &[]);
    let webhook = Receiver::start().await;
    let front_toml = format!(
        "[[agents]]\nname = \"up\"\ncard_url = \"{}\"\nhealth_interval_secs = 1\n\
         [push]\nallowed_hosts = [\"127.0.0.1\"]\n",
        upstream.url
    );
    let front = Gateway::start("front-gw", &otlp, &front_toml, &[]);

    // One streaming task through the upstream agent, with a push config, under the client's
    // trace.
    stream_to_completion(&front.url, &webhook).await;
    webhook
        .wait_for(Duration::from_secs(20), |r| {
            r.iter()
                .any(|r| r.json.to_string().contains("TASK_STATE_COMPLETED"))
        })
        .await;

    let in_trace = |s: &ReceivedSpan| s.trace_id == CLIENT_TRACE;
    // Spans arrive as their spans end and batches go out: wait for every one asserted on below.
    let hooks = webhook.requests().len();
    let spans = otlp
        .wait_for(Duration::from_secs(20), |spans| {
            let ours: Vec<_> = spans.iter().filter(|s| in_trace(s)).collect();
            let has = |service: &str, f: &dyn Fn(&ReceivedSpan) -> bool| {
                ours.iter().any(|s| s.service == service && f(s))
            };
            let count = |name: &str| {
                ours.iter()
                    .filter(|s| s.service == "front-gw" && s.name == name)
                    .count()
            };
            has("front-gw", &|s| s.kind == 2)
                && has("front-gw", &|s| s.name == "turn up")
                && has("front-gw", &|s| {
                    s.kind == 3 && s.name == "SendStreamingMessage"
                })
                && has("upstream-gw", &|s| s.kind == 2)
                && has("upstream-gw", &|s| s.name == "turn scenario")
                && count("push deliver") >= hooks
        })
        .await;
    let spans: Vec<ReceivedSpan> = spans.into_iter().filter(in_trace).collect();

    // The front's SERVER span: child of the client's span, named after the method.
    let server = one(&spans, "front SERVER span", |s| {
        s.service == "front-gw" && s.kind == 2
    });
    assert_eq!(server.name, "SendStreamingMessage");
    assert_eq!(server.parent_span_id, CLIENT_SPAN);
    assert_eq!(server.attr("rpc.system.name"), Some("jsonrpc"));
    assert_eq!(server.attr("rpc.method"), Some("SendStreamingMessage"));
    assert_eq!(server.attr("http.request.method"), Some("POST"));
    assert_eq!(server.attr("http.route"), Some("/a2a/jsonrpc"));
    assert_eq!(server.attr("http.response.status_code"), Some("200"));
    assert_eq!(server.attr("a2a.binding"), Some("jsonrpc"));
    assert_eq!(server.attr("a2a.agent"), Some("up"));
    let task_id = server.attr("a2a.task.id").expect("a2a.task.id").to_owned();
    assert!(
        server
            .attr("gen_ai.conversation.id")
            .is_some_and(|c| !c.is_empty())
    );
    assert_eq!(server.attr("error.type"), None);

    // The turn: child of the SERVER span (it outlives the request).
    let turn = one(&spans, "front turn", |s| {
        s.service == "front-gw" && s.name == "turn up"
    });
    assert!(is_child(turn, server), "{turn:#?} under {server:#?}");
    assert_eq!(turn.attr("a2a.task.id"), Some(task_id.as_str()));

    // The upstream call: a CLIENT span under the turn, and the upstream's SERVER span under it.
    let call = one(&spans, "upstream CLIENT span", |s| {
        s.service == "front-gw" && s.kind == 3 && s.name == "SendStreamingMessage"
    });
    assert!(is_child(call, turn), "{call:#?} under {turn:#?}");
    assert_eq!(call.attr("a2a.agent"), Some("up"));
    let up_server = one(&spans, "upstream SERVER span", |s| {
        s.service == "upstream-gw" && s.kind == 2 && s.name == "SendStreamingMessage"
    });
    assert!(is_child(up_server, call), "{up_server:#?} under {call:#?}");
    let up_turn = one(&spans, "upstream turn", |s| {
        s.service == "upstream-gw" && s.name == "turn scenario"
    });
    assert!(is_child(up_turn, up_server));

    // In process, store operations and publishes are not spans (microseconds each; the
    // deployed-shape test below sees them on PostgreSQL and Redis).
    assert!(
        !spans
            .iter()
            .any(|s| s.service == "front-gw"
                && (s.name.starts_with("store ") || s.name == "publish")),
        "{spans:#?}"
    );

    // Push delivery (the embedded gateway runs the worker's pipeline): each attempt is a child
    // of the turn whose event it delivers, and the webhook got that attempt's traceparent.
    let delivers: Vec<_> = spans
        .iter()
        .filter(|s| s.service == "front-gw" && s.name == "push deliver")
        .collect();
    assert!(!delivers.is_empty());
    for d in &delivers {
        assert!(is_child(d, turn), "{d:#?} under {turn:#?}");
        assert_eq!(d.attr("a2a.task.id"), Some(task_id.as_str()));
        assert_eq!(d.attr("http.response.status_code"), Some("200"));
    }
    for r in webhook.requests() {
        let tp = r.headers["traceparent"].to_str().unwrap().to_owned();
        let parts: Vec<&str> = tp.split('-').collect();
        assert_eq!(parts[1], CLIENT_TRACE, "{tp}");
        assert!(
            delivers.iter().any(|d| d.span_id == parts[2]),
            "the webhook's parent {tp} is a delivery span"
        );
    }
}

#[tokio::test]
async fn json_log_lines_carry_trace_ids_and_never_a_credential() {
    const KEY: &str = "alice-key-9f8e7d6c";
    const WRONG_KEY: &str = "wrong-key-5a4b3c2d";
    const BEARER: &str = "bearer-token-1e2f3a4b";
    const PUSH_CREDENTIALS: &str = "push-cred-77aa88bb";
    const PUSH_TOKEN: &str = "push-token-99cc00dd";
    let otlp = OtlpReceiver::start().await;
    let webhook = Receiver::start().await;
    let toml = format!(
        r#"
[auth]
requirements = [{{ key = [] }}]

[auth.schemes.key]
scheme = {{ apiKeySecurityScheme = {{ location = "header", name = "X-API-Key" }} }}
keys = [{{ id = "alice", key = "{KEY}" }}]

[push]
allowed_hosts = ["127.0.0.1"]
"#
    );
    // Debug level: the most the gateway logs.
    let gw = Gateway::start(
        "logs-gw",
        &otlp,
        &toml,
        &[("A2A_LOG_FORMAT", "json"), ("RUST_LOG", "debug")],
    );
    let client = reqwest::Client::new();
    let rpc = |key: &str, auth: Option<&str>, params: Value| {
        let mut req = client
            .post(format!("{}/a2a/jsonrpc", gw.url))
            .header("x-api-key", key)
            .header("traceparent", format!("00-{CLIENT_TRACE}-{CLIENT_SPAN}-01"))
            .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": params}));
        if let Some(a) = auth {
            req = req.header("authorization", a);
        }
        req.send()
    };
    let push = json!({"url": webhook.url("/hook"), "token": PUSH_TOKEN,
        "authentication": {"scheme": "Bearer", "credentials": PUSH_CREDENTIALS}});
    let ok = rpc(
        KEY,
        Some(&format!("Bearer {BEARER}")),
        json!({"message": script_message(json!({"chunks": 1})),
               "configuration": {"taskPushNotificationConfig": push}}),
    )
    .await
    .unwrap();
    assert_eq!(ok.status(), 200);
    let body: Value = ok.json().await.unwrap();
    assert!(body.get("result").is_some(), "{body}");
    let refused = rpc(
        WRONG_KEY,
        None,
        json!({"message": script_message(json!({}))}),
    )
    .await
    .unwrap();
    assert_eq!(refused.status(), 401);
    webhook
        .wait_for(Duration::from_secs(20), |r| {
            r.iter()
                .any(|r| r.json.to_string().contains("TASK_STATE_COMPLETED"))
        })
        .await;
    // The access line of each call is written when it ends; give the pipe a moment.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let lines = loop {
        let lines = gw.lines();
        let calls = lines.iter().filter(|l| l.contains("a2a call")).count();
        if calls >= 2 || std::time::Instant::now() > deadline {
            break lines;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(lines.len() > 2, "{lines:#?}");
    let parsed: Vec<Value> = lines
        .iter()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    for p in &parsed {
        assert!(p["timestamp"].is_string() && p["level"].is_string(), "{p}");
    }
    // The calls' lines are in their SERVER spans, so they carry the client's trace id.
    let calls: Vec<&Value> = parsed
        .iter()
        .filter(|p| p["message"] == "a2a call")
        .collect();
    assert_eq!(calls.len(), 2, "{lines:#?}");
    for c in &calls {
        assert_eq!(c["trace_id"], CLIENT_TRACE, "{c}");
        assert_eq!(c["span_id"].as_str().map(str::len), Some(16), "{c}");
    }
    assert!(calls.iter().any(|c| c["outcome"] == "UNAUTHENTICATED"));
    let refusal = parsed
        .iter()
        .find(|p| p["message"] == "request refused: bad credentials");
    assert_eq!(
        refusal.expect("the refusal is logged")["trace_id"],
        CLIENT_TRACE
    );
    // No line says a credential, not even a refused one.
    for secret in [KEY, WRONG_KEY, BEARER, PUSH_CREDENTIALS, PUSH_TOKEN] {
        for l in &lines {
            assert!(!l.contains(secret), "a log line shows {secret}: {l}");
        }
    }
}

/// gRPC and HTTP+JSON toward the upstream: the CLIENT span's `traceparent` goes as gRPC metadata
/// or an HTTP header, and the upstream's SERVER span (attributes of its binding) is its child.
#[tokio::test]
async fn upstream_calls_over_grpc_and_rest_carry_the_trace() {
    let otlp = OtlpReceiver::start().await;
    let upstream = Gateway::start("upstream-gw", &otlp, "default_agent = \"scenario\"\n", &[]);
    for (binding, system, route) in [
        ("GRPC", Some("grpc"), None),
        ("HTTP+JSON", None, Some("/a2a/rest/message:stream")),
    ] {
        let toml = format!(
            "[[agents]]\nname = \"up\"\ncard_url = \"{}\"\nbindings = [\"{binding}\"]\n",
            upstream.url
        );
        let service = format!("front-{binding}");
        let front = Gateway::start(&service, &otlp, &toml, &[]);
        // A new trace (no client traceparent): the front's SERVER span is its root.
        let resp: Value = reqwest::Client::new()
            .post(format!("{}/a2a/jsonrpc", front.url))
            .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
                "params": {"tenant": "up", "message": script_message(json!({}))}}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert!(resp.get("result").is_some(), "{binding}: {resp}");
        let spans = otlp
            .wait_for(Duration::from_secs(20), |spans| {
                spans.iter().any(|s| s.service == service && s.kind == 2)
                    && spans.iter().any(|s| {
                        s.service == service && s.kind == 3 && s.attr("a2a.agent").is_some()
                    })
                    && spans.iter().any(|s| {
                        s.service == "upstream-gw"
                            && s.kind == 2
                            && s.attr("a2a.binding")
                                == Some(if system.is_some() { "grpc" } else { "rest" })
                    })
            })
            .await;
        let server = one(&spans, "front SERVER span", |s| {
            s.service == service && s.kind == 2
        });
        assert_eq!(server.parent_span_id, "", "{binding}: a root");
        let call = one(&spans, "CLIENT span", |s| {
            s.service == service && s.kind == 3 && s.attr("a2a.agent") == Some("up")
        });
        assert_eq!(call.attr("a2a.binding"), Some(binding));
        assert_eq!(call.attr("rpc.system.name"), system);
        let up_server = one(&spans, "upstream SERVER span", |s| {
            s.service == "upstream-gw" && s.kind == 2 && s.trace_id == server.trace_id
        });
        assert!(
            is_child(up_server, call),
            "{binding}: {up_server:#?} under {call:#?}"
        );
        // The gateway follows a streaming upstream by its stream, even for a blocking send.
        assert_eq!(call.name, "SendStreamingMessage");
        assert_eq!(up_server.name, "SendStreamingMessage");
        assert_eq!(up_server.attr("rpc.system.name"), system);
        assert_eq!(up_server.attr("http.route"), route);
        if system == Some("grpc") {
            assert_eq!(up_server.attr("rpc.response.status_code"), Some("OK"));
        } else {
            assert_eq!(up_server.attr("http.request.method"), Some("POST"));
            assert_eq!(up_server.attr("http.response.status_code"), Some("200"));
        }
    }
}

/// `a2a-worker`, built beside this package's binary by a workspace build (the README's test
/// command builds every package).
fn worker_binary() -> std::path::PathBuf {
    let path = std::path::Path::new(env!("CARGO_BIN_EXE_a2a-gateway")).with_file_name("a2a-worker");
    assert!(
        path.exists(),
        "{} is missing: build the workspace (cargo build -p a2a-worker) first",
        path.display()
    );
    path
}

/// The deployed shape: a gateway on PostgreSQL and Redis with an upstream agent, and an
/// `a2a-worker` process delivering the push. One trace runs client → gateway → upstream, and
/// gateway → Redis (the entry's `tp`) → worker → webhook.
#[tokio::test]
async fn one_trace_runs_through_redis_and_the_worker_to_the_webhook() {
    let db = a2a_testing::TestDatabase::create().await;
    let redis = a2a_testing::TestRedis::create().await;
    let otlp = OtlpReceiver::start().await;
    let webhook = Receiver::start().await;
    let key = Command::new(worker_binary())
        .arg("keygen")
        .output()
        .unwrap();
    assert!(key.status.success());
    let key_path = std::env::temp_dir().join(format!("a2a-traces-{}.pem", uuid::Uuid::new_v4()));
    std::fs::write(&key_path, &key.stdout).unwrap();
    let keys = format!("k1={}", key_path.display());
    let upstream = Gateway::start("upstream-gw", &otlp, "default_agent = \"scenario\"\n", &[]);
    let front_toml = format!(
        "[[agents]]\nname = \"up\"\ncard_url = \"{}\"\nhealth_interval_secs = 1\n\
         [database]\nmigrate = true\n",
        upstream.url
    );
    let shared = [
        ("A2A_DATABASE_URL", db.url()),
        ("A2A_REDIS_URL", redis.url()),
        ("A2A_REDIS_PREFIX", redis.prefix()),
        ("A2A_PUSH_SIGNING_KEYS", keys.as_str()),
        ("A2A_PUSH_ALLOWED_HOSTS", "127.0.0.1"),
    ];
    let front = Gateway::start("front-gw", &otlp, &front_toml, &shared);
    let mut worker = Command::new(worker_binary());
    worker
        .env_clear()
        .envs(shared)
        .env("A2A_PUBLIC_URL", &front.url)
        .env("A2A_WORKER_LISTEN", "127.0.0.1:0")
        .env("RUST_LOG", "warn,a2a_worker=info")
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", otlp.endpoint())
        .env("OTEL_BSP_SCHEDULE_DELAY", "100");
    // Stopped however the test ends (a failed assertion must not leave it running).
    let _worker = Stopped(a2a_testing::spawn_listening(worker, "worker").0);

    stream_to_completion(&front.url, &webhook).await;
    // The task, working, two chunks, completed: every event reaches the webhook.
    webhook
        .wait_for(Duration::from_secs(30), |r| {
            r.iter()
                .any(|r| r.json.to_string().contains("TASK_STATE_COMPLETED"))
        })
        .await;
    let hooks = webhook.requests();
    let spans = otlp
        .wait_for(Duration::from_secs(20), |spans| {
            let ours: Vec<_> = spans
                .iter()
                .filter(|s| s.trace_id == CLIENT_TRACE)
                .collect();
            let delivers: Vec<_> = ours
                .iter()
                .filter(|s| s.service == "a2a-worker" && s.name == "push deliver")
                .collect();
            delivers.len() >= hooks.len()
                && delivers.iter().all(|d| {
                    ours.iter()
                        .any(|p| p.service == "front-gw" && p.name == "publish" && is_child(d, p))
                })
                && ours
                    .iter()
                    .any(|s| s.service == "upstream-gw" && s.kind == 2)
                && ours
                    .iter()
                    .any(|s| s.service == "front-gw" && s.name == "turn up")
        })
        .await;
    let _ = std::fs::remove_file(&key_path);
    let spans: Vec<ReceivedSpan> = spans
        .into_iter()
        .filter(|s| s.trace_id == CLIENT_TRACE)
        .collect();

    // Client → front gateway → upstream agent, one trace.
    let server = one(&spans, "front SERVER span", |s| {
        s.service == "front-gw" && s.kind == 2
    });
    assert_eq!(server.parent_span_id, CLIENT_SPAN);
    let turn = one(&spans, "front turn", |s| {
        s.service == "front-gw" && s.name == "turn up"
    });
    assert!(is_child(turn, server));
    let call = one(&spans, "upstream CLIENT span", |s| {
        s.service == "front-gw" && s.kind == 3 && s.name == "SendStreamingMessage"
    });
    assert!(is_child(call, turn));
    let up_server = one(&spans, "upstream SERVER span", |s| {
        s.service == "upstream-gw" && s.kind == 2
    });
    assert!(is_child(up_server, call));
    // Front gateway → Redis → worker → webhook: each delivery attempt is a span of the worker,
    // child of the publish (in the turn) whose Redis entry carried it, and the webhook got it.
    let publishes: Vec<_> = spans
        .iter()
        .filter(|s| s.service == "front-gw" && s.name == "publish")
        .collect();
    assert!(!publishes.is_empty() && publishes.iter().all(|p| is_child(p, turn)));
    // Each PostgreSQL operation of the turn is a CLIENT span under it.
    let create = one(&spans, "store create", |s| {
        s.service == "front-gw" && s.name == "store create"
    });
    assert!(is_child(create, turn));
    assert_eq!(create.attr("db.operation.name"), Some("create"));
    let delivers: Vec<_> = spans
        .iter()
        .filter(|s| s.service == "a2a-worker" && s.name == "push deliver")
        .collect();
    assert!(delivers.len() >= hooks.len(), "{delivers:#?}");
    for d in &delivers {
        assert!(publishes.iter().any(|p| is_child(d, p)), "{d:#?}");
        assert_eq!(d.kind, 3, "CLIENT");
    }
    for r in &hooks {
        let tp = r.headers["traceparent"].to_str().unwrap().to_owned();
        let parts: Vec<&str> = tp.split('-').collect();
        assert_eq!(parts[1], CLIENT_TRACE, "{tp}");
        assert!(
            delivers.iter().any(|d| d.span_id == parts[2]),
            "the webhook's parent {tp} is a worker delivery span"
        );
    }
    // Nothing of the gateway's own delivery: in this shape the worker delivers.
    assert!(
        !spans
            .iter()
            .any(|s| s.service == "front-gw" && s.name == "push deliver")
    );
}

/// Sampling is decided when a request arrives: a caller's unsampled `traceparent` (flag 00)
/// builds no span anywhere (the default sampler follows the parent), and the webhook still gets
/// the trace, flagged not sampled; a sampled caller in the same process is traced.
#[tokio::test]
async fn an_unsampled_request_builds_no_span_and_passes_its_trace_on() {
    const UNSAMPLED: &str = "11111111111111111111111111111111";
    let otlp = OtlpReceiver::start().await;
    let webhook = Receiver::start().await;
    let gw = Gateway::start(
        "sampled-gw",
        &otlp,
        "[push]\nallowed_hosts = [\"127.0.0.1\"]\n",
        &[],
    );
    let client = reqwest::Client::new();
    let send = |trace: &str, flags: &str| {
        client
            .post(format!("{}/a2a/jsonrpc", gw.url))
            .header("traceparent", format!("00-{trace}-{CLIENT_SPAN}-{flags}"))
            .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
                "params": {"tenant": "scenario", "message": script_message(json!({"chunks": 1})),
                           "configuration": {"taskPushNotificationConfig":
                               {"url": webhook.url("/hook")}}}}))
            .send()
    };
    let resp: Value = send(UNSAMPLED, "00").await.unwrap().json().await.unwrap();
    assert_eq!(
        resp["result"]["task"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );
    let resp: Value = send(CLIENT_TRACE, "01")
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        resp["result"]["task"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );
    // Both tasks' events reach the webhook; the sampled one's spans are exported.
    webhook
        .wait_for(Duration::from_secs(20), |r| {
            r.iter()
                .filter(|r| r.json.to_string().contains("TASK_STATE_COMPLETED"))
                .count()
                >= 2
        })
        .await;
    let spans = otlp
        .wait_for(Duration::from_secs(20), |s| {
            s.iter()
                .any(|s| s.trace_id == CLIENT_TRACE && s.name == "push deliver")
                && s.iter().any(|s| s.trace_id == CLIENT_TRACE && s.kind == 2)
        })
        .await;
    assert!(
        !spans.iter().any(|s| s.trace_id == UNSAMPLED),
        "{:#?}",
        spans
            .iter()
            .filter(|s| s.trace_id == UNSAMPLED)
            .collect::<Vec<_>>()
    );
    let hooks = webhook.requests();
    let unsampled: Vec<String> = hooks
        .iter()
        .map(|r| r.headers["traceparent"].to_str().unwrap().to_owned())
        .filter(|tp| tp.contains(UNSAMPLED))
        .collect();
    assert!(!unsampled.is_empty());
    for tp in &unsampled {
        assert!(tp.ends_with("-00"), "{tp}");
    }
}
