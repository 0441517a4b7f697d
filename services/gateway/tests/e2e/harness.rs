//! `TestGateway`: the gateway started through the same `app::build` / `app::serve` as `main`, on
//! port 0, plus a small JSON-RPC and SSE client.

use std::net::SocketAddr;
use std::time::Duration;

use a2a_gateway::app;
use a2a_gateway::config::{Config, FileConfig};
use futures::StreamExt;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

pub struct TestGateway {
    pub addr: SocketAddr,
    /// The admin listener (`/metrics`), when the test asked for one (`A2A_ADMIN_LISTEN`).
    pub admin: Option<SocketAddr>,
    pub client: reqwest::Client,
    shutdown: CancellationToken,
    server: Option<tokio::task::JoinHandle<std::io::Result<()>>>,
    /// The database this gateway owns (dropped with it), when the suite runs on PostgreSQL.
    _database: Option<a2a_testing::TestDatabase>,
    /// The Redis key prefix this gateway owns, when the suite runs on PostgreSQL.
    _redis: Option<a2a_testing::TestRedis>,
}

/// `A2A_E2E_STORE=postgres` runs every end-to-end test against a fresh PostgreSQL database and
/// Redis key prefix instead of the in-memory store and bus (`scripts/test` runs the suite both
/// ways): the shape of a replicated deployment, the only one on PostgreSQL that offers push
/// notifications (without Redis no `a2a-worker` can deliver them).
const STORE_ENV: &str = "A2A_E2E_STORE";

impl TestGateway {
    pub async fn start() -> Self {
        Self::with_config("").await
    }

    /// Starts a gateway with `toml` as its configuration file, on the store `A2A_E2E_STORE` names.
    pub async fn with_config(toml: &str) -> Self {
        Self::with_env(toml, &[]).await
    }

    /// [`Self::with_config`] with an admin listener on a free port (`/metrics`).
    pub async fn with_admin(toml: &str) -> Self {
        Self::with_env(toml, &[("A2A_ADMIN_LISTEN", "127.0.0.1:0".to_owned())]).await
    }

    /// [`Self::with_config`] with more environment variables.
    pub async fn with_env(toml: &str, env: &[(&str, String)]) -> Self {
        match std::env::var(STORE_ENV).as_deref() {
            Ok("postgres") => {
                let db = a2a_testing::TestDatabase::create().await;
                let redis = a2a_testing::TestRedis::create().await;
                let mut env = env.to_vec();
                env.push(("A2A_REDIS_URL", redis.url().to_owned()));
                env.push(("A2A_REDIS_PREFIX", redis.prefix().to_owned()));
                let mut gw = Self::launch_with(toml, Some(db.url()), None, &env).await;
                gw._database = Some(db);
                gw._redis = Some(redis);
                gw
            }
            Ok("memory") | Ok("") | Err(_) => Self::launch_with(toml, None, None, env).await,
            Ok(other) => panic!("{STORE_ENV}={other:?}: use memory or postgres"),
        }
    }

    /// An embedded gateway (in-memory store and bus) whatever `A2A_E2E_STORE` says.
    pub async fn embedded(toml: &str) -> Self {
        Self::launch(toml, None, None).await
    }

    /// Starts a gateway with `toml` as its configuration file on the PostgreSQL database at
    /// `database_url` (migrated first), as `A2A_DATABASE_URL` would.
    pub async fn with_database(toml: &str, database_url: &str) -> Self {
        Self::launch(toml, Some(database_url), None).await
    }

    /// A replica: the PostgreSQL database at `database_url` plus the Redis bus at `redis`'s URL
    /// and key prefix, as `A2A_DATABASE_URL`, `A2A_REDIS_URL` and `A2A_REDIS_PREFIX` would. Start
    /// several on the same database and Redis for a multi-replica deployment.
    pub async fn with_database_and_redis(
        toml: &str,
        database_url: &str,
        redis: &a2a_testing::TestRedis,
    ) -> Self {
        let env = [
            ("A2A_REDIS_URL", redis.url().to_owned()),
            ("A2A_REDIS_PREFIX", redis.prefix().to_owned()),
        ];
        Self::launch_with(toml, Some(database_url), None, &env).await
    }

