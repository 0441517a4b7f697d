//! Test harness for real backing services (DESIGN.md, *Testing*): tests talk to a real
//! PostgreSQL and Redis, never to a mock, and never skip silently.
//!
//! - [`TestDatabase::create`] gives each test a fresh, empty database: on the server named by
//!   `A2A_TEST_DATABASE_URL` when it is set (CI sets it to the machine's server), otherwise on a
//!   private throwaway server started from the local PostgreSQL binaries. If neither works the test
//!   fails with a message saying how to fix it.
//! - [`PgServer`] is such a private server; fault tests (stopping PostgreSQL under a running
//!   gateway) start their own and stop it by its PID, never touching a shared server.

mod calls;
pub mod cli;
mod cluster;
pub mod otlp;
mod pg;
mod process;
pub mod receiver;
mod redis;

pub use calls::{env_of, jsonrpc};
pub use cluster::{RedisCluster, TestCluster};
pub use pg::{PgServer, TestDatabase, insert_delivery_log_rows};
pub use process::spawn_listening;
pub use redis::{RedisServer, TestRedis};

/// The variable naming an existing PostgreSQL server for tests (any database on it works as the
/// admin connection; the user must be allowed to `CREATE DATABASE`).
pub const TEST_DATABASE_URL_VAR: &str = "A2A_TEST_DATABASE_URL";

/// The variable naming an existing Redis server for tests (each test uses its own key prefix).
pub const TEST_REDIS_URL_VAR: &str = "A2A_TEST_REDIS_URL";

pub(crate) fn free_port() -> Result<u16, String> {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| format!("no free port: {e}"))
}
