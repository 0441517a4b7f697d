//! a2a-gateway: an A2A 1.0 gateway. See `ARCHITECTURE.md` at the repository root for the map.

pub mod admin;
pub mod agents;
pub mod app;
pub mod auth;
pub mod bindings;
pub mod cards;
pub mod cli;
pub mod config;
mod conn;
#[cfg(feature = "failpoints")]
mod failpoints;
pub mod fetch;
#[doc(hidden)]
pub mod fuzzing;
pub mod gateway;
pub mod keys;
pub mod limits;
pub mod metrics;
pub mod retention;
pub mod service;
pub mod signing;
#[cfg(feature = "test-panics")]
mod test_panics;
#[cfg(test)]
mod tidy;
pub mod tls;
pub mod upstream;
