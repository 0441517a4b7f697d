//! The error rows of the equivalence table: each A2A error the gateway can answer, on each
//! operation that can raise it.

use super::*;

pub(super) async fn error_unknown_task_on_every_op(env: &Env, t: &mut Trace) {
    let c = env.client();
    let id = "no-such-task";
    let mut m = user_message("x");
    m["taskId"] = json!(id);
    let results: Vec<(&str, Result<Value, ClientError>)> = vec![
        (
            "GetTask",
            c.get_task(get(id, None)).await.map(|_| json!({})),
        ),
        (
            "CancelTask",
            c.cancel_task(CancelTaskRequest {
                id: id.into(),
                ..Default::default()
            })
            .await
            .map(|_| json!({})),
        ),
        (
            "SubscribeToTask",
            stream_outcome(
                c.subscribe_to_task(SubscribeToTaskRequest {
                    id: id.into(),
                    ..Default::default()
                })
                .await,
            )
            .await
            .map(|_| json!({})),
        ),
        (
            "SendMessage",
            c.send_message(wire(json!({"message": m.clone()})))
                .await
                .map(|_| json!({})),
        ),
        (
            "SendStreamingMessage",
            stream_outcome(c.send_streaming_message(wire(json!({"message": m}))).await)
                .await
                .map(|_| json!({})),
        ),
        (
            "CreateTaskPushNotificationConfig",
            c.create_push_config(wire(json!({"taskId": id, "url": "https://e.com"})))
                .await
                .map(|_| json!({})),
        ),
        (
            "GetTaskPushNotificationConfig",
            c.get_push_config(GetTaskPushNotificationConfigRequest {
                task_id: id.into(),
                id: "c".into(),
                ..Default::default()
            })
            .await
            .map(|_| json!({})),
        ),
        (
            "ListTaskPushNotificationConfigs",
            c.list_push_configs(ListTaskPushNotificationConfigsRequest {
                task_id: id.into(),
                ..Default::default()
            })
            .await
            .map(|_| json!({})),
        ),
        (
            "DeleteTaskPushNotificationConfig",
            c.delete_push_config(DeleteTaskPushNotificationConfigRequest {
                task_id: id.into(),
                id: "c".into(),
                ..Default::default()
            })
            .await
            .map(|_| json!({})),
        ),
    ];
    for (op, r) in results {
        t.res(op, &r);
        assert_eq!(err_of(&r), &A2aError::task_not_found(id), "{op}");
    }
}

pub(super) async fn error_message_to_terminal_task(env: &Env, t: &mut Trace) {
    let c = env.client();
    let done = send_text(&c, "x").await;
    let mut m = user_message("again");
    m["taskId"] = json!(done.id);
    let r = c.send_message(wire(json!({"message": m.clone()}))).await;
    assert!(matches!(err_of(&r), A2aError::UnsupportedOperation(_)));
    t.res("SendMessage to a completed task", &r);
    let r = stream_outcome(c.send_streaming_message(wire(json!({"message": m}))).await).await;
    assert!(matches!(err_of(&r), A2aError::UnsupportedOperation(_)));
    t.res("SendStreamingMessage to a completed task", &r);
    let r = stream_outcome(
        c.subscribe_to_task(SubscribeToTaskRequest {
            id: done.id.clone(),
            ..Default::default()
        })
        .await,
    )
    .await;
    assert!(matches!(err_of(&r), A2aError::UnsupportedOperation(_)));
    t.res("SubscribeToTask to a completed task", &r);
    let hanging = task_of(
        &send_script(
            &env.scenario_client(),
            json!({"chunks": 0, "end": "hang"}),
            json!({"returnImmediately": true}),
        )
        .await,
    );
    wait_working(&c, &hanging.id).await;
    let mut m = user_message("hey");
    m["taskId"] = json!(hanging.id);
    let r = c.send_message(wire(json!({"message": m}))).await;
    assert!(matches!(err_of(&r), A2aError::UnsupportedOperation(_)));
    t.res("SendMessage to a working task", &r);
}

pub(super) async fn error_version_not_supported(env: &Env, t: &mut Trace) {
    let c = env.client().with_protocol_version("99.0");
    let want = A2aError::VersionNotSupported {
        version: "99.0".into(),
    };
    let results: Vec<(&str, Result<Value, ClientError>)> = vec![
        (
            "SendMessage",
            c.send_message(wire(json!({"message": user_message("x")})))
                .await
                .map(|_| json!({})),
        ),
        (
            "SendStreamingMessage",
            stream_outcome(
                c.send_streaming_message(wire(json!({"message": user_message("x")})))
                    .await,
            )
            .await
            .map(|_| json!({})),
        ),
        (
            "GetTask",
            c.get_task(get("x", None)).await.map(|_| json!({})),
        ),
        (
            "ListTasks",
            c.list_tasks(ListTasksRequest::default())
                .await
                .map(|_| json!({})),
        ),
        (
            "GetExtendedAgentCard",
            c.get_extended_agent_card(GetExtendedAgentCardRequest::default())
                .await
                .map(|_| json!({})),
        ),
    ];
    for (op, r) in results {
        t.res(op, &r);
        assert_eq!(err_of(&r), &want, "{op}");
    }
}

