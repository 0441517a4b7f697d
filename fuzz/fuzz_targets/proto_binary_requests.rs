//! Protobuf (gRPC) decoding of every request type. Encoding is idempotent: a decoded value
//! re-encodes to bytes that decode to a value encoding to the same bytes (compared as bytes, as
//! a float NaN in a `google.protobuf.Value` is not equal to itself).
#![no_main]

use a2a_types::v1::{
    CancelTaskRequest, DeleteTaskPushNotificationConfigRequest, GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest, GetTaskRequest, ListTaskPushNotificationConfigsRequest,
    ListTasksRequest, SendMessageRequest, StreamResponse, SubscribeToTaskRequest,
    TaskPushNotificationConfig,
};
use libfuzzer_sys::fuzz_target;
use prost::Message;

fn round_trip<T: Message + Default>(data: &[u8]) {
    let Ok(value) = T::decode(data) else {
        return;
    };
    let bytes = value.encode_to_vec();
    let again = T::decode(bytes.as_slice()).expect("an encoded value decodes");
    assert_eq!(bytes, again.encode_to_vec());
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
    round_trip::<StreamResponse>(data);
});
