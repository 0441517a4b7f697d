//! The OTLP exporter's transport against a real OTLP/gRPC receiver (`a2a_testing::otlp`): gzip
//! and the configured headers arrive, TLS to a receiver whose certificate comes from a private
//! CA (with a client certificate), and a receiver that refuses twice then accepts gets each span
//! once (the exporter retries the batch).

use std::collections::HashSet;
use std::time::Duration;

use a2a_testing::otlp::{OtlpReceiver, ReceivedSpan, ReceiverOptions};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use serde_json::json;

use super::Gateway;
use crate::harness::script_message;

/// One SendMessage to the gateway's scenario agent, traced from a fresh trace.
async fn send_one(url: &str) {
    let resp = reqwest::Client::new()
        .post(format!("{url}/a2a/jsonrpc"))
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
                      "params": {"message": script_message(json!({"chunks": 1}))}}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let body: serde_json::Value = resp.json().await.unwrap();
    assert!(body.get("result").is_some(), "{body}");
}

/// Waits for the SERVER span of a SendMessage.
async fn server_span(otlp: &OtlpReceiver) -> Vec<ReceivedSpan> {
    otlp.wait_for(Duration::from_secs(20), |spans| {
        spans
            .iter()
            .any(|s| s.kind == 2 && s.name.contains("SendMessage"))
    })
    .await
}

const SCENARIO: &str = "default_agent = \"scenario\"\n";

#[tokio::test]
async fn exports_arrive_gzip_compressed_with_the_configured_headers() {
    let otlp = OtlpReceiver::start().await;
    let gw = Gateway::start(
        "gzip-gw",
        &otlp,
        SCENARIO,
        &[
            ("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip"),
            (
                "OTEL_EXPORTER_OTLP_HEADERS",
                "x-api-key=k-123,x-tenant=acme",
            ),
        ],
    );
    send_one(&gw.url).await;
    server_span(&otlp).await;
    let calls = otlp.calls();
    assert!(!calls.is_empty());
    for c in &calls {
        assert_eq!(
            c.metadata.get("grpc-encoding").map(String::as_str),
            Some("gzip"),
            "{c:?}"
        );
        assert_eq!(
            c.metadata.get("x-api-key").map(String::as_str),
            Some("k-123"),
            "{c:?}"
        );
        assert_eq!(
            c.metadata.get("x-tenant").map(String::as_str),
            Some("acme"),
            "{c:?}"
        );
    }
    // The header's value (a credential) is never logged.
    assert!(!gw.lines().iter().any(|l| l.contains("k-123")));
}

#[tokio::test]
async fn uncompressed_exports_say_so() {
    let otlp = OtlpReceiver::start().await;
    let gw = Gateway::start("plain-gw", &otlp, SCENARIO, &[]);
    send_one(&gw.url).await;
    server_span(&otlp).await;
    assert!(
        otlp.calls()
            .iter()
            .all(|c| !c.metadata.contains_key("grpc-encoding")
                || c.metadata["grpc-encoding"] == "identity")
    );
}

#[tokio::test]
async fn a_refused_export_is_retried_and_its_spans_arrive_once() {
    let otlp = OtlpReceiver::start_with(ReceiverOptions {
        fail_first: 2,
        ..Default::default()
    })
    .await;
    let gw = Gateway::start("retry-gw", &otlp, SCENARIO, &[]);
    send_one(&gw.url).await;
    let spans = server_span(&otlp).await;
    let calls = otlp.calls();
    assert_eq!(calls.iter().filter(|c| c.refused).count(), 2, "{calls:#?}");
    // The refused calls carried the same spans as the one accepted after them.
    assert!(
        calls[0].spans > 0 && calls[0].spans == calls[2].spans,
        "{calls:#?}"
    );
    let mut seen = HashSet::new();
    for s in &spans {
        assert!(
            seen.insert(&s.span_id),
            "span {} arrived twice: {spans:#?}",
            s.span_id
        );
    }
}

