//! The README's walkthrough, as a newcomer pastes it: every shell block marked
//! `<!-- readme-test: NAME -->` runs, in order, in one bash session against a fresh embedded
//! gateway (the real binary), and each answer is checked for its documented shape. A README
//! edit that breaks an example, or adds one this test does not know, fails here.

use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

const MARKER: &str = "<!-- readme-test: ";
/// The walkthrough's blocks, in README order.
const BLOCKS: [&str; 4] = ["jsonrpc", "rest", "idempotency", "v03"];

/// The shell blocks marked for this test, by name, in order.
fn marked_blocks(readme: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut rest = readme;
    while let Some(at) = rest.find(MARKER) {
        let after = &rest[at + MARKER.len()..];
        let name = after[..after.find(" -->").expect("a closed marker")].to_owned();
        let open = after.find("```sh\n").expect("a sh block after the marker") + 6;
        let close = after[open..].find("\n```").expect("a closed block") + open;
        out.push((name, after[open..close].to_owned()));
        rest = &after[close..];
    }
    out
}

/// Every other shell block of the walkthrough may only call `grpcurl`, which CI cannot install.
fn unmarked_blocks_are_grpcurl_only(readme: &str) {
    let start = readme.find("## Try it with curl").expect("the walkthrough");
    let end = readme[start..]
        .find("\n## ")
        .map_or(readme.len(), |e| e + start);
    let section = &readme[start..end];
    let mut pos = 0;
    while let Some(open) = section[pos..].find("```sh\n") {
        let open = pos + open;
        let body_start = open + 6;
        let close = section[body_start..].find("\n```").unwrap() + body_start;
        let marked = section[..open].trim_end().ends_with("-->")
            && section[..open].rfind(MARKER) > section[..open].rfind("```");
        if !marked {
            for line in section[body_start..close].lines() {
                let line = line.trim();
                assert!(
                    line.is_empty()
                        || line.starts_with("grpcurl")
                        || line.starts_with("127.0.0.1:8080"),
                    "an untested shell line in the walkthrough: {line:?} (mark its block)"
                );
            }
        }
        pos = close + 4;
    }
}

fn json(raw: &str) -> Value {
    serde_json::from_str(raw.trim()).unwrap_or_else(|e| panic!("{e}: {raw}"))
}

/// The `data:` payloads of an SSE answer (read by the client's parser).
fn sse(raw: &str) -> Vec<Value> {
    let mut parser = a2a_client::sse::SseParser::new(raw.len());
    let mut events = parser.push(raw.as_bytes()).expect("an SSE answer");
    // curl's output may end without the blank line that dispatches the last event.
    events.extend(parser.push(b"\n\n").expect("an SSE answer"));
    events.iter().map(|e| json(&e.data)).collect()
}

fn state(task: &Value) -> &str {
    task["status"]["state"].as_str().unwrap_or_default()
}

/// `returnImmediately` answers with the task as created or already working.
fn running(task: &Value) -> bool {
    matches!(state(task), "TASK_STATE_SUBMITTED" | "TASK_STATE_WORKING")
}

/// Task, WORKING, five artifact chunks, COMPLETED (`unwrap` takes the StreamResponse out of
/// a JSON-RPC envelope or not).
fn five_chunks(events: &[Value], unwrap: fn(&Value) -> &Value) {
    let kinds: Vec<String> = events
        .iter()
        .map(|e| {
            let obj = unwrap(e).as_object().expect("a StreamResponse");
            let (k, v) = obj.iter().next().unwrap();
            match k.as_str() {
                "statusUpdate" => state(v).to_owned(),
                other => other.to_owned(),
            }
        })
        .collect();
    let mut want = vec!["task".to_owned(), "TASK_STATE_WORKING".to_owned()];
    want.extend(std::iter::repeat_n("artifactUpdate".to_owned(), 5));
    want.push("TASK_STATE_COMPLETED".to_owned());
    assert_eq!(kinds, want);
}

