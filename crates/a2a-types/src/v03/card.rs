//! One card for both generations of clients: the 1.0 card's JSON with the 0.3 fields merged in
//! (spec facts §7.3, what a2a-python does for a card with a 0.3 interface). 1.0 parsers ignore
//! the unknown 0.3 members; 0.3 parsers ignore `supportedInterfaces` and read `url`,
//! `preferredTransport`, `additionalInterfaces`, `protocolVersion`, the OpenAPI-style `type` in
//! each security scheme and `security`.

use serde_json::{Map, Value, json};

use crate::v1::{AgentCard, AgentInterface};

/// The 0.3 protocol version a combined card declares.
pub const PROTOCOL_VERSION: &str = "0.3.0";

/// The JSON of `card` with the 0.3 fields for the interfaces whose binding is in `bindings_03`
/// (their URLs are the 1.0 interfaces' own: both dialects are served there). The first becomes
/// `url`/`preferredTransport`; all of them are `additionalInterfaces` (0.3 clients list the
/// preferred one there too). `supportedInterfaces` stays the 1.0 list: the card every binding
/// returns for GetExtendedAgentCard (gRPC included, which has no room for the 0.3 members) is
/// the same card, and 1.0 clients that pick an interface by binding alone never land on 0.3.
///
/// 0.3 has no `tenant`: an interface with one is offered to 0.3 clients only over HTTP+JSON,
/// where the tenant becomes a path segment (`{url}/{tenant}`, under which the 0.3 client adds
/// `/v1/…`); JSON-RPC and gRPC cannot carry it, so they are not offered.
pub fn combined(card: &AgentCard, bindings_03: &[&str]) -> Value {
    let mut v = super::to_value_lossy(card);
    let served: Vec<AgentInterface> = card
        .supported_interfaces
        .iter()
        .filter(|i| bindings_03.contains(&i.protocol_binding.as_str()))
        .filter_map(|i| match (i.tenant.as_str(), i.protocol_binding.as_str()) {
            ("", _) => Some(i.clone()),
            (tenant, "HTTP+JSON") => Some(AgentInterface {
                url: format!("{}/{tenant}", i.url.trim_end_matches('/')),
                tenant: String::new(),
                ..i.clone()
            }),
            _ => None,
        })
        .collect();
    let Some(o) = v.as_object_mut() else {
        return v;
    };
    if let Some(first) = served.first() {
        o.insert("url".into(), json!(first.url));
        o.insert("preferredTransport".into(), json!(first.protocol_binding));
    }
    o.insert("protocolVersion".into(), json!(PROTOCOL_VERSION));
    let additional: Vec<Value> = served
        .iter()
        .map(|i| json!({"url": i.url, "transport": i.protocol_binding}))
        .collect();
    o.insert("additionalInterfaces".into(), Value::Array(additional));
    let extended = card
        .capabilities
        .as_ref()
        .and_then(|c| c.extended_agent_card)
        .unwrap_or(false);
    o.insert("supportsAuthenticatedExtendedCard".into(), json!(extended));
    if let Some(schemes) = o.get_mut("securitySchemes").and_then(Value::as_object_mut) {
        for scheme in schemes.values_mut() {
            if let Some(s) = scheme.as_object_mut() {
                merge_openapi_scheme(s);
            }
        }
    }
    if let Some(reqs) = o.get("securityRequirements") {
        let security = security(reqs);
        o.insert("security".into(), security);
    }
    if let Some(skills) = o.get_mut("skills").and_then(Value::as_array_mut) {
        for skill in skills.iter_mut().filter_map(Value::as_object_mut) {
            if let Some(reqs) = skill.get("securityRequirements") {
                let security = security(reqs);
                skill.insert("security".into(), security);
            }
        }
    }
    v
}