pub(super) async fn error_invalid_params_name_the_field(env: &Env, t: &mut Trace) {
    let c = env.client();
    let tid = send_text(&c, "x").await.id;
    let msg = |m: Value| json!({"message": m});
    let sends = [
        (
            msg(json!({"role": "ROLE_USER", "parts": [{"text": "x"}]})),
            "message.messageId",
        ),
        (
            msg(json!({"messageId": "m", "parts": [{"text": "x"}]})),
            "message.role",
        ),
        (
            msg(json!({"messageId": "m", "role": "ROLE_AGENT", "parts": [{"text": "x"}]})),
            "message.role",
        ),
        (
            msg(json!({"messageId": "m", "role": "ROLE_USER", "parts": []})),
            "message.parts",
        ),
        (
            msg(json!({"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "x"}, {}]})),
            "message.parts[1]",
        ),
        (
            json!({"message": user_message("x"), "configuration": {"historyLength": -2}}),
            "configuration.historyLength",
        ),
        (
            json!({"message": user_message("x"), "configuration":
            {"taskPushNotificationConfig": {"url": "not a url"}}}),
            "configuration.taskPushNotificationConfig.url",
        ),
        (
            json!({"message": user_message("x"), "tenant": "nobody"}),
            "tenant",
        ),
    ];
    for (req, field) in sends {
        let r = c.send_message(wire(req)).await;
        check_field(t, &format!("SendMessage {field}"), &r, field);
    }
    let r = c.get_task(get("", None)).await;
    check_field(t, "GetTask id", &r, "id");
    let r = c.get_task(get(&tid, Some(-1))).await;
    check_field(t, "GetTask historyLength", &r, "historyLength");
    for (req, field) in [
        (json!({"pageSize": 0}), "pageSize"),
        (json!({"pageSize": 101}), "pageSize"),
        (json!({"pageSize": -5}), "pageSize"),
        (json!({"pageToken": "not-a-token"}), "pageToken"),
        (json!({"historyLength": -1}), "historyLength"),
    ] {
        let r = c.list_tasks(wire(req.clone())).await;
        check_field(t, &format!("ListTasks {req}"), &r, field);
    }
    for (req, field) in [
        (json!({"taskId": tid}), "url"),
        (json!({"taskId": tid, "url": "ftp://example.com"}), "url"),
        (
            json!({"taskId": tid, "url": "https://e.com", "id": "a/b"}),
            "id",
        ),
        (
            json!({"taskId": tid, "url": "https://e.com", "authentication": {"scheme": ""}}),
            "authentication.scheme",
        ),
        (json!({"url": "https://e.com"}), "taskId"),
    ] {
        let r = c
            .create_push_config(wire::<TaskPushNotificationConfig>(req))
            .await;
        check_field(
            t,
            &format!("CreateTaskPushNotificationConfig {field}"),
            &r,
            field,
        );
    }
    let r = c
        .list_push_configs(ListTaskPushNotificationConfigsRequest {
            task_id: tid.clone(),
            page_size: 500,
            ..Default::default()
        })
        .await;
    check_field(
        t,
        "ListTaskPushNotificationConfigs pageSize",
        &r,
        "pageSize",
    );
}

pub(super) fn check_field<T: Serialize + std::fmt::Debug>(
    t: &mut Trace,
    label: &str,
    r: &Result<T, ClientError>,
    field: &str,
) {
    t.res(label, r);
    match err_of(r) {
        A2aError::InvalidParams { field: f, .. } => assert_eq!(f, field, "{label}"),
        other => panic!("{label}: expected InvalidParams({field}), got {other:?}"),
    }
}

pub(super) async fn error_content_type_not_supported(env: &Env, t: &mut Trace) {
    let c = env.client();
    let m = json!({"messageId": "m", "role": "ROLE_USER",
                   "parts": [{"raw": "AAEC", "mediaType": "application/x-unsupported-tck-type"}]});
    let r = c.send_message(wire(json!({"message": m}))).await;
    assert!(matches!(
        err_of(&r),
        A2aError::ContentTypeNotSupported { media_type, .. } if media_type == "application/x-unsupported-tck-type"
    ));
    t.res("unsupported part media type", &r);
    let m = json!({"messageId": "m2", "role": "ROLE_USER",
                   "parts": [{"text": "# hi", "mediaType": "text/markdown"}]});
    let r = c.send_message(wire(json!({"message": m}))).await;
    assert!(r.is_ok(), "{r:?}");
    t.res("supported part media type", &r);
}

pub(super) async fn error_extended_card_unsupported(env: &Env, t: &mut Trace) {
    let r = env
        .client()
        .get_extended_agent_card(GetExtendedAgentCardRequest::default())
        .await;
    assert!(matches!(err_of(&r), A2aError::UnsupportedOperation(_)));
    t.res("GetExtendedAgentCard", &r);
}

/// `[extended_card]` without `[auth]`: the card does not declare it, and asking for it is an
/// unsupported operation (as for an agent without one), on every binding.
pub(super) async fn error_extended_card_without_auth(env: &Env, t: &mut Trace) {
    let card = env.gw.card().await;
    assert_eq!(card["capabilities"]["extendedAgentCard"], false);
    assert_eq!(card["supportsAuthenticatedExtendedCard"], false);
    let r = env
        .client()
        .with_header("x-api-key", "the-key")
        .unwrap()
        .get_extended_agent_card(GetExtendedAgentCardRequest::default())
        .await;
    assert!(
        matches!(err_of(&r), A2aError::UnsupportedOperation(_)),
        "{r:?}"
    );
    t.res("GetExtendedAgentCard", &r);
}

pub(super) async fn error_extended_card_not_configured(env: &Env, t: &mut Trace) {
    let r = env
        .client()
        .with_header("x-api-key", "the-key")
        .unwrap()
        .get_extended_agent_card(GetExtendedAgentCardRequest::default())
        .await;
    assert_eq!(err_of(&r), &A2aError::ExtendedAgentCardNotConfigured);
    t.res("GetExtendedAgentCard", &r);
}

pub(super) async fn extended_card_configured(env: &Env, t: &mut Trace) {
    // Without the key, refused (401 / UNAUTHENTICATED, in each binding's form).
    let r = env
        .client()
        .get_extended_agent_card(GetExtendedAgentCardRequest::default())
        .await;
    assert!(matches!(err_of(&r), A2aError::Unauthenticated(_)), "{r:?}");
    t.res("GetExtendedAgentCard without credentials", &r);
    let card = env
        .client()
        .with_header("x-api-key", "the-key")
        .unwrap()
        .get_extended_agent_card(GetExtendedAgentCardRequest::default())
        .await
        .unwrap();
    assert_eq!(card.description, "the extended card");
    assert!(card.skills.iter().any(|s| s.id == "private"));
    t.ok("GetExtendedAgentCard", &card);
}

pub(super) async fn error_extension_required(env: &Env, t: &mut Trace) {
    let r = env.client().list_tasks(ListTasksRequest::default()).await;
    assert_eq!(
        err_of(&r),
        &A2aError::ExtensionSupportRequired {
            uri: "urn:example:required".into()
        }
    );
    t.res("without the extension", &r);
    let r = env
        .client()
        .with_extensions(["urn:example:required", "urn:unknown"])
        .list_tasks(ListTasksRequest::default())
        .await;
    assert!(r.is_ok(), "{r:?}");
    t.res("with the extension", &r);
}

pub(super) async fn error_push_not_supported(env: &Env, t: &mut Trace) {
    let c = env.client();
    let tid = send_text(&c, "x").await.id;
    let results: Vec<(&str, Result<Value, ClientError>)> = vec![
        (
            "Create",
            c.create_push_config(wire(json!({"taskId": tid, "url": "https://e.com"})))
                .await
                .map(|_| json!({})),
        ),
        (
            "Get",
            c.get_push_config(GetTaskPushNotificationConfigRequest {
                task_id: tid.clone(),
                id: "c".into(),
                ..Default::default()
            })
            .await
            .map(|_| json!({})),
        ),
        (
            "List",
            c.list_push_configs(ListTaskPushNotificationConfigsRequest {
                task_id: tid.clone(),
                ..Default::default()
            })
            .await
            .map(|_| json!({})),
        ),
        (
            "Delete",
            c.delete_push_config(DeleteTaskPushNotificationConfigRequest {
                task_id: tid.clone(),
                id: "c".into(),
                ..Default::default()
            })
            .await
            .map(|_| json!({})),
        ),
        (
            "SendMessage with a config",
            c.send_message(wire(json!({"message": user_message("x"), "configuration":
                {"taskPushNotificationConfig": {"url": "https://e.com"}}})))
                .await
                .map(|_| json!({})),
        ),
    ];
    for (op, r) in results {
        t.res(op, &r);
        assert_eq!(err_of(&r), &A2aError::PushNotificationNotSupported, "{op}");
    }
}

pub(super) async fn error_streaming_disabled(env: &Env, t: &mut Trace) {
    let c = env.client();
    let r = stream_outcome(
        c.send_streaming_message(wire(json!({"message": user_message("x")})))
            .await,
    )
    .await;
    assert!(matches!(err_of(&r), A2aError::UnsupportedOperation(_)));
    t.res("SendStreamingMessage", &r);
    let r = stream_outcome(
        c.subscribe_to_task(SubscribeToTaskRequest {
            id: "x".into(),
            ..Default::default()
        })
        .await,
    )
    .await;
    assert!(matches!(err_of(&r), A2aError::UnsupportedOperation(_)));
    t.res("SubscribeToTask", &r);
}
