//! The `push` scenario's webhook receiver, built into the generator: every delivery is a
//! StreamResponse (`task`, `statusUpdate`, `artifactUpdate`) for one task; the receiver checks
//! that a task's deliveries start with the task, name it, and stop at its terminal state, and
//! wakes the operation waiting for that task when the terminal state arrives.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use a2a_types::state::is_terminal;
use a2a_types::v1::TaskState;
use anyhow::Result;
use axum::extract::State;
use axum::http::StatusCode;
use serde_json::Value;
use tokio::sync::watch;

use crate::load::Failure;

/// What the receiver saw of one task: `None` until it ended, then the checked outcome and when.
type Ended = Option<(Result<TaskState, String>, Instant)>;

#[derive(Default)]
struct Track {
    deliveries: u64,
    state: Option<TaskState>,
    error: Option<String>,
    ended: Option<watch::Sender<Ended>>,
}

#[derive(Clone, Default)]
pub struct Webhook {
    tasks: Arc<Mutex<HashMap<String, Track>>>,
}

fn state_name(v: &Value) -> Option<TaskState> {
    v.as_str().and_then(TaskState::from_str_name)
}

/// The task id and the state (if the event carries one) of a delivered StreamResponse.
fn parse(body: &Value) -> Result<(String, Option<TaskState>, bool), String> {
    if let Some(t) = body.get("task") {
        let id = t["id"].as_str().ok_or("a task without id")?;
        return Ok((id.to_owned(), state_name(&t["status"]["state"]), true));
    }
    if let Some(u) = body.get("statusUpdate") {
        let id = u["taskId"]
            .as_str()
            .ok_or("a status update without taskId")?;
        return Ok((id.to_owned(), state_name(&u["status"]["state"]), false));
    }
    if let Some(u) = body.get("artifactUpdate") {
        let id = u["taskId"]
            .as_str()
            .ok_or("an artifact update without taskId")?;
        return Ok((id.to_owned(), None, false));
    }
    Err(format!("not a StreamResponse: {body}"))
}

impl std::fmt::Debug for Webhook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Webhook").finish_non_exhaustive()
    }
}

impl Webhook {
    fn channel(&self, id: &str) -> watch::Receiver<Ended> {
        let mut tasks = self.tasks.lock().unwrap();
        let track = tasks.entry(id.to_owned()).or_default();
        track
            .ended
            .get_or_insert_with(|| watch::channel(None).0)
            .subscribe()
    }

    fn deliver(&self, body: &Value) -> StatusCode {
        let Ok((id, state, is_task)) = parse(body) else {
            return StatusCode::BAD_REQUEST;
        };
        let mut tasks = self.tasks.lock().unwrap();
        let track = tasks.entry(id).or_default();
        track.deliveries += 1;
        if track.deliveries == 1 && !is_task {
            track
                .error
                .get_or_insert("the first delivery is not the task".into());
        }
        if track.state.is_some_and(is_terminal) {
            track
                .error
                .get_or_insert("a delivery after the terminal state".into());
        }
        if let Some(s) = state {
            track.state = Some(s);
            if is_terminal(s) {
                let outcome = match &track.error {
                    Some(e) => Err(e.clone()),
                    None => Ok(s),
                };
                track
                    .ended
                    .get_or_insert_with(|| watch::channel(None).0)
                    .send_replace(Some((outcome, Instant::now())));
            }
        }
        StatusCode::OK
    }

    /// Waits for task `id`'s terminal delivery; returns its state and when it arrived. Forgets
    /// the task afterwards.
    pub async fn ended(&self, id: &str) -> Result<(TaskState, Instant), Failure> {
        let mut rx = self.channel(id);
        let ended = rx
            .wait_for(Option::is_some)
            .await
            .map_err(|_| Failure::new("push", "receiver gone"))?
            .clone()
            .expect("waited for Some");
        self.tasks.lock().unwrap().remove(id);
        match ended {
            (Ok(s), at) => Ok((s, at)),
            (Err(e), _) => Err(Failure::new("check:order", format!("task {id}: {e}"))),
        }
    }

    /// Serves the receiver on `listen`; the bound address.
    pub async fn serve(&self, listen: &str) -> Result<SocketAddr> {
        let listener = tokio::net::TcpListener::bind(listen).await?;
        let addr = listener.local_addr()?;
        let app = axum::Router::new()
            .route(
                "/hook",
                axum::routing::post(
                    |State(hook): State<Webhook>, body: axum::body::Bytes| async move {
                        match serde_json::from_slice::<Value>(&body) {
                            Ok(v) => hook.deliver(&v),
                            Err(_) => StatusCode::BAD_REQUEST,
                        }
                    },
                ),
            )
            .with_state(self.clone());
        tokio::spawn(async move { axum::serve(listener, app).await });
        Ok(addr)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[tokio::test]
    async fn deliveries_in_order_end_the_wait_and_disorder_is_an_error() {
        let hook = Webhook::default();
        let task = json!({"task": {"id": "t1", "status": {"state": "TASK_STATE_SUBMITTED"}}});
        let done = json!({"statusUpdate": {"taskId": "t1",
                          "status": {"state": "TASK_STATE_COMPLETED"}}});
        assert_eq!(hook.deliver(&task), StatusCode::OK);
        let waiting = tokio::spawn({
            let hook = hook.clone();
            async move { hook.ended("t1").await }
        });
        assert_eq!(hook.deliver(&done), StatusCode::OK);
        assert_eq!(waiting.await.unwrap().unwrap().0, TaskState::Completed);
        assert!(
            hook.tasks.lock().unwrap().is_empty(),
            "forgotten once ended"
        );

        // t2 starts with a status update: the wait ends with an order error.
        let bad = json!({"statusUpdate": {"taskId": "t2",
                         "status": {"state": "TASK_STATE_COMPLETED"}}});
        hook.deliver(&bad);
        let err = hook.ended("t2").await.unwrap_err();
        assert_eq!(err.kind, "check:order");
        assert_eq!(hook.deliver(&json!({"nope": 1})), StatusCode::BAD_REQUEST);
    }
}
