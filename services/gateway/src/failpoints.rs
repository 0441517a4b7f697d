//! Test-only failpoints (cargo feature `failpoints`, which no binary build turns on). An e2e
//! test drives a real gateway process, so a failpoint is switched from outside: by a file.

/// Whether this replica's dispatch lease renewals are to fail (as under a partition from
/// PostgreSQL or pool exhaustion): the file named by `A2A_FAILPOINT_LEASE_STALL` exists.
pub(crate) fn lease_renewal_stalled() -> bool {
    std::env::var_os("A2A_FAILPOINT_LEASE_STALL")
        .is_some_and(|path| std::path::Path::new(&path).exists())
}

/// Holds a publish (the outbox relay's fast path) after its commit for as long as the file
/// named by `A2A_FAILPOINT_RELAY_STALL` exists: a test kills the process in that window, as if
/// it died between its commit and its publish.
pub(crate) async fn relay_stall() {
    let Some(path) = std::env::var_os("A2A_FAILPOINT_RELAY_STALL") else {
        return;
    };
    while std::path::Path::new(&path).exists() {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}