    /// A replica on a Redis Cluster: `A2A_REDIS_CLUSTER_NODES` and the test's key prefix.
    pub async fn with_database_and_cluster(
        toml: &str,
        database_url: &str,
        cluster: &a2a_testing::TestCluster,
    ) -> Self {
        let env = [
            ("A2A_REDIS_CLUSTER_NODES", cluster.nodes()),
            ("A2A_REDIS_PREFIX", cluster.prefix().to_owned()),
        ];
        Self::launch_with(toml, Some(database_url), None, &env).await
    }

    /// [`Self::with_database_and_redis`] with more environment variables.
    pub async fn replica_with_env(
        toml: &str,
        database_url: &str,
        redis: &a2a_testing::TestRedis,
        env: &[(&str, String)],
    ) -> Self {
        let mut env = env.to_vec();
        env.push(("A2A_REDIS_URL", redis.url().to_owned()));
        env.push(("A2A_REDIS_PREFIX", redis.prefix().to_owned()));
        Self::launch_with(toml, Some(database_url), None, &env).await
    }

    async fn launch(
        toml: &str,
        database_url: Option<&str>,
        database: Option<a2a_testing::TestDatabase>,
    ) -> Self {
        Self::launch_with(toml, database_url, database, &[]).await
    }

    /// The database URL and Redis this gateway runs on, when [`Self::with_env`] made them
    /// (`A2A_E2E_STORE=postgres`): a replica started on them shares its tasks and streams.
    pub fn backends(&self) -> Option<(&str, &a2a_testing::TestRedis)> {
        Some((self._database.as_ref()?.url(), self._redis.as_ref()?))
    }

    /// An in-memory gateway serving on `listener` (e.g. on the address of one that stopped).
    pub async fn on_listener(listener: tokio::net::TcpListener, toml: &str) -> Self {
        Self::launch_on(listener, toml, None, None, &[]).await
    }

