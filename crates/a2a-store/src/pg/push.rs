//! Push-notification configs. Every statement joins `tasks` on (id, owner), so a config (and its
//! credentials) is only ever read or changed through its own owner's task; one statement each,
//! but for a config past a quota (a transaction that counts first) and a task created with its
//! config (one transaction: the task's batch statement, then the config's).

use a2a_types::Dialect;
use a2a_types::v1::TaskPushNotificationConfig;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use sqlx::Row;
use sqlx::postgres::{PgConnection, PgPool};

use super::batch::{self, CreateJob};
use super::codec::{decode, encode};
use super::db_error;
use crate::{InlinePush, PushConfigPage, PushQuota, StoreError, StoreResult};

fn internal(e: sqlx::Error) -> StoreError {
    StoreError::Internal(format!("unexpected row shape: {e}"))
}

fn not_found(task_id: &str) -> StoreError {
    StoreError::NotFound(task_id.to_owned())
}

/// Creates or replaces (keeping its place in the creation order) a config of `owner`'s task.
/// With a quota, a new config is counted and inserted in one transaction that holds the owner's
/// advisory lock, so concurrent creations (on any replica) cannot pass the bound together.
pub(super) async fn put(
    pool: &PgPool,
    owner: &str,
    config: TaskPushNotificationConfig,
    dialect: Dialect,
    quota: PushQuota,
) -> StoreResult<TaskPushNotificationConfig> {
    if quota == PushQuota::NONE {
        return upsert(pool, owner, &config, dialect, None)
            .await
            .map(|()| config);
    }
    let mut tx = pool.begin().await.map_err(db_error)?;
    put_counted(&mut tx, owner, &config, dialect, quota, None).await?;
    tx.commit().await.map_err(db_error)?;
    Ok(config)
}

/// Creates a task (`job`, the statement of `batch.rs` for one create) and its inline push
/// config in one transaction, the config's quota checked inside it: either both are stored or
/// neither is (a refusal rolls the task back). The config's delivery progress starts before the
/// task's first event, so its webhook gets the task as created and every event after. False
/// when the task's id exists (nothing is written).
pub(super) async fn create_with(
    pool: &PgPool,
    job: &CreateJob,
    push: InlinePush,
) -> StoreResult<bool> {
    let mut tx = pool.begin().await.map_err(db_error)?;
    let done = batch::execute(&mut tx, &[job], &[], &[])
        .await
        .map_err(db_error)?;
    if !done.outcome.contains_key(&job.id) {
        return Ok(false); // the transaction rolls back as it drops
    }
    let config = TaskPushNotificationConfig {
        task_id: job.id.clone(),
        ..push.config
    };
    put_counted(
        &mut tx,
        &job.owner,
        &config,
        push.dialect,
        push.quota,
        Some(0),
    )
    .await?;
    tx.commit().await.map_err(db_error)?;
    Ok(true)
}

/// [`upsert`] inside the caller's transaction, a new config refused past `quota`: the owner's
/// advisory lock is held to the end of the transaction, so concurrent creations (on any
/// replica) cannot pass the bound together.
async fn put_counted(
    conn: &mut PgConnection,
    owner: &str,
    config: &TaskPushNotificationConfig,
    dialect: Dialect,
    quota: PushQuota,
    progress_from: Option<i64>,
) -> StoreResult<()> {
    if quota != PushQuota::NONE {
        check_quota(&mut *conn, owner, config, quota).await?;
    }
    upsert(&mut *conn, owner, config, dialect, progress_from).await
}

async fn check_quota(
    conn: &mut PgConnection,
    owner: &str,
    config: &TaskPushNotificationConfig,
    quota: PushQuota,
) -> StoreResult<()> {
    sqlx::query("SELECT pg_advisory_xact_lock(hashtextextended('a2a:push_configs:' || $1, 0))")
        .bind(owner)
        .execute(&mut *conn)
        .await
        .map_err(db_error)?;
    // The owner's count stops at the bound: it reads at most `per_owner` index entries.
    const COUNTS: &str = "\
        SELECT EXISTS (SELECT 1 FROM push_configs WHERE task_id = t.id AND id = $3) AS replacing, \
               (SELECT count(*) FROM push_configs WHERE task_id = t.id) AS on_task, \
               (SELECT count(*) FROM (SELECT 1 FROM push_configs WHERE owner = $2 LIMIT $4) o) \
                   AS of_owner \
          FROM tasks t WHERE t.id = $1 AND t.owner = $2";
    let row = sqlx::query(COUNTS)
        .bind(&config.task_id)
        .bind(owner)
        .bind(&config.id)
        .bind(i64::try_from(quota.per_owner).unwrap_or(i64::MAX))
        .fetch_optional(&mut *conn)
        .await
        .map_err(db_error)?
        .ok_or_else(|| not_found(&config.task_id))?;
    let replacing: bool = row.try_get("replacing").map_err(internal)?;
    let on_task: i64 = row.try_get("on_task").map_err(internal)?;
    let of_owner: i64 = row.try_get("of_owner").map_err(internal)?;
    let count = |n: i64| u64::try_from(n).unwrap_or(0);
    match quota.exceeded(count(on_task), count(of_owner)) {
        Some(e) if !replacing => Err(e),
        _ => Ok(()),
    }
}

