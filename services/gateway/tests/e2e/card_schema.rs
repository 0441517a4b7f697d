//! The 1.0 cards the gateway serves to 1.0 clients (root and per agent with `A2A-Version: 1.0`,
//! the extended card on JSON-RPC, HTTP+JSON and gRPC) validate against the A2A 1.0 JSON schema
//! with no unknown member at any level; the 0.3 readers (no header, `0.3`, the 0.2 path) get the
//! combined card, which that strict schema refuses.
//!
//! The schema is generated from the proto (`proto/lf/a2a/v1/a2a.proto`, through the descriptor
//! set `a2a_types::FILE_DESCRIPTOR_SET`) the way ProtoJSON maps it: every message an object with
//! exactly its fields' JSON names (`additionalProperties: false`), maps as objects, repeated
//! fields as arrays, enums by name, at most one member of each `oneof`. What the proto cannot
//! say (our proto carries no `field_behavior` annotations) is written here from the
//! specification (spec facts §1.2, the 1.0.1 `a2a.proto`'s `REQUIRED` fields): [`REQUIRED`].

use std::collections::HashMap;

use a2a_types::v1::GetExtendedAgentCardRequest;
use a2a_types::v1::a2a_service_client::A2aServiceClient;
use prost::Message;
use prost_types::field_descriptor_proto::{Label, Type};
use prost_types::{DescriptorProto, FileDescriptorSet};
use serde_json::{Map, Value, json};

use crate::harness::TestGateway;
use crate::upstream::{agent, upstream};

const PACKAGE: &str = ".lf.a2a.v1.";

/// The fields the 1.0.1 proto marks `REQUIRED`, per message of the card (JSON names). A
/// required repeated field must have at least one element (spec §5.7).
const REQUIRED: &[(&str, &[&str])] = &[
    (
        "AgentCard",
        &[
            "name",
            "description",
            "supportedInterfaces",
            "version",
            "capabilities",
            "defaultInputModes",
            "defaultOutputModes",
            "skills",
        ],
    ),
    (
        "AgentInterface",
        &["url", "protocolBinding", "protocolVersion"],
    ),
    ("AgentProvider", &["url", "organization"]),
    ("AgentSkill", &["id", "name", "description", "tags"]),
    ("AgentCardSignature", &["protected", "signature"]),
    ("APIKeySecurityScheme", &["location", "name"]),
    ("HTTPAuthSecurityScheme", &["scheme"]),
    ("OAuth2SecurityScheme", &["flows"]),
    ("OpenIdConnectSecurityScheme", &["openIdConnectUrl"]),
    (
        "AuthorizationCodeOAuthFlow",
        &["authorizationUrl", "tokenUrl", "scopes"],
    ),
    ("ClientCredentialsOAuthFlow", &["tokenUrl", "scopes"]),
    (
        "DeviceCodeOAuthFlow",
        &["deviceAuthorizationUrl", "tokenUrl", "scopes"],
    ),
];

/// Messages whose one `oneof` must be set (a scheme, a flow): an empty object says nothing.
const ONE_MEMBER: &[&str] = &["SecurityScheme", "OAuthFlows"];

fn camel(name: &str) -> String {
    let mut out = String::new();
    let mut upper = false;
    for c in name.chars() {
        if c == '_' {
            upper = true;
        } else if upper {
            out.extend(c.to_uppercase());
            upper = false;
        } else {
            out.push(c);
        }
    }
    out
}

struct Generator {
    messages: HashMap<String, DescriptorProto>,
    enums: HashMap<String, Vec<String>>,
    defs: Map<String, Value>,
}

impl Generator {
    fn new() -> Self {
        let set = FileDescriptorSet::decode(a2a_types::FILE_DESCRIPTOR_SET).unwrap();
        let mut messages = HashMap::new();
        let mut enums = HashMap::new();
        for file in set.file {
            let prefix = format!(".{}.", file.package());
            for e in &file.enum_type {
                let values = e.value.iter().map(|v| v.name().to_owned()).collect();
                enums.insert(format!("{prefix}{}", e.name()), values);
            }
            fn walk(prefix: &str, m: &DescriptorProto, out: &mut HashMap<String, DescriptorProto>) {
                let name = format!("{prefix}{}", m.name());
                for nested in &m.nested_type {
                    walk(&format!("{name}."), nested, out);
                }
                out.insert(name, m.clone());
            }
            for m in &file.message_type {
                walk(&prefix, m, &mut messages);
            }
        }
        Self {
            messages,
            enums,
            defs: Map::new(),
        }
    }

