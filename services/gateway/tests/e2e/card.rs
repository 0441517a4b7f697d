//! The public agent card and its caching headers.

use serde_json::Value;

use crate::harness::*;

#[tokio::test]
async fn card_shape_and_caching() {
    let gw = TestGateway::start().await;
    let resp = gw
        .client
        .get(gw.url("/.well-known/agent-card.json"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-type"], "application/json");
    assert!(
        resp.headers()["cache-control"]
            .to_str()
            .unwrap()
            .contains("max-age=")
    );
    let etag = resp.headers()["etag"].to_str().unwrap().to_owned();
    let card: Value = resp.json().await.unwrap();

    let ifaces = card["supportedInterfaces"].as_array().unwrap();
    let listed: Vec<_> = ifaces
        .iter()
        .map(|i| {
            assert_eq!(i["protocolVersion"], "1.0");
            (
                i["protocolBinding"].as_str().unwrap(),
                i["url"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        listed,
        [
            ("JSONRPC", gw.url("/a2a/jsonrpc")),
            ("HTTP+JSON", gw.url("/a2a/rest")),
            ("GRPC", gw.addr.to_string()),
        ]
    );
    for field in [
        "name",
        "description",
        "version",
        "defaultInputModes",
        "defaultOutputModes",
    ] {
        assert!(card.get(field).is_some(), "required field {field}");
    }
    assert_eq!(card["capabilities"]["streaming"], true);
    let skills: Vec<_> = card["skills"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].clone())
        .collect();
    assert_eq!(skills, ["echo", "scenario"]);

    let cached = gw
        .client
        .get(gw.url("/.well-known/agent-card.json"))
        .header("If-None-Match", &etag)
        .send()
        .await
        .unwrap();
    assert_eq!(cached.status(), 304);
    assert_eq!(cached.headers()["etag"], etag.as_str());
    let stale = gw
        .client
        .get(gw.url("/.well-known/agent-card.json"))
        .header("If-None-Match", "\"something-else\"")
        .send()
        .await
        .unwrap();
    assert_eq!(stale.status(), 200);
}

#[tokio::test]
async fn public_url_is_used_in_the_card() {
    let gw = TestGateway::with_config("public_url = \"https://agents.example.com/\"").await;
    let card = gw.card().await;
    assert_eq!(
        card["supportedInterfaces"][0]["url"],
        "https://agents.example.com/a2a/jsonrpc"
    );
}