/// Stores or replaces a config. The first config of a task also starts the push worker's
/// progress (`push_progress`, migration 0003) at `progress_from`, the sequence number delivery
/// goes on after; by default the event before the task's current one: the webhook gets the
/// task's state as it is now, then every later event. For a config registered with SendMessage
/// that is the Task itself (sequence number 1: `progress_from` 0).
/// It also marks the task as having push configs (`tasks.push`, migration 0017), taking the
/// task row's lock: an append committed after this sees the mark and publishes to the push
/// worker; one committed before took the lock first, so the sequence number read here is its.
async fn upsert<'c>(
    db: impl sqlx::PgExecutor<'c>,
    owner: &str,
    config: &TaskPushNotificationConfig,
    dialect: Dialect,
    progress_from: Option<i64>,
) -> StoreResult<()> {
    const SQL: &str = "\
        WITH t AS (UPDATE tasks SET push = true WHERE id = $1 AND owner = $2 RETURNING id, seq), \
        progress AS ( \
            INSERT INTO push_progress (task_id, delivered_seq, lease_until) \
            SELECT id, coalesce($6::int8, seq - 1), '-infinity' FROM t \
            ON CONFLICT (task_id) DO NOTHING) \
        INSERT INTO push_configs (task_id, id, config, owner, dialect) \
        SELECT t.id, $3, $4, $2, $5 FROM t \
        ON CONFLICT (task_id, id) DO UPDATE \
           SET config = excluded.config, dialect = excluded.dialect, updated_at = now() \
        RETURNING position";
    let stored = sqlx::query(SQL)
        .bind(&config.task_id)
        .bind(owner)
        .bind(&config.id)
        .bind(encode(config))
        .bind(dialect.as_str())
        .bind(progress_from)
        .fetch_optional(db)
        .await
        .map_err(db_error)?;
    match stored {
        Some(_) => Ok(()),
        None => Err(not_found(&config.task_id)),
    }
}

pub(super) async fn get(
    pool: &PgPool,
    owner: &str,
    task_id: &str,
    id: &str,
) -> StoreResult<Option<TaskPushNotificationConfig>> {
    const SQL: &str = "\
        SELECT p.config FROM tasks t \
          LEFT JOIN push_configs p ON p.task_id = t.id AND p.id = $3 \
         WHERE t.id = $1 AND t.owner = $2";
    let row = sqlx::query(SQL)
        .bind(task_id)
        .bind(owner)
        .bind(id)
        .fetch_optional(pool)
        .await
        .map_err(db_error)?
        .ok_or_else(|| not_found(task_id))?;
    let config: Option<Vec<u8>> = row.try_get("config").map_err(internal)?;
    config.map(|c| decode(&c, "push config")).transpose()
}

/// A page in creation order; the token is the position of the last config returned.
pub(super) async fn list(
    pool: &PgPool,
    owner: &str,
    task_id: &str,
    page_size: usize,
    page_token: &str,
) -> StoreResult<PushConfigPage> {
    const SQL: &str = "\
        SELECT p.position, p.config FROM tasks t \
          LEFT JOIN LATERAL ( \
              SELECT position, config FROM push_configs \
               WHERE task_id = t.id AND position > $3 \
               ORDER BY position LIMIT $4) p ON true \
         WHERE t.id = $1 AND t.owner = $2 \
         ORDER BY p.position";
    let after = decode_token(page_token)?;
    let limit = i64::try_from(page_size).unwrap_or(i64::MAX - 1) + 1;
    let rows = sqlx::query(SQL)
        .bind(task_id)
        .bind(owner)
        .bind(after)
        .bind(limit)
        .fetch_all(pool)
        .await
        .map_err(db_error)?;
    if rows.is_empty() {
        return Err(not_found(task_id));
    }
    let mut configs = Vec::with_capacity(rows.len());
    let mut positions = Vec::with_capacity(rows.len());
    for row in &rows {
        let position: Option<i64> = row.try_get("position").map_err(internal)?;
        let Some(position) = position else {
            continue; // the task exists but has no (more) configs
        };
        let config: Vec<u8> = row.try_get("config").map_err(internal)?;
        configs.push(decode(&config, "push config")?);
        positions.push(position);
    }
    let next_page_token = if configs.len() > page_size {
        configs.truncate(page_size);
        positions.truncate(page_size);
        positions
            .last()
            .map(|p| URL_SAFE_NO_PAD.encode(format!("p:{p}")))
            .unwrap_or_default()
    } else {
        String::new()
    };
    Ok(PushConfigPage {
        configs,
        next_page_token,
    })
}

/// Idempotent; NotFound only when the task is not `owner`'s.
pub(super) async fn delete(pool: &PgPool, owner: &str, task_id: &str, id: &str) -> StoreResult<()> {
    const SQL: &str = "\
        WITH task AS (SELECT id FROM tasks WHERE id = $1 AND owner = $2), \
             gone AS (DELETE FROM push_configs p USING task \
                       WHERE p.task_id = task.id AND p.id = $3) \
        SELECT count(*) AS n FROM task";
    let row = sqlx::query(SQL)
        .bind(task_id)
        .bind(owner)
        .bind(id)
        .fetch_one(pool)
        .await
        .map_err(db_error)?;
    let n: i64 = row.try_get("n").map_err(internal)?;
    if n == 0 {
        return Err(not_found(task_id));
    }
    Ok(())
}

fn decode_token(token: &str) -> StoreResult<i64> {
    if token.is_empty() {
        return Ok(0);
    }
    let raw = URL_SAFE_NO_PAD
        .decode(token)
        .map_err(|_| StoreError::InvalidPageToken)?;
    std::str::from_utf8(&raw)
        .ok()
        .and_then(|s| s.strip_prefix("p:"))
        .and_then(|n| n.parse().ok())
        .ok_or(StoreError::InvalidPageToken)
}
