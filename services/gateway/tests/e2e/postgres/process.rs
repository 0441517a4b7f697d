//! The real `a2a-gateway` binary on a database: `migrate`, `serve`, SIGTERM and SIGKILL.

use std::process::{Child, Command, ExitStatus};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::harness::SseStream;

pub struct GatewayProcess {
    child: Child,
    pub addr: String,
    client: reqwest::Client,
}

fn command(database_url: &str) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_a2a-gateway"));
    cmd.env_remove("A2A_CONFIG")
        .env_remove("A2A_REDIS_URL")
        .env_remove("A2A_PUBLIC_URL")
        .env_remove("A2A_MIGRATE")
        .env("A2A_DATABASE_URL", database_url)
        .env("A2A_LISTEN", "127.0.0.1:0")
        // The tests drive the `scenario` test agent, off by default on PostgreSQL.
        .env("A2A_BUILTIN_AGENTS", "echo,scenario")
        .env("RUST_LOG", "info")
        .env("NO_COLOR", "1");
    cmd
}

impl GatewayProcess {
    /// `a2a-gateway migrate`; panics unless it exits 0.
    pub fn migrate(database_url: &str) {
        let out = command(database_url)
            .arg("migrate")
            .output()
            .expect("the gateway binary runs");
        assert!(
            out.status.success(),
            "migrate failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// `a2a-gateway serve` on a free port; returns once it says where it listens.
    pub fn start(database_url: &str) -> Self {
        Self::start_with(database_url, &[])
    }

    /// Like [`start`](Self::start), with extra environment variables.
    pub fn start_with(database_url: &str, envs: &[(&str, &str)]) -> Self {
        let mut cmd = command(database_url);
        cmd.envs(envs.iter().copied());
        let (child, addr) = a2a_testing::spawn_listening(cmd, "gateway");
        Self {
            child,
            addr,
            client: reqwest::Client::new(),
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub async fn rpc(&self, method: &str, params: Value) -> Value {
        let base = format!("http://{}", self.addr);
        a2a_testing::jsonrpc(&self.client, &base, method, params).await
    }

    pub async fn ok(&self, method: &str, params: Value) -> Value {
        let resp = self.rpc(method, params).await;
        assert!(resp.get("error").is_none(), "{method} failed: {resp}");
        resp["result"].clone()
    }

    pub async fn stream(&self, method: &str, params: Value) -> SseStream {
        let body = json!({"jsonrpc": "2.0", "id": "s", "method": method, "params": params});
        let resp = self
            .client
            .post(format!("http://{}/a2a/jsonrpc", self.addr))
            .header("a2a-version", "1.0")
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200);
        SseStream::new(resp)
    }

    /// SubscribeToTask over JSON-RPC with `Last-Event-ID: after`: the events after `after`, from
    /// the event log, then the live tail.
    pub async fn resume(&self, id: &str, after: u64) -> SseStream {
        let body = json!({"jsonrpc": "2.0", "id": "r", "method": "SubscribeToTask",
                          "params": {"id": id}});
        let resp = self
            .client
            .post(format!("http://{}/a2a/jsonrpc", self.addr))
            .header("a2a-version", "1.0")
            .header("last-event-id", after.to_string())
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200);
        SseStream::new(resp)
    }

    /// SIGTERM, then wait for the graceful exit.
    pub fn stop(mut self) {
        self.terminate();
        let status = self
            .wait_exit(Duration::from_secs(15))
            .expect("the gateway did not stop on SIGTERM");
        assert!(status.success(), "graceful exit: {status}");
    }

    /// SIGTERM, without waiting for the exit.
    pub fn terminate(&self) {
        let status = Command::new("kill")
            .arg("-TERM")
            .arg(self.pid().to_string())
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// The exit status, once the process has exited; `None` if it still runs after `limit`.
    pub fn wait_exit(&mut self, limit: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGKILL: no shutdown code runs.
    pub fn kill9(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }
}

impl Drop for GatewayProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