/// Adds the 0.3 (OpenAPI) members beside the 1.0 oneof member: `{"apiKeySecurityScheme": {…},
/// "type": "apiKey", "in": "header", "name": "X-Key"}`.
fn merge_openapi_scheme(s: &mut Map<String, Value>) {
    let (kind, body) = match s.iter().next() {
        Some((k, b)) => (k.clone(), b.clone()),
        None => return,
    };
    let copy = |s: &mut Map<String, Value>, from: &str, to: &str| {
        if let Some(v) = body.get(from) {
            s.insert(to.into(), v.clone());
        }
    };
    let ty = match kind.as_str() {
        "apiKeySecurityScheme" => {
            copy(s, "location", "in");
            copy(s, "name", "name");
            "apiKey"
        }
        "httpAuthSecurityScheme" => {
            copy(s, "scheme", "scheme");
            copy(s, "bearerFormat", "bearerFormat");
            "http"
        }
        "oauth2SecurityScheme" => {
            copy(s, "flows", "flows");
            copy(s, "oauth2MetadataUrl", "oauth2MetadataUrl");
            "oauth2"
        }
        "openIdConnectSecurityScheme" => {
            copy(s, "openIdConnectUrl", "openIdConnectUrl");
            "openIdConnect"
        }
        "mtlsSecurityScheme" => "mutualTLS",
        _ => return,
    };
    copy(s, "description", "description");
    s.insert("type".into(), json!(ty));
}

/// 1.0 `[{"schemes": {"k": {"list": [scopes]}}}]` → 0.3 `[{"k": [scopes]}]`.
fn security(reqs: &Value) -> Value {
    let list = reqs.as_array().into_iter().flatten().map(|r| {
        let schemes = r.get("schemes").and_then(Value::as_object);
        let m: Map<String, Value> = schemes
            .into_iter()
            .flatten()
            .map(|(name, scopes)| {
                let scopes = scopes.get("list").cloned().unwrap_or(json!([]));
                (name.clone(), scopes)
            })
            .collect();
        Value::Object(m)
    });
    Value::Array(list.collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_card_both_generations_read() {
        let card: AgentCard = serde_json::from_value(json!({
            "name": "gw", "description": "d", "version": "1",
            "supportedInterfaces": [
                {"url": "http://h/a2a/jsonrpc", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
                {"url": "http://h/a2a/rest", "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"},
                {"url": "h:80", "protocolBinding": "GRPC", "protocolVersion": "1.0"}],
            "capabilities": {"streaming": true, "extendedAgentCard": true},
            "securitySchemes": {"k": {"apiKeySecurityScheme": {"location": "header", "name": "X-Key"}}},
            "securityRequirements": [{"schemes": {"k": {"list": []}}}],
            "defaultInputModes": ["text/plain"], "defaultOutputModes": ["text/plain"],
            "skills": [{"id": "s", "name": "S", "description": "x", "tags": ["t"]}]}))
        .unwrap();
        let v = combined(&card, &["JSONRPC", "HTTP+JSON"]);
        assert_eq!(v["url"], "http://h/a2a/jsonrpc");
        assert_eq!(v["preferredTransport"], "JSONRPC");
        assert_eq!(v["protocolVersion"], "0.3.0");
        assert_eq!(v["additionalInterfaces"][1]["transport"], "HTTP+JSON");
        assert_eq!(v["supportedInterfaces"].as_array().unwrap().len(), 3);
        assert_eq!(v["supportsAuthenticatedExtendedCard"], true);
        assert_eq!(v["securitySchemes"]["k"]["type"], "apiKey");
        assert_eq!(v["securitySchemes"]["k"]["in"], "header");
        assert_eq!(v["security"], json!([{"k": []}]));
        // A 1.0 parser reads the same card back.
        let back: AgentCard = serde_json::from_value(v).unwrap();
        assert_eq!(back.security_schemes.len(), 1);
        assert_eq!(back.supported_interfaces[0], card.supported_interfaces[0]);
        // A tenant travels in the HTTP+JSON path; JSON-RPC cannot carry it.
        let mut agent = card.clone();
        for i in &mut agent.supported_interfaces {
            i.tenant = "echo".into();
        }
        let v = combined(&agent, &["JSONRPC", "HTTP+JSON"]);
        assert_eq!(v["url"], "http://h/a2a/rest/echo");
        assert_eq!(v["preferredTransport"], "HTTP+JSON");
        assert_eq!(v["additionalInterfaces"].as_array().unwrap().len(), 1);
        // And the upstream-facing reader takes it as the 1.0 card it is.
        assert_eq!(
            super::super::card(&combined(&card, &["JSONRPC"]))
                .unwrap()
                .name,
            "gw"
        );
    }
}
