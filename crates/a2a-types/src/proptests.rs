//! Property tests: the ProtoJSON form (what the JSON bindings and the store write) and the
//! protobuf form (gRPC) carry every generated task and message unchanged.

use proptest::prelude::*;
use prost::Message as _;

use crate::testing::{message, task};
use crate::v1::{Message, SendMessageRequest, StreamResponse, Task, stream_response::Payload};

fn json_round_trip<T>(value: &T) -> T
where
    T: serde::Serialize + serde::de::DeserializeOwned,
{
    let json = serde_json::to_string(value).unwrap();
    serde_json::from_str(&json).unwrap_or_else(|e| panic!("{json} does not decode: {e}"))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn protojson_carries_tasks(task in task()) {
        prop_assert_eq!(&json_round_trip::<Task>(&task), &task);
        let event = StreamResponse { payload: Some(Payload::Task(task)) };
        prop_assert_eq!(&json_round_trip(&event), &event);
    }

    #[test]
    fn protojson_carries_messages(message in message()) {
        prop_assert_eq!(&json_round_trip::<Message>(&message), &message);
        let req = SendMessageRequest { message: Some(message), ..Default::default() };
        prop_assert_eq!(&json_round_trip(&req), &req);
    }

    #[test]
    fn protobuf_carries_tasks_and_messages(task in task(), message in message()) {
        prop_assert_eq!(&Task::decode(task.encode_to_vec().as_slice()).unwrap(), &task);
        prop_assert_eq!(&Message::decode(message.encode_to_vec().as_slice()).unwrap(), &message);
    }
}