    /// The schema of a value of message type `full` (a `.package.Name`).
    fn message_ref(&mut self, full: &str) -> Value {
        match full {
            ".google.protobuf.Struct" => return json!({"type": "object"}),
            ".google.protobuf.Value" => return json!({}),
            ".google.protobuf.Timestamp" => return json!({"type": "string"}),
            _ => {}
        }
        let name = full.strip_prefix(PACKAGE).unwrap_or_else(|| {
            panic!("the card refers to {full}, which this generator does not know")
        });
        if !self.defs.contains_key(name) {
            // Reserve the name first: messages may refer to themselves.
            self.defs.insert(name.to_owned(), Value::Null);
            let schema = self.message(full);
            self.defs.insert(name.to_owned(), schema);
        }
        json!({"$ref": format!("#/$defs/{name}")})
    }

    fn scalar(&mut self, ty: Type, type_name: &str) -> Value {
        match ty {
            Type::String | Type::Bytes => json!({"type": "string"}),
            Type::Bool => json!({"type": "boolean"}),
            Type::Int32 | Type::Sint32 | Type::Sfixed32 | Type::Uint32 | Type::Fixed32 => {
                json!({"type": "integer"})
            }
            // ProtoJSON writes 64-bit integers as strings.
            Type::Int64 | Type::Sint64 | Type::Sfixed64 | Type::Uint64 | Type::Fixed64 => {
                json!({"type": ["string", "integer"]})
            }
            Type::Double | Type::Float => json!({"type": "number"}),
            Type::Enum => json!({"type": "string", "enum": self.enums[type_name]}),
            Type::Message | Type::Group => self.message_ref(type_name),
        }
    }

