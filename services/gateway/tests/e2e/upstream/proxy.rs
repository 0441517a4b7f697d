//! Proxying to gateways running the built-in agents, over each upstream binding: streaming
//! artifacts, multi-turn, cancel, polling a non-streaming upstream, cards and routing.

use serde_json::json;

use super::{agent, front, script, task_until, upstream};
use crate::harness::{TestGateway, kind, state, user_message};

#[tokio::test]
async fn streams_through_each_upstream_binding() {
    let up = upstream("").await;
    for binding in ["JSONRPC", "HTTP+JSON", "GRPC"] {
        let gw = front(&up, &format!("bindings = [\"{binding}\"]")).await;
        let params = script("up", json!({"chunks": 3, "delayMs": 20}), json!({}));
        let events = gw
            .stream("SendStreamingMessage", params)
            .await
            .collect()
            .await;
        let kinds: Vec<&str> = events.iter().map(|e| kind(&e.data["result"]).0).collect();
        assert_eq!(
            kinds,
            [
                "task",
                "statusUpdate",
                "artifactUpdate",
                "artifactUpdate",
                "artifactUpdate",
                "statusUpdate"
            ],
            "{binding}: {events:?}"
        );
        let id = events[0].data["result"]["task"]["id"].as_str().unwrap();
        let last = &events[5].data["result"]["statusUpdate"];
        assert_eq!(last["status"]["state"], "TASK_STATE_COMPLETED", "{binding}");
        assert_eq!(
            last["taskId"], id,
            "{binding}: events carry the gateway's id"
        );

        let task = gw.ok("GetTask", json!({"id": id})).await;
        assert_eq!(state(&task), "TASK_STATE_COMPLETED");
        assert_eq!(task["artifacts"][0]["parts"].as_array().unwrap().len(), 3);
        // The upstream has a task of its own, under its own id, which never leaks.
        let theirs = up.ok("ListTasks", json!({})).await;
        let ids: Vec<&str> = theirs["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["id"].as_str().unwrap())
            .collect();
        assert!(
            !ids.contains(&id),
            "{binding}: gateway ids are minted by the gateway"
        );
        assert!(
            !task.to_string().contains(ids[0]),
            "{binding}: upstream id leaked"
        );
        gw.stop().await;
    }
}

#[tokio::test]
async fn multi_turn_reaches_the_same_upstream_task() {
    let up = upstream("").await;
    let gw = front(&up, "").await;
    let first = gw
        .ok(
            "SendMessage",
            script("up", json!({"end": "input-required"}), json!({})),
        )
        .await;
    let task = &first["task"];
    assert_eq!(state(task), "TASK_STATE_INPUT_REQUIRED");
    let mut reply = user_message("here you go");
    reply["taskId"] = task["id"].clone();
    let second = gw.ok("SendMessage", json!({"message": reply})).await;
    assert_eq!(state(&second["task"]), "TASK_STATE_COMPLETED", "{second}");
    assert_eq!(second["task"]["id"], task["id"]);
    assert_eq!(second["task"]["contextId"], task["contextId"]);
    let theirs = up.ok("ListTasks", json!({})).await;
    assert_eq!(
        theirs["totalSize"], 1,
        "one upstream task for both turns: {theirs}"
    );
    assert_eq!(state(&theirs["tasks"][0]), "TASK_STATE_COMPLETED");
}

#[tokio::test]
async fn cancel_is_forwarded_upstream() {
    let up = upstream("").await;
    let gw = front(&up, "").await;
    let sent = gw
        .ok(
            "SendMessage",
            script(
                "up",
                json!({"end": "hang"}),
                json!({"returnImmediately": true}),
            ),
        )
        .await;
    let id = sent["task"]["id"].as_str().unwrap().to_owned();
    task_until(&gw, &id, |t| state(t) == "TASK_STATE_WORKING").await;
    let canceled = gw.ok("CancelTask", json!({"id": id})).await;
    assert_eq!(state(&canceled), "TASK_STATE_CANCELED");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let theirs = up.ok("ListTasks", json!({})).await;
        if state(&theirs["tasks"][0]) == "TASK_STATE_CANCELED" {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "not canceled upstream: {theirs}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// An upstream that does not stream is polled (GetTask with backoff) until it settles.
#[tokio::test]
async fn a_non_streaming_upstream_is_polled() {
    let up = upstream("[card]\nstreaming = false").await;
    let gw = front(&up, "").await;
    let params = script("up", json!({"chunks": 3, "delayMs": 150}), json!({}));
    let task = gw.ok("SendMessage", params).await["task"].clone();
    assert_eq!(state(&task), "TASK_STATE_COMPLETED", "{task}");
    let parts = task["artifacts"][0]["parts"].as_array().unwrap();
    assert_eq!(
        parts.len(),
        3,
        "every chunk arrives through the polls: {task}"
    );
    // A streaming client of the gateway still gets a stream.
    let params = script("up", json!({"chunks": 2, "delayMs": 50}), json!({}));
    let events = gw
        .stream("SendStreamingMessage", params)
        .await
        .collect()
        .await;
    let last = &events.last().unwrap().data["result"]["statusUpdate"];
    assert_eq!(
        last["status"]["state"], "TASK_STATE_COMPLETED",
        "{events:?}"
    );
}

#[tokio::test]
async fn a_direct_message_reply_passes_through() {
    let up = upstream("").await;
    let gw = front(&up, "").await;
    let reply = gw
        .ok(
            "SendMessage",
            script("up", json!({"end": "message"}), json!({})),
        )
        .await;
    let message = &reply["message"];
    assert_eq!(message["role"], "ROLE_AGENT", "{reply}");
    assert_eq!(gw.ok("ListTasks", json!({})).await["totalSize"], 0);
}

#[tokio::test]
async fn per_agent_cards_point_at_the_gateway() {
    let up = upstream("").await;
    let gw = front(&up, "").await;
    let resp = gw
        .client
        .get(gw.url("/agents/up/.well-known/agent-card.json"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert!(resp.headers().contains_key("etag"));
    let card: serde_json::Value = resp.json().await.unwrap();
    crate::card::check_last_modified(
        &gw.client,
        &gw.url("/agents/up/.well-known/agent-card.json"),
        &[],
    )
    .await;
    let ifaces = card["supportedInterfaces"].as_array().unwrap();
    let bindings: Vec<&str> = ifaces
        .iter()
        .map(|i| i["protocolBinding"].as_str().unwrap())
        .collect();
    assert_eq!(bindings, ["JSONRPC", "HTTP+JSON", "GRPC"]);
    for i in ifaces {
        assert_eq!(i["tenant"], "up", "{card}");
        assert!(
            i["url"].as_str().unwrap().contains(&gw.addr.to_string()),
            "{card}"
        );
    }
    let upstream_card: serde_json::Value = gw
        .client
        .get(up.url("/.well-known/agent-card.json"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(card["skills"], upstream_card["skills"]);
    // The upstream's signatures covered its own card: this gateway's replace them (embedded, it
    // always has a key; on PostgreSQL without configured keys both go unsigned).
    if let Some(sigs) = card.get("signatures") {
        assert_ne!(Some(sigs), upstream_card.get("signatures"));
        let protected = sigs[0]["protected"].as_str().unwrap();
        let header =
            base64::Engine::decode(&base64::engine::general_purpose::URL_SAFE_NO_PAD, protected)
                .unwrap();
        let header: serde_json::Value = serde_json::from_slice(&header).unwrap();
        assert_eq!(header["jku"], gw.url("/.well-known/jwks.json"));
    }
    let root: serde_json::Value = gw
        .client
        .get(gw.url("/.well-known/agent-card.json"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let skills = root["skills"].as_array().unwrap();
    assert_eq!(
        skills.len(),
        4,
        "built-in skills plus the upstream's: {root}"
    );
    let missing = gw
        .client
        .get(gw.url("/agents/nope/.well-known/agent-card.json"))
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), 404);
}

/// A billing agent (an inline card with its own skill, served by an upstream gateway): a skill
/// hint or the message's words route to it; anything else goes to the default agent.
#[tokio::test]
async fn routing_by_skill_hint_and_score() {
    let up = upstream("").await;
    let card = format!(
        "card = {{ name = \"billing\", description = \"pays\", version = \"1\", \
         supportedInterfaces = [{{ url = \"{}\", protocolBinding = \"JSONRPC\", protocolVersion = \"1.0\" }}], \
         capabilities = {{ streaming = true }}, defaultInputModes = [\"text/plain\"], \
         defaultOutputModes = [\"text/plain\"], \
         skills = [{{ id = \"invoices\", name = \"Invoices\", description = \"pay invoices\", tags = [\"invoice\", \"payment\"] }}] }}",
        up.url("/a2a/jsonrpc")
    );
    let toml = format!("[[agents]]\nname = \"billing\"\nhealth_interval_secs = 1\n{card}\n");
    let gw = TestGateway::with_config(&toml).await;

    let routed_upstream = |t: &serde_json::Value| {
        // The upstream's scenario agent completes a message without a script with no artifact;
        // the built-in echo answers with an "echo" artifact.
        t["artifacts"][0]["artifactId"] != "echo"
    };
    let mut hinted = user_message("no words that match");
    hinted["metadata"] = json!({"skill": "invoices"});
    let t = gw.ok("SendMessage", json!({"message": hinted})).await["task"].clone();
    assert!(routed_upstream(&t), "skill hint → billing: {t}");

    let t = gw
        .ok(
            "SendMessage",
            json!({"message": user_message("please settle this invoice")}),
        )
        .await["task"]
        .clone();
    assert!(routed_upstream(&t), "word match → billing: {t}");

    let t = gw.send_text("hello there").await;
    assert!(!routed_upstream(&t), "no match → the default agent: {t}");
}

/// A config with an agent over each binding choice loads and reports the binding it uses.
#[tokio::test]
async fn an_agent_limited_to_unknown_bindings_is_refused() {
    let err = a2a_gateway::config::FileConfig::parse(&agent(
        "x",
        "http://127.0.0.1:1",
        "bindings = [\"SOAP\"]",
    ))
    .err()
    .unwrap();
    assert!(err.contains("SOAP"), "{err}");
    let err = a2a_gateway::config::FileConfig::parse(&agent("echo", "http://127.0.0.1:1", ""))
        .err()
        .unwrap();
    assert!(err.contains("built-in"), "{err}");
}
