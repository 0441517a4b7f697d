//! Readiness on PostgreSQL, apart from the request pool: one dedicated connection (a pool of
//! one, opened on first use) and a bound on every check, so a saturated request pool never
//! makes a replica unready (its load would move to peers just as loaded); and the schema gate: a
//! process is ready only once `_sqlx_migrations` holds exactly the migrations embedded in it
//! (no missing, failed, changed or unknown version). The gate is checked until it passes once:
//! afterwards a newer release migrating ahead (expand-only migrations, during a rolling
//! upgrade) does not make the running replicas unready.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use sqlx::Row;
use sqlx::postgres::{PgPool, PgPoolOptions};

use super::{MIGRATOR, db_error};
use crate::{StoreError, StoreResult};

/// The bound of one check (connecting included): below the probes' 2 s timeout.
pub const CHECK_TIMEOUT: Duration = Duration::from_secs(1);

/// The start of the error a schema mismatch gives (for callers that report it apart).
pub const SCHEMA_MISMATCH: &str = "the database schema does not match this binary's migrations";

/// Rows of `_sqlx_migrations` read at most (there are tens; the bound keeps the read linear).
const MAX_ROWS: i64 = 10_000;

/// The dedicated readiness connection of one process.
pub struct Health {
    pool: PgPool,
    schema_ok: AtomicBool,
}

impl Health {
    /// A check on its own connection to the database `pool` connects to (no I/O here).
    pub fn of(pool: &PgPool) -> Self {
        let options = (*pool.connect_options()).clone();
        let pool = PgPoolOptions::new()
            .max_connections(1)
            .min_connections(0)
            .acquire_timeout(CHECK_TIMEOUT)
            .test_before_acquire(false)
            .connect_lazy_with(options);
        Self {
            pool,
            schema_ok: AtomicBool::new(false),
        }
    }

    /// Whether the schema has matched (once).
    pub fn schema_ok(&self) -> bool {
        self.schema_ok.load(Ordering::Relaxed)
    }

    /// Ready: the database answers within [`CHECK_TIMEOUT`] on the dedicated connection, and
    /// its schema matched this binary's migrations (checked here until it does once). A
    /// mismatch is `Unavailable` with a message starting with [`SCHEMA_MISMATCH`].
    pub async fn check(&self) -> StoreResult<()> {
        match tokio::time::timeout(CHECK_TIMEOUT, self.check_unbounded()).await {
            Ok(result) => result,
            Err(_) => Err(StoreError::Unavailable(format!(
                "PostgreSQL did not answer the health check within {} ms",
                CHECK_TIMEOUT.as_millis()
            ))),
        }
    }

    async fn check_unbounded(&self) -> StoreResult<()> {
        if self.schema_ok() {
            return sqlx::query("SELECT 1")
                .execute(&self.pool)
                .await
                .map(|_| ())
                .map_err(db_error);
        }
        match schema_mismatch(&self.pool).await? {
            None => {
                self.schema_ok.store(true, Ordering::Relaxed);
                Ok(())
            }
            Some(why) => Err(StoreError::Unavailable(format!("{SCHEMA_MISMATCH}: {why}"))),
        }
    }
}

/// `None` when `_sqlx_migrations` holds exactly the embedded migrations, each applied
/// successfully with the same checksum; else what differs, and what to do.
pub async fn schema_mismatch(pool: &PgPool) -> StoreResult<Option<String>> {
    let rows = match sqlx::query(
        "SELECT version, success, checksum FROM _sqlx_migrations ORDER BY version LIMIT $1",
    )
    .bind(MAX_ROWS)
    .fetch_all(pool)
    .await
    {
        Ok(rows) => rows,
        // 42P01 undefined_table: nothing was ever migrated.
        Err(sqlx::Error::Database(e)) if e.code().as_deref() == Some("42P01") => {
            return Ok(Some(
                "no migration was applied (no _sqlx_migrations table); run `a2a-gateway \
                 migrate` (the chart's migration Job)"
                    .into(),
            ));
        }
        Err(e) => return Err(db_error(e)),
    };
    let mut applied = BTreeMap::new();
    for row in rows {
        let version: i64 = row.try_get("version").map_err(db_error)?;
        let success: bool = row.try_get("success").map_err(db_error)?;
        let checksum: Vec<u8> = row.try_get("checksum").map_err(db_error)?;
        applied.insert(version, (success, checksum));
    }
    Ok(compare(&applied))
}

fn compare(applied: &BTreeMap<i64, (bool, Vec<u8>)>) -> Option<String> {
    let embedded: BTreeMap<i64, &[u8]> = MIGRATOR
        .iter()
        .filter(|m| !m.migration_type.is_down_migration())
        .map(|m| (m.version, m.checksum.as_ref()))
        .collect();
    if let Some(v) = applied.iter().find_map(|(v, (ok, _))| (!ok).then_some(v)) {
        return Some(format!(
            "migration {v} failed part-way (success = false); repair the database, then run \
             `a2a-gateway migrate`"
        ));
    }
    let unknown: Vec<i64> = applied
        .keys()
        .filter(|v| !embedded.contains_key(v))
        .copied()
        .collect();
    if !unknown.is_empty() {
        return Some(format!(
            "the database has migrations this binary does not know ({unknown:?}): a newer \
             release migrated it; run that release (roll forward), or restore a backup taken \
             before its migration"
        ));
    }
    let changed: Vec<i64> = embedded
        .iter()
        .filter(|(v, sum)| applied.get(v).is_some_and(|(_, s)| s.as_slice() != **sum))
        .map(|(v, _)| *v)
        .collect();
    if !changed.is_empty() {
        return Some(format!(
            "migrations {changed:?} were applied with other contents than this binary's"
        ));
    }
    let missing: Vec<i64> = embedded
        .keys()
        .filter(|v| !applied.contains_key(v))
        .copied()
        .collect();
    if !missing.is_empty() {
        return Some(format!(
            "migrations {missing:?} are not applied yet; run `a2a-gateway migrate` (the chart's \
             migration Job, docker-compose's `migrate` service)"
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all() -> BTreeMap<i64, (bool, Vec<u8>)> {
        MIGRATOR
            .iter()
            .map(|m| (m.version, (true, m.checksum.to_vec())))
            .collect()
    }

    #[test]
    fn the_embedded_migrations_match_themselves_only() {
        assert_eq!(compare(&all()), None);
        let mut behind = all();
        let last = *behind.keys().last().unwrap();
        behind.remove(&last);
        assert!(compare(&behind).unwrap().contains("not applied yet"));
        let mut ahead = all();
        ahead.insert(last + 1, (true, vec![1]));
        assert!(compare(&ahead).unwrap().contains("does not know"));
        let mut changed = all();
        changed.insert(last, (true, vec![0]));
        assert!(compare(&changed).unwrap().contains("other contents"));
        let mut failed = all();
        failed.insert(last, (false, vec![]));
        assert!(compare(&failed).unwrap().contains("failed part-way"));
    }
}
