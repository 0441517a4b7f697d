//! The worker continues the trace an event was published under (the Redis entry's `tp`): each
//! delivery attempt is a span exported to an OTLP receiver in the test (a tonic TraceService),
//! child of that context, and the webhook receives the attempt's `traceparent`.
//!
//! The gateway here runs in the test process without an exporter, so the entry carries the
//! client's own `traceparent` as it came; with the gateway exporting too, `tp` names its publish
//! span (the gateway's trace test checks that chain, with the same delivery code in process).

use std::time::Duration;

use a2a_testing::otlp::OtlpReceiver;
use serde_json::json;

use crate::harness::Deployment;
use crate::receiver::Receiver;

const TRACE: &str = "0af7651916cd43dd8448eb211c80319c";
const PARENT: &str = "b7ad6b7169203331";

#[tokio::test]
async fn each_delivery_attempt_is_a_span_of_the_events_trace_and_the_webhook_gets_it() {
    let env = Deployment::start("127.0.0.1").await;
    let otlp = OtlpReceiver::start().await;
    let receiver = Receiver::start_failing(1).await;
    let endpoint = otlp.endpoint();
    let _worker = env.worker(&[
        ("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint),
        ("OTEL_BSP_SCHEDULE_DELAY", "100"),
    ]);
    let push = json!({"url": receiver.url("/hook")});
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage",
        "params": {"tenant": "scenario",
                   "message": crate::harness::script_message(json!({"chunks": 1})),
                   "configuration": {"taskPushNotificationConfig": push}}});
    let sse = reqwest::Client::new()
        .post(format!("{}/a2a/jsonrpc", env.gateway_url))
        .header("traceparent", format!("00-{TRACE}-{PARENT}-01"))
        .json(&body)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(sse.contains("TASK_STATE_COMPLETED"), "{sse}");
    // task, working, 1 chunk, completed; the first attempt of the first event fails.
    receiver
        .wait_for(Duration::from_secs(20), |r| {
            r.iter().filter(|r| r.status == 200).count() >= 4
        })
        .await;
    let spans = otlp
        .wait_for(Duration::from_secs(20), |s| {
            s.iter().filter(|s| s.name == "push deliver").count() >= 5
        })
        .await;
    let delivers: Vec<_> = spans.iter().filter(|s| s.name == "push deliver").collect();
    assert_eq!(delivers.len(), 5, "{delivers:#?}");
    for d in &delivers {
        assert_eq!(d.service, "a2a-worker");
        assert_eq!(d.kind, 3, "CLIENT");
        assert_eq!(d.trace_id, TRACE, "{d:#?}");
        assert_eq!(d.parent_span_id, PARENT, "{d:#?}");
    }
    let failed = delivers
        .iter()
        .find(|d| d.attr("http.response.status_code") == Some("500"))
        .expect("the failed attempt");
    assert_eq!(failed.attr("a2a.push.attempt"), Some("1"));
    assert_eq!(failed.attr("error.type"), Some("http_status"));
    assert_eq!(failed.status, 2, "ERROR");
    assert!(
        delivers
            .iter()
            .any(|d| d.attr("a2a.push.attempt") == Some("2") && d.attr("a2a.seq") == Some("1"))
    );
    for r in receiver.requests() {
        let tp = r.headers["traceparent"].to_str().unwrap().to_owned();
        let parts: Vec<&str> = tp.split('-').collect();
        assert_eq!(parts[1], TRACE, "{tp}");
        assert!(
            delivers.iter().any(|d| d.span_id == parts[2]),
            "{tp} names a delivery span"
        );
    }
}
