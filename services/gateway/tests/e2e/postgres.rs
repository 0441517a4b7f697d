//! The gateway on PostgreSQL (issue 4), against real servers: every operation on the PostgreSQL
//! store, a restart of the real binary on the same database, `kill -9` in the middle of streams,
//! SIGTERM in the middle of turns, and a PostgreSQL outage under a running gateway. Databases come from `a2a_testing`
//! (`A2A_TEST_DATABASE_URL`, else a private server); the outage test always stops its own
//! private server, by PID.

mod crash;
mod drain;
mod keys;
mod operations;
mod outage;
mod outbox;
pub(crate) mod process;
mod restart;
