//! Isolation: principal B (another API key, or a token subject) tries every operation on
//! principal A's task, on every binding, and gets exactly what a missing task gives.

use a2a_client::{A2aClient, ClientError};
use a2a_types::v1::{
    CancelTaskRequest, DeleteTaskPushNotificationConfigRequest,
    GetTaskPushNotificationConfigRequest, GetTaskRequest, ListTaskPushNotificationConfigsRequest,
    ListTasksRequest, SubscribeToTaskRequest, send_message_response,
};
use futures::StreamExt;
use jsonwebtoken::Algorithm;
use serde_json::json;

use crate::auth::{BINDINGS, WRITE, bearer, client, setup, wire};
use crate::harness::{script_message, user_message};

/// Principal B tries every operation on principal A's task and gets exactly what a missing
/// task gives (the task id normalised); B's ListTasks never shows A's task.
#[tokio::test]
async fn isolation_matrix_on_every_binding() {
    let (issuer, gw) = setup(10).await;
    let bob_token = bearer(&issuer.token(Algorithm::RS256, &issuer.claims("bob", WRITE)));
    for kind in BINDINGS {
        let alice = client(&gw, kind, Some(("x-api-key", "alice-secret")));
        let created = alice
            .clone()
            .with_tenant("scenario")
            .send_message(wire(
                json!({"message": script_message(json!({"end": "input-required"}))}),
            ))
            .await
            .unwrap();
        let Some(send_message_response::Payload::Task(task)) = created.payload else {
            panic!("expected a task");
        };
        let a_id = task.id.clone();
        alice
            .create_push_config(wire(
                json!({"taskId": a_id, "id": "cfg", "url": "https://hooks.example.com/a",
                "authentication": {"scheme": "Bearer", "credentials": "push-secret"}}),
            ))
            .await
            .unwrap();
        for (who, b) in [
            (
                "bob key",
                client(&gw, kind, Some(("x-api-key", "bob-secret"))),
            ),
            (
                "bob token",
                client(&gw, kind, Some(("authorization", &bob_token))),
            ),
        ] {
            let missing = uuid::Uuid::now_v7().to_string();
            for op in OPS {
                let on_a = run(&b, op, &a_id).await.replace(&a_id, "<id>");
                let on_missing = run(&b, op, &missing).await.replace(&missing, "<id>");
                assert_eq!(on_a, on_missing, "{kind:?} {who} {op}");
                assert!(
                    on_a.contains("TaskNotFound") || on_a.contains("not found"),
                    "{kind:?} {who} {op}: {on_a}"
                );
            }
            let listed = b.list_tasks(ListTasksRequest::default()).await.unwrap();
            assert!(
                listed.tasks.iter().all(|t| t.id != a_id),
                "{kind:?} {who} lists A's task"
            );
        }
        // A still sees its task, untouched.
        let mine = alice
            .get_task(GetTaskRequest {
                id: a_id.clone(),
                ..Default::default()
            })
            .await
            .unwrap();
        assert_eq!(mine.id, a_id);
        let listed = alice.list_tasks(ListTasksRequest::default()).await.unwrap();
        assert!(listed.tasks.iter().any(|t| t.id == a_id));
    }
}

pub const OPS: [&str; 8] = [
    "GetTask",
    "CancelTask",
    "SubscribeToTask",
    "SendMessage",
    "CreatePushConfig",
    "GetPushConfig",
    "ListPushConfigs",
    "DeletePushConfig",
];

/// The outcome of `op` on task `id`, as comparable text.
pub async fn run(c: &A2aClient, op: &str, id: &str) -> String {
    let id = id.to_owned();
    let outcome: Result<String, ClientError> = match op {
        "GetTask" => c
            .get_task(GetTaskRequest {
                id,
                ..Default::default()
            })
            .await
            .map(|t| format!("{t:?}")),
        "CancelTask" => c
            .cancel_task(CancelTaskRequest {
                id,
                ..Default::default()
            })
            .await
            .map(|t| format!("{t:?}")),
        "SubscribeToTask" => match c
            .subscribe_to_task(SubscribeToTaskRequest {
                id,
                ..Default::default()
            })
            .await
        {
            Ok(mut s) => match s.next().await {
                Some(Err(e)) => Err(e),
                other => Ok(format!("stream: {other:?}")),
            },
            Err(e) => Err(e),
        },
        "SendMessage" => {
            let mut m = user_message("again");
            m["taskId"] = json!(id);
            c.send_message(wire(json!({"message": m})))
                .await
                .map(|r| format!("{r:?}"))
        }
        "CreatePushConfig" => c
            .create_push_config(wire(
                json!({"taskId": id, "url": "https://hooks.example.com/b"}),
            ))
            .await
            .map(|r| format!("{r:?}")),
        "GetPushConfig" => c
            .get_push_config(GetTaskPushNotificationConfigRequest {
                task_id: id,
                id: "cfg".into(),
                ..Default::default()
            })
            .await
            .map(|r| format!("{r:?}")),
        "ListPushConfigs" => c
            .list_push_configs(ListTaskPushNotificationConfigsRequest {
                task_id: id,
                ..Default::default()
            })
            .await
            .map(|r| format!("{r:?}")),
        "DeletePushConfig" => c
            .delete_push_config(DeleteTaskPushNotificationConfigRequest {
                task_id: id,
                id: "cfg".into(),
                ..Default::default()
            })
            .await
            .map(|r| format!("{r:?}")),
        other => unreachable!("{other}"),
    };
    match outcome {
        Ok(v) => format!("ok: {v}"),
        Err(e) => format!("{e:?}"),
    }
}

/// Two API keys with one id under two schemes are two owners: neither sees the other's task.
#[tokio::test]
async fn keys_sharing_an_id_across_schemes_are_different_owners() {
    let gw = crate::harness::TestGateway::with_config(
        r#"
[auth.schemes.main]
scheme = { apiKeySecurityScheme = { location = "header", name = "X-API-Key" } }
keys = [{ id = "ci", key = "main-secret" }]
[auth.schemes.other]
scheme = { apiKeySecurityScheme = { location = "header", name = "X-Other-Key" } }
keys = [{ id = "ci", key = "other-secret" }]
"#,
    )
    .await;
    for kind in BINDINGS {
        let main = client(&gw, kind, Some(("x-api-key", "main-secret")));
        let other = client(&gw, kind, Some(("x-other-key", "other-secret")));
        crate::auth::assert_separate_owners(&main, &other, &format!("{kind:?}")).await;
    }
}
