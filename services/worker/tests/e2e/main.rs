//! End-to-end tests of push delivery: a real gateway on a real socket (started in-process through
//! `a2a_gateway::app`, as its binary does), real `a2a-worker` processes, real PostgreSQL and
//! Redis, and a real webhook receiver (an axum server in the test).

mod harness;
mod receiver;

mod delivery;
mod faults;
mod large;
mod prometheus;
mod reconcile;
mod retention;
mod ssrf;
mod traces;
