//! Test-only failpoints (cargo feature `failpoints`, which no binary build turns on). An e2e
//! test drives a real gateway process, so a failpoint is switched from outside: by a file.

/// Whether this replica's dispatch lease renewals are to fail (as under a partition from
/// PostgreSQL or pool exhaustion): the file named by `A2A_FAILPOINT_LEASE_STALL` exists.
pub(crate) fn lease_renewal_stalled() -> bool {
    std::env::var_os("A2A_FAILPOINT_LEASE_STALL")
        .is_some_and(|path| std::path::Path::new(&path).exists())
}
