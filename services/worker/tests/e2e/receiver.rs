//! The webhook receiver, shared with the gateway's push tests.

pub use a2a_testing::receiver::*;