#[tokio::test]
async fn the_readme_walkthrough_runs_as_documented() {
    assert!(
        Command::new("jq").arg("--version").output().is_ok(),
        "the README walkthrough needs jq (Debian package jq; .ci/run installs it)"
    );
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    unmarked_blocks_are_grpcurl_only(&readme);
    let blocks = marked_blocks(&readme);
    let names: Vec<&str> = blocks.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, BLOCKS, "the walkthrough's tested blocks");

    let mut cmd = Command::new(env!("CARGO_BIN_EXE_a2a-gateway"));
    cmd.env_remove("A2A_CONFIG")
        .env_remove("A2A_DATABASE_URL")
        .env_remove("A2A_REDIS_URL")
        .env_remove("A2A_PUBLIC_URL")
        .env("A2A_LISTEN", "127.0.0.1:0")
        .env("RUST_LOG", "warn,a2a_gateway=info");
    let (mut child, addr) = a2a_testing::spawn_listening(cmd, "gateway");

    // Each curl's answer goes to its own numbered file as well as to the terminal; a counter
    // file, because `$(curl ...)` runs in a subshell.
    let out = std::env::temp_dir().join(format!("a2a-readme-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&out).unwrap();
    let mut script = format!(
        "set -euo pipefail\nOUT={}\necho 0 > \"$OUT/count\"\n\
         curl() {{ local n=$(( $(cat \"$OUT/count\") + 1 )); echo $n > \"$OUT/count\"; \
         command curl --max-time 20 \"$@\" | tee \"$OUT/$n\"; }}\n",
        out.display()
    );
    for (_, body) in &blocks {
        script.push_str(&body.replace("127.0.0.1:8080", &addr));
        script.push('\n');
    }
    let run =
        tokio::task::spawn_blocking(move || Command::new("bash").arg("-c").arg(script).output())
            .await
            .unwrap()
            .unwrap();
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        run.status.success(),
        "the walkthrough failed: {}\n{}",
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr)
    );
    let answer = |n: usize| {
        std::fs::read_to_string(out.join(n.to_string()))
            .unwrap_or_else(|_| panic!("answer {n} of the walkthrough"))
    };
    let count: usize = std::fs::read_to_string(out.join("count"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert_eq!(count, 21, "one answer per curl of the walkthrough");

    // JSON-RPC.
    let sent = json(&answer(1));
    assert_eq!(sent["id"], 1);
    assert_eq!(state(&sent["result"]["task"]), "TASK_STATE_COMPLETED");
    assert_eq!(
        sent["result"]["task"]["artifacts"][0]["parts"][0]["text"],
        "hello"
    );
    five_chunks(&sse(&answer(2)), |e| &e["result"]);
    let task_id = json(&answer(3))["result"]["task"]["id"].clone();
    let got = json(&answer(4));
    assert_eq!(got["result"]["id"], task_id);
    assert_eq!(got["result"]["history"].as_array().unwrap().len(), 1);
    let listed = json(&answer(5));
    assert_eq!(listed["result"]["totalSize"], 3, "m1, m2, m3: three tasks");
    assert!(running(&json(&answer(6))["result"]["task"]));
    assert_eq!(state(&json(&answer(7))["result"]), "TASK_STATE_CANCELED");

    // HTTP+JSON.
    let sent = json(&answer(8));
    assert_eq!(state(&sent["task"]), "TASK_STATE_COMPLETED");
    assert_ne!(
        sent["task"]["id"],
        json(&answer(1))["result"]["task"]["id"],
        "r1 is new"
    );
    five_chunks(&sse(&answer(9)), |e| e);
    let completed = json(&answer(10));
    assert_eq!(completed["totalSize"], 5, "m1, m2, m3, r1, r2: {completed}");
    assert_eq!(json(&answer(11))["id"], task_id);
    assert!(running(&json(&answer(12))["task"]));
    assert_eq!(state(&json(&answer(13))), "TASK_STATE_CANCELED");

    // Safe retries.
    let first = json(&answer(14));
    assert_eq!(state(&first["task"]), "TASK_STATE_COMPLETED");
    assert_eq!(json(&answer(15)), first, "the same task again");
    let refused = answer(16);
    let (body, status) = refused.rsplit_once(" HTTP ").unwrap();
    assert_eq!(status.trim(), "422");
    assert_eq!(json(body)["error"]["status"], "INVALID_ARGUMENT");

    // A2A 0.3.
    let sent03 = json(&answer(17));
    assert_eq!(sent03["result"]["kind"], "task");
    assert_eq!(sent03["result"]["status"]["state"], "completed");
    let got03 = json(&answer(18));
    assert_eq!(got03["result"]["id"], sent03["result"]["id"]);
    assert_eq!(got03["result"]["artifacts"][0]["parts"][0]["kind"], "text");
    let got10 = json(&answer(19));
    assert_eq!(got10["result"]["id"], sent03["result"]["id"]);
    assert_eq!(state(&got10["result"]), "TASK_STATE_COMPLETED");
    let rest03 = json(&answer(20));
    assert_eq!(rest03["task"]["history"][0]["content"][0]["text"], "hi");
    let card = json(&answer(21));
    assert_eq!(card["preferredTransport"], "JSONRPC");
    assert_eq!(card["protocolVersion"], "0.3.0");
    assert!(card["url"].as_str().unwrap().ends_with("/a2a/jsonrpc"));
    let _ = std::fs::remove_dir_all(&out);
}
