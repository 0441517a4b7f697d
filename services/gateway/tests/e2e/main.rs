//! End-to-end tests: a real gateway on a real socket, driven over HTTP. One test binary, many
//! modules (see `harness` for the `TestGateway` builder).

mod harness;
mod issuer;

mod abuse;
mod admin;
mod auth;
mod binary;
mod bounds;
mod card;
mod card_schema;
mod catalogue;
mod dialect03;
mod docs;
mod equivalence;
mod error_table;
mod errors;
mod grpc;
mod grpc03;
mod idempotency;
mod isolation;
mod lifecycle;
mod listing;
mod metrics;
mod owners;
mod poison;
mod postgres;
mod push_configs;
mod push_delivery;
mod quotas;
mod rate_limits;
mod readme;
mod redis;
mod rest;
mod retention;
mod signatures;
mod streams;
mod tls;
mod traces;
mod upstream;