    async fn launch_with(
        toml: &str,
        database_url: Option<&str>,
        database: Option<a2a_testing::TestDatabase>,
        env: &[(&str, String)],
    ) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        Self::launch_on(listener, toml, database_url, database, env).await
    }

    async fn launch_on(
        listener: tokio::net::TcpListener,
        toml: &str,
        database_url: Option<&str>,
        database: Option<a2a_testing::TestDatabase>,
        env: &[(&str, String)],
    ) -> Self {
        let mut file = FileConfig::parse(toml).expect("test config parses");
        // The tests drive the `scenario` test agent, which a deployment on PostgreSQL or Redis
        // enables on purpose; a test that leaves it out says so (`builtin_agents = ["echo"]`).
        file.builtin_agents
            .get_or_insert_with(|| vec!["echo".into(), "scenario".into()]);
        let addr = listener.local_addr().unwrap();
        let listen = addr.to_string();
        let config = Config::from_parts(file, |k| match k {
            "A2A_LISTEN" => Some(listen.clone()),
            "A2A_DATABASE_URL" => database_url.map(str::to_owned),
            k => env
                .iter()
                .find(|(name, _)| *name == k)
                .map(|(_, v)| v.clone()),
        })
        .unwrap();
        if database_url.is_some() {
            app::migrate(&config).await.expect("migrations apply");
        }
        let shutdown = CancellationToken::new();
        let svc = app::build(&config, shutdown.clone()).unwrap();
        app::start(&config, &svc).await;
        let admin = match config.admin_listen {
            Some(at) => {
                let listener = tokio::net::TcpListener::bind(at).await.unwrap();
                let admin = listener.local_addr().unwrap();
                tokio::spawn(app::serve_admin(listener, svc.clone(), shutdown.clone()));
                Some(admin)
            }
            None => None,
        };
        let server = tokio::spawn(app::serve(listener, svc, shutdown.clone()));
        Self {
            addr,
            admin,
            client: reqwest::Client::new(),
            shutdown,
            server: Some(server),
            _database: database,
            _redis: None,
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Posts a raw body to the JSON-RPC endpoint with `A2A-Version: 1.0`.
    pub async fn post_raw(&self, body: impl Into<reqwest::Body>) -> reqwest::Response {
        self.client
            .post(self.url("/a2a/jsonrpc"))
            .header("content-type", "application/json")
            .header("a2a-version", "1.0")
            .body(body)
            .send()
            .await
            .unwrap()
    }

    /// A JSON-RPC call; returns the whole response object (result or error).
    pub async fn rpc(&self, method: &str, params: Value) -> Value {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let resp = self.post_raw(body.to_string()).await;
        assert_eq!(resp.status(), 200, "JSON-RPC answers with HTTP 200");
        resp.json().await.unwrap()
    }

    /// Posts a JSON-RPC request carrying `Idempotency-Key: key`.
    pub async fn post_keyed(&self, method: &str, params: Value, key: &str) -> reqwest::Response {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        self.client
            .post(self.url("/a2a/jsonrpc"))
            .header("content-type", "application/json")
            .header("a2a-version", "1.0")
            .header("idempotency-key", key)
            .body(body.to_string())
            .send()
            .await
            .unwrap()
    }

    /// A JSON-RPC call carrying `Idempotency-Key: key`; the whole response object.
    pub async fn rpc_keyed(&self, method: &str, params: Value, key: &str) -> Value {
        let resp = self.post_keyed(method, params, key).await;
        let status = resp.status();
        let body = resp.text().await.unwrap();
        assert_eq!(status, 200, "JSON-RPC answers with HTTP 200: {body}");
        serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"))
    }

    /// How many tasks the anonymous caller has.
    pub async fn task_count(&self) -> u64 {
        self.ok("ListTasks", json!({})).await["totalSize"]
            .as_u64()
            .unwrap()
    }

    /// The `result` of a call that must succeed.
    pub async fn ok(&self, method: &str, params: Value) -> Value {
        let resp = self.rpc(method, params).await;
        assert!(resp.get("error").is_none(), "{method} failed: {resp}");
        resp["result"].clone()
    }

    /// The error code of a call that must fail.
    pub async fn err_code(&self, method: &str, params: Value) -> i64 {
        let resp = self.rpc(method, params).await;
        resp["error"]["code"]
            .as_i64()
            .unwrap_or_else(|| panic!("{method} should fail: {resp}"))
    }

    /// Opens an SSE stream for a streaming method.
    pub async fn stream(&self, method: &str, params: Value) -> SseStream {
        let body = json!({"jsonrpc": "2.0", "id": "s", "method": method, "params": params});
        let resp = self.post_raw(body.to_string()).await;
        assert_eq!(resp.status(), 200);
        SseStream::new(resp)
    }

    /// Sends to the echo agent and returns the task.
    pub async fn send_text(&self, text: &str) -> Value {
        self.ok("SendMessage", json!({"message": user_message(text)}))
            .await["task"]
            .clone()
    }

    /// Sends a scenario script; returns the SendMessage result.
    /// The public agent card, fetched without credentials.
    pub async fn card(&self) -> Value {
        self.client
            .get(self.url("/.well-known/agent-card.json"))
            .send()
            .await
            .unwrap()
            .error_for_status()
            .unwrap()
            .json()
            .await
            .unwrap()
    }

    pub async fn scenario(&self, script: Value, configuration: Value) -> Value {
        self.ok(
            "SendMessage",
            json!({"tenant": "scenario", "message": script_message(script), "configuration": configuration}),
        )
        .await
    }

    pub async fn stop(mut self) {
        self.shutdown.cancel();
        if let Some(server) = self.server.take() {
            tokio::time::timeout(Duration::from_secs(10), server)
                .await
                .expect("graceful shutdown within 10 s")
                .unwrap()
                .unwrap();
        }
    }
}

impl Drop for TestGateway {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

pub fn user_message(text: &str) -> Value {
    json!({"messageId": uuid::Uuid::new_v4().to_string(), "role": "ROLE_USER", "parts": [{"text": text}]})
}

pub fn script_message(script: Value) -> Value {
    json!({"messageId": uuid::Uuid::new_v4().to_string(), "role": "ROLE_USER",
           "parts": [{"text": "run"}, {"data": script}]})
}

pub fn state(task: &Value) -> &str {
    task["status"]["state"].as_str().unwrap_or_default()
}

/// One parsed SSE event.
#[derive(Debug, Clone)]
pub struct SseEvent {
    pub id: Option<String>,
    pub event: Option<String>,
    pub data: Value,
}

/// An SSE reader over a reqwest body, on the client's parser (`a2a_client::sse`): the
/// repository's one SSE parser, so the tests read streams by the rules the clients do.
pub struct SseStream {
    body: futures::stream::BoxStream<'static, reqwest::Result<bytes::Bytes>>,
    parser: a2a_client::sse::SseParser,
    parsed: std::collections::VecDeque<a2a_client::sse::SseEvent>,
    pub content_type: String,
}

impl SseStream {
    pub fn new(resp: reqwest::Response) -> Self {
        let content_type = resp
            .headers()
            .get("content-type")
            .map(|v| v.to_str().unwrap().to_owned())
            .unwrap_or_default();
        Self {
            body: resp.bytes_stream().boxed(),
            parser: a2a_client::sse::SseParser::new(16 << 20),
            parsed: Default::default(),
            content_type,
        }
    }

    /// The next event, or `None` when the server closed the stream. Panics after 10 s of silence.
    pub async fn next(&mut self) -> Option<SseEvent> {
        loop {
            if let Some(ev) = self.parsed.pop_front() {
                return Some(SseEvent {
                    id: ev.id,
                    event: ev.event,
                    data: serde_json::from_str(&ev.data).expect("SSE data is JSON"),
                });
            }
            match tokio::time::timeout(Duration::from_secs(10), self.body.next())
                .await
                .expect("an SSE event within 10 s")
            {
                Some(chunk) => self.parsed.extend(
                    self.parser
                        .push(&chunk.unwrap())
                        .expect("a well-formed SSE stream"),
                ),
                None => return None,
            }
        }
    }

    /// This stream, when the server answered with one; otherwise the answer (a JSON-RPC error
    /// is a JSON body, which an SSE parser reads as no events at all).
    pub async fn or_refusal(mut self) -> Result<Self, String> {
        if self.content_type.starts_with("text/event-stream") {
            return Ok(self);
        }
        let mut body = Vec::new();
        while let Some(Ok(chunk)) = self.body.next().await {
            body.extend_from_slice(&chunk);
        }
        Err(format!(
            "not a stream ({}): {}",
            self.content_type,
            String::from_utf8_lossy(&body)
        ))
    }

    /// This stream, when the server answered with one; otherwise panics with the answer.
    pub async fn expect_sse(self, who: &str) -> Self {
        self.or_refusal()
            .await
            .unwrap_or_else(|refusal| panic!("{who}: {refusal}"))
    }

    /// Every remaining event until the server closes the stream.
    pub async fn collect(mut self) -> Vec<SseEvent> {
        let mut out = Vec::new();
        while let Some(ev) = self.next().await {
            out.push(ev);
        }
        out
    }
}

/// The kind of a StreamResponse (`task`, `message`, `statusUpdate`, `artifactUpdate`) and its body.
pub fn kind(result: &Value) -> (&str, &Value) {
    let obj = result.as_object().expect("a StreamResponse object");
    assert_eq!(obj.len(), 1, "exactly one StreamResponse member: {result}");
    let (k, v) = obj.iter().next().unwrap();
    (k.as_str(), v)
}