/// A CA of the test's own, a server certificate for 127.0.0.1 and a client certificate.
struct Pki {
    ca: String,
    server: (String, String),
    client: (String, String),
}

fn pki() -> Pki {
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params
        .distinguished_name
        .push(DnType::CommonName, "otlp test CA");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca = params.self_signed(&key).unwrap().pem();
    let issuer = Issuer::new(params, key);
    let sign = |names: Vec<String>, usage: ExtendedKeyUsagePurpose| {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(names).unwrap();
        params.distinguished_name.push(DnType::CommonName, "otlp");
        params.extended_key_usages = vec![usage];
        let cert = params.signed_by(&key, &issuer).unwrap();
        (cert.pem(), key.serialize_pem())
    };
    Pki {
        server: sign(
            vec!["127.0.0.1".into()],
            ExtendedKeyUsagePurpose::ServerAuth,
        ),
        client: sign(Vec::new(), ExtendedKeyUsagePurpose::ClientAuth),
        ca,
    }
}

#[tokio::test]
async fn exports_reach_a_tls_receiver_with_a_private_ca_and_a_client_certificate() {
    let pki = pki();
    let otlp = OtlpReceiver::start_with(ReceiverOptions {
        tls: Some(pki.server.clone()),
        client_ca: Some(pki.ca.clone()),
        ..Default::default()
    })
    .await;
    assert!(otlp.endpoint().starts_with("https://"));
    let dir = std::env::temp_dir().join(format!("a2a-otlp-tls-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    let write = |name: &str, pem: &str| {
        let path = dir.join(name);
        std::fs::write(&path, pem).unwrap();
        path.display().to_string()
    };
    let (ca, cert, key) = (
        write("ca.pem", &pki.ca),
        write("client.pem", &pki.client.0),
        write("client.key", &pki.client.1),
    );
    let gw = Gateway::start(
        "tls-gw",
        &otlp,
        SCENARIO,
        &[
            ("OTEL_EXPORTER_OTLP_CERTIFICATE", &ca),
            ("OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE", &cert),
            ("OTEL_EXPORTER_OTLP_CLIENT_KEY", &key),
        ],
    );
    send_one(&gw.url).await;
    let spans = server_span(&otlp).await;
    assert!(spans.iter().all(|s| s.service == "tls-gw"));
    // Without the client certificate the receiver refuses the handshake: nothing arrives.
    let before = otlp.calls().len();
    let anonymous = Gateway::start(
        "anonymous-gw",
        &otlp,
        SCENARIO,
        &[("OTEL_EXPORTER_OTLP_CERTIFICATE", &ca)],
    );
    send_one(&anonymous.url).await;
    // The same over OTLP/HTTP (the blocking reqwest client built from the TLS files).
    let endpoint = otlp.http_endpoint();
    let http = Gateway::start(
        "tls-http-gw",
        &otlp,
        SCENARIO,
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"),
            ("OTEL_EXPORTER_OTLP_CERTIFICATE", &ca),
            ("OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE", &cert),
            ("OTEL_EXPORTER_OTLP_CLIENT_KEY", &key),
        ],
    );
    send_one(&http.url).await;
    otlp.wait_for(Duration::from_secs(20), |spans| {
        spans
            .iter()
            .any(|s| s.service == "tls-http-gw" && s.kind == 2)
    })
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(!otlp.spans().iter().any(|s| s.service == "anonymous-gw"));
    assert!(
        otlp.calls().len() > before,
        "the HTTP exports arrived as calls"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The A2A semantic conventions (OpenTelemetry draft) on the SERVER span of one send on each
/// binding: named after the method, with `a2a.method.name`, `a2a.protocol.version`,
/// `a2a.task.id`, `a2a.task.state`, `gen_ai.conversation.id` and (when given) `a2a.tenant`.
#[tokio::test]
async fn one_send_on_each_binding_carries_the_a2a_semantic_conventions() {
    use a2a_types::v1::a2a_service_client::A2aServiceClient;
    use a2a_types::v1::{Message, Part, Role, SendMessageRequest, part};

    let otlp = OtlpReceiver::start().await;
    let gw = Gateway::start("semconv-gw", &otlp, "", &[]);
    let trace = |n: u8| format!("{:032x}", 0xabc0 + u32::from(n));
    let traceparent = |n: u8| format!("00-{}-00f067aa0ba902b7-01", trace(n));
    let http = reqwest::Client::new();
    let message = json!({"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": "hi"}]});
    let rpc = http
        .post(format!("{}/a2a/jsonrpc", gw.url))
        .header("traceparent", traceparent(1))
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
                      "params": {"tenant": "echo", "message": message}}))
        .send()
        .await
        .unwrap();
    assert_eq!(rpc.status(), 200);
    let rest = http
        .post(format!("{}/a2a/rest/message:send", gw.url))
        .header("traceparent", traceparent(2))
        .header("a2a-version", "1.0")
        .json(&json!({"message": message}))
        .send()
        .await
        .unwrap();
    assert_eq!(rest.status(), 200);
    let channel = tonic::transport::Channel::from_shared(gw.url.clone())
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut request = tonic::Request::new(SendMessageRequest {
        tenant: "echo".into(),
        message: Some(Message {
            message_id: "m-3".into(),
            role: Role::User as i32,
            parts: vec![Part {
                content: Some(part::Content::Text("hi".into())),
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Default::default()
    });
    request
        .metadata_mut()
        .insert("traceparent", traceparent(3).parse().unwrap());
    A2aServiceClient::new(channel)
        .send_message(request)
        .await
        .unwrap();

    let servers = |spans: &[ReceivedSpan]| -> Vec<ReceivedSpan> {
        (1..=3)
            .filter_map(|n| {
                spans
                    .iter()
                    .find(|s| s.trace_id == trace(n) && s.kind == 2)
                    .cloned()
            })
            .collect()
    };
    let spans = otlp
        .wait_for(Duration::from_secs(20), |spans| servers(spans).len() == 3)
        .await;
    for (n, server) in (1..=3).zip(servers(&spans)) {
        let binding = ["JSONRPC", "HTTP+JSON", "GRPC"][n - 1];
        assert_eq!(server.name, "SendMessage", "{binding}");
        assert_eq!(
            server.attr("a2a.method.name"),
            Some("SendMessage"),
            "{binding}"
        );
        assert_eq!(
            server.attr("a2a.protocol.version"),
            Some("1.0"),
            "{binding}"
        );
        assert!(
            server.attr("a2a.task.id").is_some_and(|t| !t.is_empty()),
            "{binding}"
        );
        assert!(
            server
                .attr("gen_ai.conversation.id")
                .is_some_and(|c| !c.is_empty()),
            "{binding}"
        );
        assert_eq!(
            server.attr("a2a.task.state"),
            Some("TASK_STATE_COMPLETED"),
            "{binding}: {server:#?}"
        );
        let tenant = (binding != "HTTP+JSON").then_some("echo");
        assert_eq!(server.attr("a2a.tenant"), tenant, "{binding}");
    }
}

#[tokio::test]
async fn exports_over_http_protobuf_carry_the_headers() {
    let otlp = OtlpReceiver::start().await;
    let endpoint = otlp.http_endpoint();
    let gw = Gateway::start(
        "http-gw",
        &otlp,
        SCENARIO,
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"),
            ("OTEL_EXPORTER_OTLP_HEADERS", "x-api-key=k-456"),
        ],
    );
    send_one(&gw.url).await;
    server_span(&otlp).await;
    let calls = otlp.calls();
    for c in &calls {
        assert_eq!(
            c.metadata.get("content-type").map(String::as_str),
            Some("application/x-protobuf"),
            "{c:?}"
        );
        assert_eq!(
            c.metadata.get("x-api-key").map(String::as_str),
            Some("k-456"),
            "{c:?}"
        );
    }
}
