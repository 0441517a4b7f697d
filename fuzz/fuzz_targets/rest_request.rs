//! An HTTP+JSON request: the verb (first byte), the path and query (up to the first newline),
//! then the body. The router, the query parser of every GET and the body decoder of every
//! operation that takes one.
#![no_main]

use a2a_gateway::fuzzing::rest;
use a2a_types::v1::{
    CancelTaskRequest, GetTaskRequest, ListTaskPushNotificationConfigsRequest, ListTasksRequest,
    SendMessageRequest, SubscribeToTaskRequest, TaskPushNotificationConfig,
};
use libfuzzer_sys::fuzz_target;

const VERBS: [&str; 5] = ["GET", "POST", "DELETE", "PUT", "PATCH"];

fuzz_target!(|data: &[u8]| {
    let Some((&verb, rest)) = data.split_first() else {
        return;
    };
    let method: http::Method = VERBS[usize::from(verb) % VERBS.len()].parse().unwrap();
    let (target, body) = match rest.iter().position(|&b| b == b'\n') {
        Some(i) => (&rest[..i], &rest[i + 1..]),
        None => (rest, &[][..]),
    };
    let Ok(target) = std::str::from_utf8(target) else {
        return;
    };
    let (path, query) = match target.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (target, None),
    };
    if let Ok(route) = rest::resolve(&method, "/a2a/rest", path) {
        // A matched route names an operation the verb is allowed for.
        assert!(!route.op.method().as_str().is_empty());
    }
    let _ = rest::query::<GetTaskRequest>(query, rest::GET_TASK);
    let _ = rest::query::<ListTasksRequest>(query, rest::LIST_TASKS);
    let _ = rest::query::<ListTaskPushNotificationConfigsRequest>(query, rest::LIST_PUSH_CONFIGS);
    let _ = rest::body::<SendMessageRequest>(body);
    let _ = rest::body::<CancelTaskRequest>(body);
    let _ = rest::body::<SubscribeToTaskRequest>(body);
    let _ = rest::body::<TaskPushNotificationConfig>(body);
});
