//! Errors as rich statuses, service parameters in metadata, limits, shutdown, health,
//! reflection, and a malformed frame.

use super::*;
#[tokio::test]
async fn errors_are_rich_statuses() {
    let gw = TestGateway::start().await;
    let mut c = client(&gw).await;

    let err = c
        .get_task(req(GetTaskRequest {
            id: "no-such-task".into(),
            ..Default::default()
        }))
        .await
        .unwrap_err();
    let info = assert_a2a_error(&err, Code::NotFound, "TASK_NOT_FOUND");
    assert_eq!(info.metadata["taskId"], "no-such-task");
    assert_eq!(err.message(), "task no-such-task not found");

    let mut r = Request::new(text("x"));
    r.metadata_mut()
        .insert("a2a-version", "99.0".parse().unwrap());
    let err = c.send_message(r).await.unwrap_err();
    let info = assert_a2a_error(&err, Code::FailedPrecondition, "VERSION_NOT_SUPPORTED");
    assert_eq!(info.metadata["version"], "99.0");

    let err = c
        .send_message(req(SendMessageRequest::default()))
        .await
        .unwrap_err();
    let info = assert_a2a_error(&err, Code::InvalidArgument, "INVALID_PARAMS");
    assert_eq!(info.metadata["field"], "message");
    let bad = err.get_details_bad_request().expect("a BadRequest detail");
    assert_eq!(bad.field_violations[0].field, "message");

    // Streaming RPCs refuse before the stream starts, with the same rich status.
    let err = c
        .subscribe_to_task(req(SubscribeToTaskRequest {
            id: "no-such-task".into(),
            ..Default::default()
        }))
        .await
        .unwrap_err();
    assert_a2a_error(&err, Code::NotFound, "TASK_NOT_FOUND");
}

#[tokio::test]
async fn extensions_are_echoed_and_required_ones_enforced() {
    let gw = TestGateway::with_config(
        r#"
        [[extensions]]
        uri = "urn:example:required"
        required = true
        [[extensions]]
        uri = "urn:example:optional"
        "#,
    )
    .await;
    let mut c = client(&gw).await;
    let err = c
        .list_tasks(req(ListTasksRequest::default()))
        .await
        .unwrap_err();
    let info = assert_a2a_error(&err, Code::FailedPrecondition, "EXTENSION_SUPPORT_REQUIRED");
    assert_eq!(info.metadata["extension"], "urn:example:required");

    let mut r = req(ListTasksRequest::default());
    r.metadata_mut().insert(
        "a2a-extensions",
        "urn:example:required, urn:example:optional, urn:unknown"
            .parse()
            .unwrap(),
    );
    let resp = c.list_tasks(r).await.unwrap();
    assert_eq!(
        resp.metadata().get("a2a-extensions").unwrap(),
        "urn:example:required, urn:example:optional"
    );
}

#[tokio::test]
async fn shutdown_ends_open_streams_with_unavailable() {
    let gw = TestGateway::start().await;
    let mut c = client(&gw).await;
    let mut stream = c
        .send_streaming_message(req(script(json!({"end": "hang"}), false)))
        .await
        .unwrap()
        .into_inner();
    let first = stream.message().await.unwrap().unwrap();
    assert!(matches!(
        first.payload,
        Some(stream_response::Payload::Task(_))
    ));
    let rest = tokio::spawn(async move {
        loop {
            match stream.message().await {
                Ok(Some(_)) => continue,
                Ok(None) => panic!("a stream cut short must not end with OK"),
                Err(status) => return status,
            }
        }
    });
    gw.stop().await;
    let status = rest.await.unwrap();
    assert_a2a_error(&status, Code::Unavailable, "UNAVAILABLE");
}

#[tokio::test]
async fn oversized_messages_are_refused_and_http_paths_unaffected() {
    let gw = TestGateway::with_config("[limits]\nmax_body_bytes = 1024\n").await;
    let mut c = client(&gw).await;
    let err = c
        .send_message(req(text(&"x".repeat(4096))))
        .await
        .unwrap_err();
    // tonic refuses an oversized message before decoding it, with OUT_OF_RANGE (grpc-go says
    // RESOURCE_EXHAUSTED); either way the limit is the configured body limit.
    assert_eq!(err.code(), Code::OutOfRange, "{err:?}");
    assert!(err.message().contains("1024"), "{err:?}");
    c.send_message(req(text("small"))).await.unwrap();
    // gRPC routes must not swallow unknown HTTP paths.
    let resp = gw.client.get(gw.url("/no/such/path")).send().await.unwrap();
    assert_eq!(resp.status(), 404);
}

