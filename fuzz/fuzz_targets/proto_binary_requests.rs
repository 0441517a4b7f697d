//! Protobuf (gRPC) decoding of every request type, 1.0 and 0.3. Encoding is idempotent: a
//! decoded value re-encodes to bytes that decode to a value encoding to the same bytes (compared
//! as bytes, as a float NaN in a `google.protobuf.Value` is not equal to itself). A decoded 0.3
//! request also goes through the 0.3 → 1.0 translation (resource names), which must not panic.
#![no_main]

use a2a_types::v1::{
    CancelTaskRequest, DeleteTaskPushNotificationConfigRequest, GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest, GetTaskRequest, ListTaskPushNotificationConfigsRequest,
    ListTasksRequest, SendMessageRequest, StreamResponse, SubscribeToTaskRequest,
    TaskPushNotificationConfig,
};
use a2a_types::v03_grpc::{self as v03, proto as p03};
use libfuzzer_sys::fuzz_target;
use prost::Message;

fn round_trip<T: Message + Default>(data: &[u8]) -> Option<T> {
    let value = T::decode(data).ok()?;
    let bytes = value.encode_to_vec();
    let again = T::decode(bytes.as_slice()).expect("an encoded value decodes");
    assert_eq!(bytes, again.encode_to_vec());
    Some(value)
}

/// The 0.3 service's requests, decoded and translated as its binding does.
fn v03_requests(data: &[u8]) {
    if let Some(r) = round_trip::<p03::SendMessageRequest>(data) {
        v03::send_request(r);
    }
    if let Some(r) = round_trip::<p03::GetTaskRequest>(data) {
        let _ = v03::get_task_request(r);
    }
    if let Some(r) = round_trip::<p03::CancelTaskRequest>(data) {
        let _ = v03::cancel_task_request(r);
    }
    if let Some(r) = round_trip::<p03::TaskSubscriptionRequest>(data) {
        let _ = v03::subscribe_request(r);
    }
    if let Some(r) = round_trip::<p03::CreateTaskPushNotificationConfigRequest>(data) {
        let _ = v03::create_push_request(r);
    }
    if let Some(r) = round_trip::<p03::GetTaskPushNotificationConfigRequest>(data) {
        let _ = v03::get_push_request(r);
    }
    if let Some(r) = round_trip::<p03::ListTaskPushNotificationConfigRequest>(data) {
        let _ = v03::list_push_request(r);
    }
    if let Some(r) = round_trip::<p03::DeleteTaskPushNotificationConfigRequest>(data) {
        let _ = v03::delete_push_request(r);
    }
    // What a 1.0 event becomes on a 0.3 stream must decode there.
    if let Some(ev) = round_trip::<StreamResponse>(data) {
        let out = v03::stream_response(ev).encode_to_vec();
        p03::StreamResponse::decode(out.as_slice()).expect("a 0.3 event decodes");
    }
}

fuzz_target!(|data: &[u8]| {
    let _ = round_trip::<SendMessageRequest>(data);
    let _ = round_trip::<GetTaskRequest>(data);
    let _ = round_trip::<ListTasksRequest>(data);
    let _ = round_trip::<CancelTaskRequest>(data);
    let _ = round_trip::<SubscribeToTaskRequest>(data);
    let _ = round_trip::<TaskPushNotificationConfig>(data);
    let _ = round_trip::<GetTaskPushNotificationConfigRequest>(data);
    let _ = round_trip::<ListTaskPushNotificationConfigsRequest>(data);
    let _ = round_trip::<DeleteTaskPushNotificationConfigRequest>(data);
    let _ = round_trip::<GetExtendedAgentCardRequest>(data);
    v03_requests(data);
});
