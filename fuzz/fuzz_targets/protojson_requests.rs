//! ProtoJSON decoding of every request type (and of the Task, Message and StreamResponse the
//! gateway reads back from upstream agents and its store). A value that decodes must encode
//! and decode to itself.
#![no_main]

use a2a_types::v1::{
    AgentCard, CancelTaskRequest, DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest, GetTaskPushNotificationConfigRequest, GetTaskRequest,
    ListTaskPushNotificationConfigsRequest, ListTasksRequest, Message, SendMessageRequest,
    StreamResponse, SubscribeToTaskRequest, Task, TaskPushNotificationConfig,
};
use libfuzzer_sys::fuzz_target;
use serde::Serialize;
use serde::de::DeserializeOwned;

fn round_trip<T: DeserializeOwned + Serialize + PartialEq + std::fmt::Debug>(data: &[u8]) {
    let Ok(value) = serde_json::from_slice::<T>(data) else {
        return;
    };
    let json = serde_json::to_vec(&value).expect("a decoded value encodes");
    let again: T = serde_json::from_slice(&json)
        .unwrap_or_else(|e| panic!("{} does not decode: {e}", String::from_utf8_lossy(&json)));
    assert_eq!(value, again);
}

fuzz_target!(|data: &[u8]| {
    round_trip::<SendMessageRequest>(data);
    round_trip::<GetTaskRequest>(data);
    round_trip::<ListTasksRequest>(data);
    round_trip::<CancelTaskRequest>(data);
    round_trip::<SubscribeToTaskRequest>(data);
    round_trip::<TaskPushNotificationConfig>(data);
    round_trip::<GetTaskPushNotificationConfigRequest>(data);
    round_trip::<ListTaskPushNotificationConfigsRequest>(data);
    round_trip::<DeleteTaskPushNotificationConfigRequest>(data);
    round_trip::<GetExtendedAgentCardRequest>(data);
    round_trip::<Task>(data);
    round_trip::<Message>(data);
    round_trip::<StreamResponse>(data);
    round_trip::<AgentCard>(data);
});
