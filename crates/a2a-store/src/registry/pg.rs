//! The registry in PostgreSQL (migration `0014_admin_agents.sql`): `admin_agents`, the
//! one-row counter `admin_agents_version` and `admin_audit`, shared by every replica.

use std::str::FromStr;
use std::time::Duration;

use async_trait::async_trait;
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};

use super::{AgentRegistryStore, AuditRecord, RegisteredAgent, RegistryChange};
use crate::pg::db_error;
use crate::{StoreError, StoreResult};

/// The registry over its own small pool: a once-a-second version read and a rare change need
/// no more, and a request pool exhausted by load cannot starve the replicas' sync.
#[derive(Clone)]
pub struct PgAgentRegistry {
    pool: PgPool,
}

impl PgAgentRegistry {
    pub fn new(pool: PgPool) -> Self {
        Self { pool }
    }

    /// A registry whose two connections open on first use (no I/O here). An unparsable URL
    /// is an error.
    pub fn connect_lazy(url: &str) -> StoreResult<Self> {
        let connect = PgConnectOptions::from_str(url)
            .map_err(|e| StoreError::Internal(format!("invalid PostgreSQL URL: {e}")))?
            .application_name("a2a-gateway");
        let pool = PgPoolOptions::new()
            .max_connections(2)
            .acquire_timeout(Duration::from_secs(3))
            .test_before_acquire(true)
            .connect_lazy_with(connect);
        Ok(Self { pool })
    }
}

#[async_trait]
impl AgentRegistryStore for PgAgentRegistry {
    async fn version(&self) -> StoreResult<i64> {
        sqlx::query_scalar("SELECT version FROM admin_agents_version WHERE id = 1")
            .fetch_one(&self.pool)
            .await
            .map_err(db_error)
    }

    async fn list(&self, limit: usize) -> StoreResult<Vec<RegisteredAgent>> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows: Vec<(String, String, String)> =
            sqlx::query_as("SELECT name, entry, etag FROM admin_agents ORDER BY name LIMIT $1")
                .bind(limit)
                .fetch_all(&self.pool)
                .await
                .map_err(db_error)?;
        Ok(rows
            .into_iter()
            .map(|(name, entry, etag)| RegisteredAgent { name, entry, etag })
            .collect())
    }

    async fn change(&self, change: RegistryChange<'_>, who: &str) -> StoreResult<bool> {
        let mut tx = self.pool.begin().await.map_err(db_error)?;
        let done = match change {
            RegistryChange::Create { name, entry, etag } => {
                sqlx::query(
                    "INSERT INTO admin_agents (name, entry, etag) VALUES ($1, $2, $3) \
                 ON CONFLICT (name) DO NOTHING",
                )
                .bind(name)
                .bind(entry)
                .bind(etag)
                .execute(&mut *tx)
                .await
            }
            RegistryChange::Replace {
                name,
                entry,
                etag,
                expect,
            } => {
                sqlx::query(
                    "UPDATE admin_agents SET entry = $2, etag = $3, updated_at = now() \
                 WHERE name = $1 AND etag = $4",
                )
                .bind(name)
                .bind(entry)
                .bind(etag)
                .bind(expect)
                .execute(&mut *tx)
                .await
            }
            RegistryChange::Delete { name, expect } => {
                sqlx::query("DELETE FROM admin_agents WHERE name = $1 AND etag = $2")
                    .bind(name)
                    .bind(expect)
                    .execute(&mut *tx)
                    .await
            }
        }
        .map_err(db_error)?
        .rows_affected()
            == 1;
        if !done {
            tx.rollback().await.map_err(db_error)?;
            return Ok(false);
        }
        sqlx::query("UPDATE admin_agents_version SET version = version + 1 WHERE id = 1")
            .execute(&mut *tx)
            .await
            .map_err(db_error)?;
        sqlx::query("INSERT INTO admin_audit (who, action, agent, etag) VALUES ($1, $2, $3, $4)")
            .bind(who)
            .bind(change.action())
            .bind(change.name())
            .bind(change.etag())
            .execute(&mut *tx)
            .await
            .map_err(db_error)?;
        tx.commit().await.map_err(db_error)?;
        Ok(true)
    }

    async fn audit(&self, limit: usize) -> StoreResult<Vec<AuditRecord>> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        // Unix milliseconds: sqlx is built without its chrono feature.
        let rows: Vec<(i64, String, String, String, Option<String>)> = sqlx::query_as(
            "SELECT (extract(epoch FROM at) * 1000)::bigint, who, action, agent, etag \
             FROM admin_audit ORDER BY id DESC LIMIT $1",
        )
        .bind(limit)
        .fetch_all(&self.pool)
        .await
        .map_err(db_error)?;
        Ok(rows
            .into_iter()
            .map(|(at_ms, who, action, agent, etag)| AuditRecord {
                at_ms,
                who,
                action,
                agent,
                etag,
            })
            .collect())
    }
}
