//! Test harness for real backing services (DESIGN.md, *Testing*): tests talk to a real
//! PostgreSQL, never to a mock, and never skip silently.
//!
//! - [`TestDatabase::create`] gives each test a fresh, empty database: on the server named by
//!   `A2A_TEST_DATABASE_URL` when it is set (CI sets it to the machine's server), otherwise on a
//!   private throwaway server started from the local PostgreSQL binaries. If neither works the test
//!   fails with a message saying how to fix it.
//! - [`PgServer`] is such a private server; fault tests (stopping PostgreSQL under a running
//!   gateway) start their own and stop it by its PID, never touching a shared server.

mod pg;

pub use pg::{PgServer, TestDatabase};

/// The variable naming an existing PostgreSQL server for tests (any database on it works as the
/// admin connection; the user must be allowed to `CREATE DATABASE`).
pub const TEST_DATABASE_URL_VAR: &str = "A2A_TEST_DATABASE_URL";
