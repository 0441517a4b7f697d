//! How often each turn ran upstream. The upstream agent is an embedded gateway (in-memory
//! store) that honours the `Idempotency-Key` the replicas send: a turn re-sent under its key
//! (a takeover of a send whose outcome was unknown) is answered from its first run, so each
//! user message the replicas forwarded must appear once among all the upstream's tasks. A turn
//! dispatched twice under two keys, or by two replicas, shows as its message twice.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{Value, json};

/// What the upstream ran.
#[derive(Debug, Default)]
pub struct Ran {
    /// Upstream tasks.
    pub tasks: usize,
    /// User messages (turns) the upstream received and ran.
    pub turns: usize,
    /// Every turn that ran more than once: its message id and how often.
    pub twice: Vec<(String, usize)>,
}

/// Lists every task of the upstream on `port` with its history.
pub async fn ran(port: u16) -> Result<Ran, String> {
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .map_err(|e| e.to_string())?;
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    let mut out = Ran::default();
    let mut token = String::new();
    // Bounded: 1,000 pages of 100 is far more than a run makes.
    for _ in 0..1000 {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "ListTasks",
            "params": {"pageSize": 100, "pageToken": token}});
        let v: Value = client
            .post(format!("http://127.0.0.1:{port}/a2a/jsonrpc"))
            .header("a2a-version", "1.0")
            .json(&body)
            .send()
            .await
            .map_err(|e| format!("the upstream's ListTasks: {e}"))?
            .json()
            .await
            .map_err(|e| format!("the upstream's ListTasks answer: {e}"))?;
        let result = &v["result"];
        let Some(tasks) = result["tasks"].as_array() else {
            return Err(format!("the upstream's ListTasks answered {v}"));
        };
        for t in tasks {
            out.tasks += 1;
            for m in t["history"].as_array().into_iter().flatten() {
                if m["role"] == "ROLE_USER"
                    && let Some(id) = m["messageId"].as_str()
                {
                    *counts.entry(id.to_owned()).or_default() += 1;
                }
            }
        }
        match result["nextPageToken"].as_str() {
            Some(next) if !next.is_empty() => token = next.to_owned(),
            _ => break,
        }
    }
    out.turns = counts.len();
    out.twice = counts.into_iter().filter(|(_, n)| *n > 1).collect();
    Ok(out)
}