    fn message(&mut self, full: &str) -> Value {
        let m = self.messages[full].clone();
        let short = full.strip_prefix(PACKAGE).unwrap();
        let required: &[&str] = REQUIRED
            .iter()
            .find(|(n, _)| *n == short)
            .map(|(_, r)| *r)
            .unwrap_or(&[]);
        let mut properties = Map::new();
        let mut oneofs: HashMap<i32, Vec<String>> = HashMap::new();
        for f in &m.field {
            let json_name = f.json_name.clone().unwrap_or_else(|| camel(f.name()));
            let map_entry = (f.r#type() == Type::Message)
                .then(|| self.messages.get(f.type_name()))
                .flatten()
                .filter(|e| e.options.as_ref().is_some_and(|o| o.map_entry()))
                .cloned();
            let mut schema = if let Some(entry) = map_entry {
                let value = &entry.field[1];
                let value = self.scalar(value.r#type(), value.type_name());
                json!({"type": "object", "additionalProperties": value})
            } else if f.label() == Label::Repeated {
                let mut array =
                    json!({"type": "array", "items": self.scalar(f.r#type(), f.type_name())});
                if required.contains(&json_name.as_str()) {
                    array["minItems"] = json!(1);
                }
                array
            } else {
                self.scalar(f.r#type(), f.type_name())
            };
            if f.options.as_ref().is_some_and(|o| o.deprecated()) {
                schema = json!({"allOf": [schema], "deprecated": true});
            }
            if let Some(i) = f.oneof_index.filter(|_| !f.proto3_optional()) {
                oneofs.entry(i).or_default().push(json_name.clone());
            }
            properties.insert(json_name, schema);
        }
        for r in required {
            assert!(properties.contains_key(*r), "{short} has no field {r}");
        }
        let mut schema = json!({
            "type": "object",
            "properties": properties,
            "required": required,
            "additionalProperties": false,
        });
        // ProtoJSON sets at most one member of a oneof.
        let mut all_of = Vec::new();
        for members in oneofs.values() {
            for (i, a) in members.iter().enumerate() {
                for b in &members[i + 1..] {
                    all_of.push(json!({"not": {"required": [a, b]}}));
                }
            }
        }
        if !all_of.is_empty() {
            schema["allOf"] = Value::Array(all_of);
        }
        if ONE_MEMBER.contains(&short) {
            schema["minProperties"] = json!(1);
        }
        schema
    }
}

/// The A2A 1.0 JSON schema of an AgentCard, with no unknown member allowed at any level.
pub fn agent_card_schema() -> Value {
    let mut g = Generator::new();
    let root = g.message_ref(&format!("{PACKAGE}AgentCard"));
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "urn:a2a-gateway:test:a2a-1.0-agent-card",
        "$ref": root["$ref"],
        "$defs": g.defs,
    })
}

/// Every violation of `card` against `schema`.
fn violations(validator: &jsonschema::Validator, card: &Value) -> Vec<String> {
    validator
        .iter_errors(card)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect()
}

async fn get(gw: &TestGateway, path: &str, headers: &[(&str, &str)]) -> reqwest::Response {
    let mut req = gw.client.get(gw.url(path));
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    req.send().await.unwrap()
}

async fn get_json(gw: &TestGateway, path: &str, headers: &[(&str, &str)]) -> Value {
    let resp = get(gw, path, headers).await;
    assert_eq!(resp.status(), 200, "GET {path} {headers:?}");
    resp.json().await.unwrap()
}

const AUTH: &str = r#"
[auth.schemes.key]
scheme = { apiKeySecurityScheme = { location = "header", name = "X-API-Key", description = "the key" } }
keys = [{ id = "k", key = "the-key" }]
"#;

/// A change to a valid card.
type Mutation = fn(&mut Value);

#[test]
fn the_generated_schema_is_strict_at_every_level() {
    let schema = agent_card_schema();
    let defs = schema["$defs"].as_object().unwrap();
    for name in [
        "AgentCard",
        "AgentInterface",
        "AgentCapabilities",
        "AgentExtension",
        "AgentSkill",
        "AgentCardSignature",
        "SecurityScheme",
        "SecurityRequirement",
        "StringList",
        "OAuthFlows",
        "DeviceCodeOAuthFlow",
    ] {
        assert_eq!(defs[name]["additionalProperties"], false, "{name}");
    }
    let validator = jsonschema::validator_for(&schema).unwrap();
    let minimal = json!({
        "name": "a", "description": "b", "version": "1",
        "supportedInterfaces": [{"url": "http://h/a2a/jsonrpc", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}],
        "capabilities": {"streaming": true},
        "securitySchemes": {"k": {"apiKeySecurityScheme": {"location": "header", "name": "X-Key"}}},
        "securityRequirements": [{"schemes": {"k": {"list": []}}}],
        "defaultInputModes": ["text/plain"], "defaultOutputModes": ["text/plain"],
        "skills": [{"id": "s", "name": "S", "description": "x", "tags": ["t"]}],
    });
    assert_eq!(violations(&validator, &minimal), Vec::<String>::new());
    // Each of these is refused: an unknown member at the top, in a nested object, in an array
    // item, in a map value, a missing required field, two members of a oneof, an empty scheme.
    let mutations: [(&str, Mutation); 9] = [
        ("0.3 top-level url", |c| c["url"] = json!("http://h")),
        ("supportsAuthenticatedExtendedCard", |c| {
            c["supportsAuthenticatedExtendedCard"] = json!(true)
        }),
        ("capabilities.stateTransitionHistory", |c| {
            c["capabilities"]["stateTransitionHistory"] = json!(true)
        }),
        ("interface transport", |c| {
            c["supportedInterfaces"][0]["transport"] = json!("JSONRPC")
        }),
        ("OpenAPI type in a scheme", |c| {
            c["securitySchemes"]["k"]["type"] = json!("apiKey")
        }),
        ("missing version", |c| {
            c.as_object_mut().unwrap().remove("version");
        }),
        ("no skill tags", |c| c["skills"][0]["tags"] = json!([])),
        ("two scheme kinds", |c| {
            c["securitySchemes"]["k"]["mtlsSecurityScheme"] = json!({})
        }),
        ("an empty scheme", |c| c["securitySchemes"]["k"] = json!({})),
    ];
    for (what, mutate) in mutations {
        let mut card = minimal.clone();
        mutate(&mut card);
        assert!(
            !violations(&validator, &card).is_empty(),
            "{what} should be refused"
        );
    }
}

#[tokio::test]
async fn served_1_0_cards_validate_against_the_1_0_schema() {
    let up = upstream("").await;
    let gw = TestGateway::with_config(&format!(
        r#"{AUTH}{}
[card]
provider_organization = "Example"
provider_url = "https://example.com"
documentation_url = "https://example.com/docs"
icon_url = "https://example.com/icon.png"

[[extensions]]
uri = "urn:example:ext"
description = "an optional extension"

[extended_card]
description = "the extended card"
[[extended_card.skills]]
id = "private"
name = "Private"
description = "only in the extended card"
tags = ["private"]
"#,
        agent("up", &up.url(""), ""),
    ))
    .await;
    let schema = agent_card_schema();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let v1 = [("a2a-version", "1.0")];
    let keyed = [("a2a-version", "1.0"), ("x-api-key", "the-key")];

    // The per-agent card exists once the upstream's card was fetched.
    let per_agent_path = "/agents/up/.well-known/agent-card.json";
    for _ in 0..100 {
        if get(&gw, per_agent_path, &v1).await.status() == 200 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }

    let root = get_json(&gw, "/.well-known/agent-card.json", &v1).await;
    let by_query = get_json(&gw, "/.well-known/agent-card.json?A2A-Version=1.0", &[]).await;
    let patch = get_json(
        &gw,
        "/.well-known/agent-card.json",
        &[("a2a-version", "1.0.1")],
    )
    .await;
    let per_agent = get_json(&gw, per_agent_path, &v1).await;
    let rest = get_json(&gw, "/a2a/rest/extendedAgentCard", &keyed).await;
    let rest_no_version = get_json(&gw, "/a2a/rest/extendedAgentCard", &keyed[1..]).await;
    let rest_tenant = get_json(&gw, "/a2a/rest/up/extendedAgentCard", &keyed).await;
    let rpc: Value = gw
        .client
        .post(gw.url("/a2a/jsonrpc"))
        .header("a2a-version", "1.0")
        .header("x-api-key", "the-key")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "GetExtendedAgentCard"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let rpc = rpc["result"].clone();
    let channel = tonic::transport::Channel::from_shared(gw.url(""))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut request = tonic::Request::new(GetExtendedAgentCardRequest::default());
    request
        .metadata_mut()
        .insert("a2a-version", "1.0".parse().unwrap());
    request
        .metadata_mut()
        .insert("x-api-key", "the-key".parse().unwrap());
    let grpc = A2aServiceClient::new(channel)
        .get_extended_agent_card(request)
        .await
        .unwrap()
        .into_inner();
    // What a 1.0 client makes of the protobuf card: its ProtoJSON.
    let grpc = serde_json::to_value(&grpc).unwrap();

    assert_eq!(root["provider"]["organization"], "Example");
    assert_eq!(root["capabilities"]["extendedAgentCard"], true);
    // Cards are signed with the push signing key, which an embedded gateway makes itself; the
    // PostgreSQL shape has none unless configured (the worker signs pushes).
    if std::env::var("A2A_E2E_STORE").as_deref() != Ok("postgres") {
        assert!(root.get("signatures").is_some(), "signed");
    }
    assert_eq!(per_agent["supportedInterfaces"][0]["tenant"], "up");
    assert_eq!(rest["description"], "the extended card");
    for (what, card) in [
        ("root", &root),
        ("root, ?A2A-Version=1.0", &by_query),
        ("root, A2A-Version: 1.0.1", &patch),
        ("per agent", &per_agent),
        ("extended over HTTP+JSON", &rest),
        (
            "extended over HTTP+JSON without A2A-Version",
            &rest_no_version,
        ),
        ("extended over HTTP+JSON, tenant path", &rest_tenant),
        ("extended over JSON-RPC", &rpc),
        ("extended over gRPC", &grpc),
    ] {
        assert_eq!(
            violations(&validator, card),
            Vec::<String>::new(),
            "the {what} card: {card}"
        );
    }
    // One extended card, one signature, on every binding.
    assert_eq!(rest, rpc);
    assert_eq!(rest, grpc);

    // The 0.3 readers get the combined card, which the strict 1.0 schema refuses (so the
    // schema does look at the top-level members).
    for (path, headers) in [
        ("/.well-known/agent-card.json", &[][..]),
        (
            "/.well-known/agent-card.json",
            &[("a2a-version", "0.3")][..],
        ),
        ("/.well-known/agent.json", &[][..]),
        ("/.well-known/agent.json", &v1[..]),
        (per_agent_path, &[][..]),
    ] {
        let card = get_json(&gw, path, headers).await;
        assert!(card["protocolVersion"].as_str().unwrap().starts_with("0.3"));
        assert_eq!(
            card["supportsAuthenticatedExtendedCard"],
            path != per_agent_path
        );
        assert!(
            !violations(&validator, &card).is_empty(),
            "GET {path} {headers:?} is the combined card"
        );
    }
}
