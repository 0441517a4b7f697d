//! The real `a2a-gateway` binary: starts embedded (no database, no Redis), logs where it
//! listens, serves, and shuts down gracefully on SIGTERM with a stream open and its turn running.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::json;

use crate::harness::*;

struct Process(Child);

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The process and its first `n` log lines.
fn spawn_lines(envs: &[(&str, &str)], n: usize) -> (Process, Vec<String>) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_a2a-gateway"));
    cmd.env_remove("A2A_CONFIG")
        .env_remove("A2A_DATABASE_URL")
        .env_remove("A2A_REDIS_URL")
        .env_remove("A2A_PUBLIC_URL")
        .env("RUST_LOG", "info")
        .env("NO_COLOR", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in envs {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("the gateway binary starts");
    let stdout = child.stdout.take().unwrap();
    let mut lines = BufReader::new(stdout).lines();
    let first: Vec<String> = (0..n)
        .map(|_| {
            lines
                .next()
                .expect("a log line")
                .expect("readable log line")
        })
        .collect();
    // Keep draining stdout so the process never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    (Process(child), first)
}

#[tokio::test]
async fn the_admin_listener_logs_its_address_and_serves_metrics() {
    let (_proc, lines) = spawn_lines(
        &[
            ("A2A_LISTEN", "127.0.0.1:0"),
            ("A2A_ADMIN_LISTEN", "127.0.0.1:0"),
        ],
        2,
    );
    assert!(lines[1].contains("admin listener"), "{lines:?}");
    let public = listening_addr(&lines[0]);
    let admin = listening_addr(&lines[1]);
    assert_ne!(public, admin);
    let client = reqwest::Client::new();
    let sent = client
        .post(format!("http://{public}/a2a/jsonrpc"))
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
                      "params": {"message": user_message("hi")}}))
        .send()
        .await
        .unwrap();
    assert_eq!(sent.status(), 200);
    let text = client
        .get(format!("http://{admin}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    // A fresh process: the only request is this one.
    assert!(
        text.contains(
            "a2a_requests_total{binding=\"jsonrpc\",method=\"SendMessage\",outcome=\"ok\"} 1\n"
        ),
        "{text}"
    );
    assert!(
        text.contains("a2a_build_info{binary=\"a2a-gateway\""),
        "{text}"
    );
    // /metrics is not on the public port.
    let public_metrics = client
        .get(format!("http://{public}/metrics"))
        .send()
        .await
        .unwrap();
    assert_eq!(public_metrics.status(), 404);
}

fn listening_addr(line: &str) -> String {
    let start = line.find("http://").expect("the log line says where") + "http://".len();
    line[start..].split_whitespace().next().unwrap().to_owned()
}

#[tokio::test]
async fn serves_embedded_and_stops_gracefully_on_sigterm() {
    // The turn below hangs until canceled, so it holds the drain after SIGTERM to its bound.
    let dir = std::env::temp_dir().join(format!("a2a-binary-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("gateway.toml");
    std::fs::write(&config, "[limits]\ndrain_timeout_secs = 2\n").unwrap();
    let (mut proc_, lines) = spawn_lines(
        &[
            ("A2A_LISTEN", "127.0.0.1:0"),
            ("A2A_ADMIN_LISTEN", "127.0.0.1:0"),
            ("A2A_CONFIG", config.to_str().unwrap()),
        ],
        2,
    );
    let line = &lines[0];
    let admin = listening_addr(&lines[1]);
    assert!(
        line.contains("embedded"),
        "the log line names the mode: {line}"
    );
    let addr = listening_addr(line);
    let client = reqwest::Client::new();
    let ready = |client: &reqwest::Client| {
        client
            .get(format!("http://{admin}/readyz"))
            .timeout(Duration::from_secs(2))
            .send()
    };
    assert_eq!(ready(&client).await.unwrap().status(), 200);
    let url = |p: &str| format!("http://{addr}{p}");

    let card: serde_json::Value = client
        .get(url("/.well-known/agent-card.json"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(card["supportedInterfaces"][0]["protocolBinding"], "JSONRPC");

    // The trailing-slash spelling of the endpoint works too.
    let sent: serde_json::Value = client
        .post(url("/a2a/jsonrpc/"))
        .header("A2A-Version", "1.0")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
                      "params": {"message": user_message("hi")}}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        sent["result"]["task"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );

    let resp = client
        .post(url("/a2a/jsonrpc"))
        .header("A2A-Version", "1.0")
        .json(&json!({"jsonrpc": "2.0", "id": 2, "method": "SendStreamingMessage",
                      "params": {"tenant": "scenario", "message": script_message(json!({"end": "hang"}))}}))
        .send()
        .await
        .unwrap();
    let mut stream = SseStream::new(resp);
    stream.next().await.expect("the task event");

    let pid = proc_.0.id().to_string();
    let status = Command::new("kill").args(["-TERM", &pid]).status().unwrap();
    assert!(status.success());
    // While it drains (the hanging turn holds it), the admin listener still answers: not ready.
    let mut draining = None;
    for _ in 0..20 {
        let resp = ready(&client).await.unwrap();
        if resp.status() == 503 {
            draining = Some(resp.text().await.unwrap());
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(draining.as_deref(), Some("draining"));
    // The open stream ends cleanly rather than hanging the shutdown.
    let rest = tokio::time::timeout(Duration::from_secs(10), stream.collect()).await;
    assert!(rest.is_ok(), "the stream closes on shutdown");
    let exit = tokio::task::spawn_blocking(move || {
        for _ in 0..100 {
            if let Some(status) = proc_.0.try_wait().unwrap() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        None
    })
    .await
    .unwrap()
    .expect("the process exits within 10 s of SIGTERM");
    assert!(exit.success(), "exit status {exit:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Listening beyond loopback with no `[auth]`, opted in (`A2A_ALLOW_UNAUTHENTICATED`): a warning
/// at start says every caller shares one owner. (Bound on port 0 and killed at once; nothing is
/// served.)
#[test]
fn listening_beyond_loopback_without_auth_warns_at_start() {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_a2a-gateway"));
    cmd.env_remove("A2A_CONFIG")
        .env_remove("A2A_DATABASE_URL")
        .env_remove("A2A_REDIS_URL")
        .env_remove("A2A_PUBLIC_URL")
        .env("A2A_LISTEN", "0.0.0.0:0")
        .env("A2A_ALLOW_UNAUTHENTICATED", "true")
        .env("RUST_LOG", "info")
        .env("NO_COLOR", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = Process(cmd.spawn().expect("the gateway binary starts"));
    let stdout = child.0.stdout.take().unwrap();
    let lines: Vec<String> = BufReader::new(stdout)
        .lines()
        .take(2)
        .map(|l| l.unwrap())
        .collect();
    assert!(
        lines[0].contains("listening on http://0.0.0.0:"),
        "{lines:?}"
    );
    assert!(lines[1].contains("WARN"), "{lines:?}");
    assert!(lines[1].contains("with no [auth]"), "{lines:?}");
    assert!(lines[1].contains("shares one owner"), "{lines:?}");
}

#[test]
fn bad_configuration_fails_with_one_clear_line() {
    let out = Command::new(env!("CARGO_BIN_EXE_a2a-gateway"))
        .env("A2A_LISTEN", "not-an-address")
        .env_remove("A2A_CONFIG")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(78));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("A2A_LISTEN"), "{stderr}");
}

/// The command line (clap): help on stdout with 0; a usage error on stderr with 2, or 1 inside
/// `keys` and `agents` (the codes the binary had before clap parsed it).
#[test]
fn the_command_line_keeps_its_exit_codes() {
    let run = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_a2a-gateway"))
            .args(args)
            .env_remove("A2A_CONFIG")
            .output()
            .unwrap();
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        (out.status.code(), text(&out.stdout), text(&out.stderr))
    };
    let (code, out, _) = run(&["--help"]);
    assert_eq!(code, Some(0), "{out}");
    for command in [
        "serve",
        "migrate",
        "keys",
        "agents",
        "healthcheck",
        "A2A_LISTEN",
    ] {
        assert!(out.contains(command), "{command}: {out}");
    }
    let (code, out, _) = run(&["agents", "replace", "--help"]);
    assert!(code == Some(0) && out.contains("--if-match"), "{out}");
    for (args, want) in [
        (&["frobnicate"][..], 2),
        (&["healthcheck", "extra"], 2),
        (&["keys"], 1),
        (&["keys", "create"], 1),
        (&["agents", "frobnicate"], 1),
    ] {
        let (code, out, err) = run(args);
        assert_eq!(code, Some(want), "{args:?}: {err}");
        assert!(out.is_empty() && !err.is_empty(), "{args:?}: {out}");
    }
}

/// L4: the binary refuses to listen beyond loopback without `[auth]` (exit 78, the message
/// naming the fixes), and starts, with a warning, once the operator opts in with
/// `A2A_ALLOW_UNAUTHENTICATED=true`.
#[tokio::test]
async fn an_open_gateway_beyond_loopback_needs_the_opt_in() {
    let output = Command::new(env!("CARGO_BIN_EXE_a2a-gateway"))
        .env_remove("A2A_CONFIG")
        .env_remove("A2A_DATABASE_URL")
        .env_remove("A2A_REDIS_URL")
        .env_remove("A2A_ALLOW_UNAUTHENTICATED")
        .env("A2A_LISTEN", "0.0.0.0:0")
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .output()
        .expect("the gateway binary runs");
    assert_eq!(output.status.code(), Some(78), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("A2A_ALLOW_UNAUTHENTICATED=true"),
        "{stderr}"
    );
    assert!(stderr.contains("[auth]"), "{stderr}");

    let (_proc, lines) = spawn_lines(
        &[
            ("A2A_LISTEN", "0.0.0.0:0"),
            ("A2A_ALLOW_UNAUTHENTICATED", "true"),
        ],
        2,
    );
    assert!(lines[0].contains("listening on"), "{lines:?}");
    assert!(lines[1].contains("shares one owner"), "{lines:?}");
    let port = listening_addr(&lines[0])
        .rsplit(':')
        .next()
        .unwrap()
        .to_owned();
    let health = reqwest::get(format!("http://127.0.0.1:{port}/healthz"))
        .await
        .unwrap();
    assert_eq!(health.status(), 200);
}