#[tokio::test]
async fn health_reports_serving() {
    use tonic_health::pb::health_check_response::ServingStatus;
    use tonic_health::pb::{HealthCheckRequest, health_client::HealthClient};
    let gw = TestGateway::start().await;
    let channel = channel(&gw).await;
    let mut health = HealthClient::new(channel);
    for service in ["", "lf.a2a.v1.A2AService", "a2a.v1.A2AService"] {
        let resp = health
            .check(HealthCheckRequest {
                service: service.into(),
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(resp.status(), ServingStatus::Serving, "{service:?}");
    }
}

#[tokio::test]
async fn health_watchers_see_not_serving_at_shutdown() {
    use tonic_health::pb::health_check_response::ServingStatus;
    use tonic_health::pb::{HealthCheckRequest, health_client::HealthClient};
    let gw = TestGateway::start().await;
    let mut health = HealthClient::new(channel(&gw).await);
    let mut watches = Vec::new();
    for service in ["", "lf.a2a.v1.A2AService", "a2a.v1.A2AService"] {
        let request = HealthCheckRequest {
            service: service.into(),
        };
        let mut watch = health.watch(request).await.unwrap().into_inner();
        let first = watch.message().await.unwrap().unwrap();
        assert_eq!(first.status(), ServingStatus::Serving, "{service:?}");
        watches.push((service, watch));
    }
    // The open Watch streams do not hold the shutdown (`stop` allows 10 s).
    gw.stop().await;
    for (service, mut watch) in watches {
        let last = watch.message().await.unwrap().unwrap();
        assert_eq!(last.status(), ServingStatus::NotServing, "{service:?}");
        assert!(watch.message().await.unwrap().is_none(), "{service:?} ends");
    }
}

#[tokio::test]
async fn reflection_lists_the_service_and_resolves_its_imports() {
    use prost::Message as _;
    use tonic_reflection::pb::v1::ServerReflectionRequest;
    use tonic_reflection::pb::v1::server_reflection_client::ServerReflectionClient;
    use tonic_reflection::pb::v1::server_reflection_request::MessageRequest;
    use tonic_reflection::pb::v1::server_reflection_response::MessageResponse;

    let gw = TestGateway::start().await;
    let channel = channel(&gw).await;
    let mut reflection = ServerReflectionClient::new(channel);
    let asks = [
        MessageRequest::ListServices(String::new()),
        MessageRequest::FileContainingSymbol("lf.a2a.v1.A2AService".into()),
        // The 0.3 service beside it.
        MessageRequest::FileContainingSymbol("a2a.v1.A2AService".into()),
        // The A2A proto imports struct.proto; a client must be able to fetch it too.
        MessageRequest::FileByFilename("google/protobuf/struct.proto".into()),
    ];
    let requests = asks.map(|m| ServerReflectionRequest {
        host: String::new(),
        message_request: Some(m),
    });
    let mut answers = reflection
        .server_reflection_info(tokio_stream::iter(requests))
        .await
        .unwrap()
        .into_inner();

    let next = |r: Option<tonic_reflection::pb::v1::ServerReflectionResponse>| {
        r.expect("one answer per request").message_response.unwrap()
    };
    let Some(MessageResponse::ListServicesResponse(list)) =
        answers.message().await.unwrap().map(|r| next(Some(r)))
    else {
        panic!("a service list");
    };
    let names: Vec<_> = list.service.iter().map(|s| s.name.as_str()).collect();
    for want in [
        "lf.a2a.v1.A2AService",
        "a2a.v1.A2AService",
        "grpc.health.v1.Health",
    ] {
        assert!(names.contains(&want), "{want} in {names:?}");
    }
    for want_file in [
        "lf/a2a/v1/a2a.proto",
        "a2a/v1/a2a.proto",
        "google/protobuf/struct.proto",
    ] {
        let MessageResponse::FileDescriptorResponse(files) = next(answers.message().await.unwrap())
        else {
            panic!("a file descriptor for {want_file}");
        };
        let names: Vec<_> = files
            .file_descriptor_proto
            .iter()
            .map(|b| {
                prost_types::FileDescriptorProto::decode(b.as_slice())
                    .unwrap()
                    .name()
                    .to_owned()
            })
            .collect();
        assert!(
            names.iter().any(|n| n == want_file),
            "{want_file} in {names:?}"
        );
    }
}

#[tokio::test]
async fn a_truncated_frame_fails_the_call_not_the_server() {
    let gw = TestGateway::start().await;
    let tcp = tokio::net::TcpStream::connect(gw.addr).await.unwrap();
    let (mut h2, connection) = h2::client::handshake(tcp).await.unwrap();
    tokio::spawn(connection);
    let request = http::Request::post(format!(
        "http://{}/lf.a2a.v1.A2AService/SendMessage",
        gw.addr
    ))
    .header("content-type", "application/grpc")
    .header("te", "trailers")
    .body(())
    .unwrap();
    let (response, mut body) = h2.send_request(request, false).unwrap();
    // Uncompressed frame announcing 100 bytes, followed by 10 and the end of the stream.
    let mut frame = vec![0u8];
    frame.extend(100u32.to_be_bytes());
    frame.extend([0x0a; 10]);
    body.send_data(frame.into(), true).unwrap();

    let response = tokio::time::timeout(Duration::from_secs(10), response)
        .await
        .expect("an answer within 10 s")
        .unwrap();
    let (parts, mut body) = response.into_parts();
    assert_eq!(parts.status, 200, "gRPC errors travel in grpc-status");
    let status = match parts.headers.get("grpc-status") {
        Some(s) => s.clone(), // trailers-only response
        None => {
            while let Some(chunk) = body.data().await {
                chunk.unwrap();
            }
            let trailers = body.trailers().await.unwrap().expect("trailers");
            trailers["grpc-status"].clone()
        }
    };
    // tonic reports the early end of the body as INTERNAL; INVALID_ARGUMENT would do as well.
    assert!(
        ["3", "13"].contains(&status.to_str().unwrap()),
        "a truncated message fails: grpc-status {status:?}"
    );

    // The same server still serves.
    let mut c = client(&gw).await;
    let task = task_of(
        c.send_message(req(text("after")))
            .await
            .unwrap()
            .into_inner(),
    );
    assert_eq!(state(&task), TaskState::Completed);
}
