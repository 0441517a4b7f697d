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

/// Checks a card's `Last-Modified` and conditional GETs at `url` (with `headers`): a
/// whole-second HTTP-date no later than now, 304 for an `If-Modified-Since` at or after it, 200
/// for an earlier or invalid one, and `If-None-Match` taking precedence when both are sent.
pub async fn check_last_modified(client: &reqwest::Client, url: &str, headers: &[(&str, &str)]) {
    let get = |extra: &[(&str, &str)]| {
        let mut req = client.get(url);
        for (k, v) in headers.iter().chain(extra) {
            req = req.header(*k, *v);
        }
        async move { req.send().await.unwrap() }
    };
    let first = get(&[]).await;
    assert_eq!(first.status(), 200, "{url}");
    let lm = first.headers()["last-modified"]
        .to_str()
        .unwrap()
        .to_owned();
    let etag = first.headers()["etag"].to_str().unwrap().to_owned();
    let at = chrono::DateTime::parse_from_rfc2822(&lm).unwrap();
    assert!(lm.ends_with(" GMT"), "{lm}");
    assert!(at <= chrono::Utc::now(), "{lm}");
    let again = get(&[]).await;
    assert_eq!(again.headers()["last-modified"], lm.as_str(), "stable");

    let fmt = |t: chrono::DateTime<chrono::FixedOffset>| {
        t.format("%a, %d %b %Y %H:%M:%S GMT").to_string()
    };
    let earlier = fmt(at - chrono::Duration::seconds(1));
    let later = fmt(at + chrono::Duration::days(1));
    for (ims, status) in [
        (lm.as_str(), 304),
        (later.as_str(), 304),
        (earlier.as_str(), 200),
        ("not a date", 200),
    ] {
        let r = get(&[("if-modified-since", ims)]).await;
        assert_eq!(r.status(), status, "{url}: If-Modified-Since {ims}");
        assert_eq!(r.headers()["last-modified"], lm.as_str());
        assert_eq!(r.headers()["etag"], etag.as_str());
        assert!(r.headers().contains_key("cache-control"));
    }
    // If-None-Match wins over If-Modified-Since (RFC 9110 §13.2.2).
    let r = get(&[("if-none-match", "\"other\""), ("if-modified-since", &lm)]).await;
    assert_eq!(
        r.status(),
        200,
        "{url}: a stale ETag is not rescued by the date"
    );
    let r = get(&[("if-none-match", &etag), ("if-modified-since", &earlier)]).await;
    assert_eq!(
        r.status(),
        304,
        "{url}: a matching ETag wins over an old date"
    );
}

#[tokio::test]
async fn cards_send_last_modified_and_answer_if_modified_since() {
    let gw = TestGateway::with_config(
        r#"
[auth.schemes.key]
scheme = { apiKeySecurityScheme = { location = "header", name = "X-API-Key" } }
keys = [{ id = "k", key = "the-key" }]
[extended_card]
description = "more"
"#,
    )
    .await;
    check_last_modified(&gw.client, &gw.url("/.well-known/agent-card.json"), &[]).await;
    let extended = gw.url("/a2a/rest/extendedAgentCard");
    let headers = [("x-api-key", "the-key"), ("a2a-version", "1.0")];
    check_last_modified(&gw.client, &extended, &headers).await;
    let r = gw
        .client
        .get(&extended)
        .headers(
            [("x-api-key", "the-key")]
                .iter()
                .map(|(k, v)| (k.parse().unwrap(), v.parse().unwrap()))
                .collect(),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers()["cache-control"], "private, max-age=300");
    let card: Value = r.json().await.unwrap();
    assert_eq!(card["description"], "more");
    // The conditional request is answered only after authentication.
    let r = gw
        .client
        .get(&extended)
        .header("if-modified-since", "Fri, 01 Jan 2100 00:00:00 GMT")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
}
