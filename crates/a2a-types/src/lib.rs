//! The A2A 1.0 wire model and the rules every other crate shares.
//!
//! - [`v1`]: prost messages generated from `proto/lf/a2a/v1/a2a.proto`, with ProtoJSON serde
//!   (camelCase out, camelCase or snake_case in, enums by name or number, unknown fields ignored),
//!   and the tonic service for `lf.a2a.v1.A2AService`.
//! - [`A2aError`]: the one error enum, with its JSON-RPC / HTTP / gRPC mapping.
//! - [`state`]: which task states are terminal or interrupted, and how an event changes a task.
//! - [`v03_grpc`]: the 0.3 gRPC service (`a2a.v1.A2AService`) and its translation to 1.0.

pub mod error;
mod list_response;
pub mod method;
pub mod state;
pub mod status;
pub mod string_list;
#[cfg(feature = "testing")]
pub mod testing;
pub mod v03;
pub mod v03_grpc;
pub mod wkt;
mod wkt_struct;

pub use method::Method;

/// Where an A2A server publishes its public agent card (a well-known URI, RFC 8615).
pub const WELL_KNOWN_AGENT_CARD_PATH: &str = "/.well-known/agent-card.json";
pub use error::{
    A2aError, ERROR_DOMAIN, ErrorInfo, RATE_LIMITED_CODE, WireCodes, grpc_status_name,
};

/// Generated from `lf.a2a.v1`.
#[allow(clippy::all, missing_docs)]
pub mod v1 {
    include!(concat!(env!("OUT_DIR"), "/lf.a2a.v1.rs"));
    include!(concat!(env!("OUT_DIR"), "/lf.a2a.v1.serde.rs"));
}

/// The encoded `FileDescriptorSet` of the A2A proto (with its imports), for gRPC reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/a2a_descriptor.bin"));

/// The protocol version this gateway speaks natively.
pub const PROTOCOL_VERSION: &str = "1.0";

/// The protocol dialect a request speaks, and that a push config was registered in (its
/// webhook gets payloads in the same dialect).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub enum Dialect {
    /// A2A 1.0 (`A2A-Version: 1.x`): the native model.
    #[default]
    V1,
    /// A2A 0.3 (`A2A-Version: 0.3`, or no header on a 0.3 method or path), translated at the
    /// edge by [`v03`].
    V03,
}

impl Dialect {
    /// The version as `A2A-Version` and storage spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Dialect::V1 => "1.0",
            Dialect::V03 => "0.3",
        }
    }

    /// The dialect stored as [`Dialect::as_str`]; anything unknown reads as 1.0.
    pub fn from_stored(s: &str) -> Self {
        if s == "0.3" {
            Dialect::V03
        } else {
            Dialect::V1
        }
    }
}

#[cfg(test)]
mod json_tests;
#[cfg(test)]
mod proptests;
