//! The `api_keys` table: hashed API keys, created, listed and revoked by the `a2a-gateway keys`
//! command and looked up by the authenticator. Keys never reach this module, only their SHA-256.

use chrono::{DateTime, Utc};
use sqlx::postgres::PgPool;

use crate::{StoreError, StoreResult};

/// One stored key, without its hash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiKeyRecord {
    pub id: String,
    pub created_at: DateTime<Utc>,
    pub revoked_at: Option<DateTime<Utc>>,
}

#[derive(Clone)]
pub struct PgApiKeys {
    pool: PgPool,
}

fn internal(e: sqlx::Error) -> StoreError {
    StoreError::Internal(format!("api_keys: {e}"))
}

impl PgApiKeys {
    pub fn new(pool: PgPool) -> Self {
        Self { pool }
    }

    /// Stores a key's hash under `id`; an id already in use (even revoked) is a conflict.
    pub async fn create(&self, id: &str, sha256: &[u8; 32]) -> StoreResult<()> {
        let done = sqlx::query(
            "INSERT INTO api_keys (id, key_sha256) VALUES ($1, $2) ON CONFLICT DO NOTHING",
        )
        .bind(id)
        .bind(&sha256[..])
        .execute(&self.pool)
        .await
        .map_err(internal)?;
        if done.rows_affected() == 0 {
            return Err(StoreError::Internal(format!(
                "api key id {id} already exists"
            )));
        }
        Ok(())
    }

    pub async fn list(&self) -> StoreResult<Vec<ApiKeyRecord>> {
        // Unix milliseconds: sqlx is built without its chrono feature.
        let rows: Vec<(String, i64, Option<i64>)> = sqlx::query_as(
            "SELECT id, (extract(epoch FROM created_at) * 1000)::bigint, \
                    (extract(epoch FROM revoked_at) * 1000)::bigint \
             FROM api_keys ORDER BY id",
        )
        .fetch_all(&self.pool)
        .await
        .map_err(internal)?;
        let at = |ms: i64| DateTime::from_timestamp_millis(ms).unwrap_or_default();
        Ok(rows
            .into_iter()
            .map(|(id, created, revoked)| ApiKeyRecord {
                id,
                created_at: at(created),
                revoked_at: revoked.map(at),
            })
            .collect())
    }

    /// Revokes `id`; false if there is no such live key.
    pub async fn revoke(&self, id: &str) -> StoreResult<bool> {
        let done = sqlx::query(
            "UPDATE api_keys SET revoked_at = now() WHERE id = $1 AND revoked_at IS NULL",
        )
        .bind(id)
        .execute(&self.pool)
        .await
        .map_err(internal)?;
        Ok(done.rows_affected() == 1)
    }

    /// The id of the live key with this hash.
    pub async fn lookup(&self, sha256: &[u8; 32]) -> StoreResult<Option<String>> {
        let row: Option<(String,)> =
            sqlx::query_as("SELECT id FROM api_keys WHERE key_sha256 = $1 AND revoked_at IS NULL")
                .bind(&sha256[..])
                .fetch_optional(&self.pool)
                .await
                .map_err(internal)?;
        Ok(row.map(|(id,)| id))
    }
}
