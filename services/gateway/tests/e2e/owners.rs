//! One owner per person: with an AND-set requirement (a shared application key and each user's
//! own key), two users of the one application key are two owners on every binding. Before,
//! the owner was the principal of the scheme whose name sorts first (`app`), so every user of
//! one application shared every task (review H2).

use a2a_client::{A2aClient, ClientError};
use a2a_types::A2aError;
use a2a_types::v1::{
    CancelTaskRequest, DeleteTaskPushNotificationConfigRequest,
    GetTaskPushNotificationConfigRequest, ListTaskPushNotificationConfigsRequest,
    SubscribeToTaskRequest, TaskPushNotificationConfig, send_message_response::Payload,
};
use futures::StreamExt;
use serde_json::json;

use crate::auth::{BINDINGS, a2a, assert_separate_owners, client, wire};
use crate::harness::{TestGateway, script_message};

const AND_SET: &str = r#"
[auth]
requirements = [{ app = [], user = [] }]
[auth.schemes.app]
scheme = { apiKeySecurityScheme = { location = "header", name = "X-App-Key" } }
keys = [{ id = "web", key = "app-secret" }]
[auth.schemes.user]
scheme = { apiKeySecurityScheme = { location = "header", name = "X-User-Key" } }
keys = [{ id = "alice", key = "alice-secret" }, { id = "bob", key = "bob-secret" }]
"#;

fn missing(result: Result<impl std::fmt::Debug, ClientError>, what: &str) {
    match result {
        Err(e) => {
            let e = a2a(e);
            assert!(
                matches!(e, A2aError::TaskNotFound { .. }),
                "{what}: expected TaskNotFound, got {e:?}"
            );
        }
        Ok(v) => panic!("{what}: another owner's task answered {v:?}"),
    }
}

#[tokio::test]
async fn users_of_one_application_key_are_separate_owners_on_every_binding() {
    let gw = TestGateway::with_config(AND_SET).await;
    for kind in BINDINGS {
        let who = format!("{kind:?}");
        let user = |key: &str| -> A2aClient {
            client(&gw, kind, Some(("x-app-key", "app-secret")))
                .with_header("x-user-key", key)
                .unwrap()
        };
        let (alice, bob) = (user("alice-secret"), user("bob-secret"));
        // GetTask and ListTasks, both ways.
        assert_separate_owners(&alice, &bob, &who).await;

        // A task of alice's that waits for input (so it could be canceled or followed).
        let sent = alice
            .send_message(wire(json!({"tenant": "scenario",
                "message": script_message(json!({"end": "input-required"}))})))
            .await
            .unwrap();
        let Some(Payload::Task(task)) = sent.payload else {
            panic!("{who}: a task");
        };
        let id = task.id.clone();
        missing(
            bob.cancel_task(CancelTaskRequest {
                id: id.clone(),
                ..Default::default()
            })
            .await,
            &format!("{who} CancelTask"),
        );
        let sub = match bob
            .subscribe_to_task(SubscribeToTaskRequest {
                id: id.clone(),
                ..Default::default()
            })
            .await
        {
            Err(e) => Err(e),
            Ok(mut stream) => match stream.next().await {
                Some(Err(e)) => Err(e),
                other => Ok(format!("{other:?}")),
            },
        };
        missing(sub, &format!("{who} SubscribeToTask"));
        let config = TaskPushNotificationConfig {
            task_id: id.clone(),
            id: "hook".into(),
            url: "https://hooks.example.com/a2a".into(),
            ..Default::default()
        };
        missing(
            bob.create_push_config(config.clone()).await,
            &format!("{who} CreatePushConfig"),
        );
        alice.create_push_config(config).await.unwrap();
        missing(
            bob.get_push_config(GetTaskPushNotificationConfigRequest {
                task_id: id.clone(),
                id: "hook".into(),
                ..Default::default()
            })
            .await,
            &format!("{who} GetPushConfig"),
        );
        missing(
            bob.list_push_configs(ListTaskPushNotificationConfigsRequest {
                task_id: id.clone(),
                ..Default::default()
            })
            .await,
            &format!("{who} ListPushConfigs"),
        );
        missing(
            bob.delete_push_config(DeleteTaskPushNotificationConfigRequest {
                task_id: id.clone(),
                id: "hook".into(),
                ..Default::default()
            })
            .await,
            &format!("{who} DeletePushConfig"),
        );
        // Bob's attempts changed nothing: alice's task still waits, with its config.
        let listed = alice
            .list_push_configs(ListTaskPushNotificationConfigsRequest {
                task_id: id.clone(),
                ..Default::default()
            })
            .await
            .unwrap();
        assert_eq!(listed.configs.len(), 1, "{who}");
        alice
            .cancel_task(CancelTaskRequest {
                id,
                ..Default::default()
            })
            .await
            .unwrap();
    }
    gw.stop().await;
}
