//! `a2a-gateway agents ...`: the admin API from the command line.

use std::time::Duration;

use axum::http::{StatusCode, header};
use serde_json::Value;

use super::AGENTS_PATH;
use crate::cli::AgentsCommand;

/// `a2a-gateway agents list | get <name> | add <json entry> | replace <name> <json entry>
/// [--if-match <etag>] | remove <name> [--if-match <etag>]`: the admin API from the command
/// line, toward the admin listener at `admin` with the bearer `token`. Returns what to print
/// (the API's JSON answer), or the error (the API's message).
pub async fn cli(admin: &str, token: &str, command: &AgentsCommand) -> Result<String, String> {
    let base = format!("http://{admin}{AGENTS_PATH}");
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .map_err(|e| e.to_string())?;
    let body = |raw: &str| -> Result<Value, String> {
        serde_json::from_str(raw).map_err(|e| format!("the entry is not JSON: {e}"))
    };
    let path = |name: &str| format!("{base}/{}", urlencode(name));
    let (request, if_match) = match command {
        AgentsCommand::List => (http.get(&base), None),
        AgentsCommand::Get { name } => (http.get(path(name)), None),
        AgentsCommand::Add { entry } => (http.post(&base).json(&body(entry)?), None),
        AgentsCommand::Replace {
            name,
            entry,
            if_match,
        } => (http.put(path(name)).json(&body(entry)?), if_match.as_ref()),
        AgentsCommand::Remove { name, if_match } => (http.delete(path(name)), if_match.as_ref()),
    };
    let mut request = request.bearer_auth(token);
    if let Some(etag) = if_match {
        request = request.header(header::IF_MATCH, etag);
    }
    let resp = request
        .send()
        .await
        .map_err(|e| format!("the admin API at {admin}: {e}"))?;
    let status = resp.status();
    let etag = resp
        .headers()
        .get(header::ETAG)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let text = resp.text().await.unwrap_or_default();
    if status.is_success() {
        Ok(match (status, etag) {
            (StatusCode::NO_CONTENT, _) => "removed".to_owned(),
            (_, Some(etag)) => format!("{text}\nETag: {etag}"),
            _ => text,
        })
    } else {
        let message = serde_json::from_str::<Value>(&text)
            .ok()
            .and_then(|v| v["error"]["message"].as_str().map(str::to_owned))
            .unwrap_or(text);
        Err(format!("{status}: {message}"))
    }
}

/// An agent name in a URL path (names are ASCII letters, digits, `-`, `_`, `.`; anything else
/// is percent-encoded, so a bad name reaches the API and is refused there).
fn urlencode(name: &str) -> String {
    name.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}
