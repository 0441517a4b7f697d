//! Reads: one statement each. History length is selected in SQL (positions at or after
//! `history_len - n`), artifacts only when asked for, and ListTasks's page and exact total come
//! back from the same statement.

use a2a_types::v1::{Artifact, Message, StreamResponse, Task, TaskState};
use sqlx::postgres::{PgPool, PgRow};
use sqlx::{AssertSqlSafe, Row};

use super::codec::decode;
use super::db_error;
use crate::{
    Cursor, DispatchMarks, ListQuery, StoreError, StoreResult, StoredEvent, TaskPage, TaskRecord,
    UpstreamRef,
};

/// `history_len - HISTORY_ALL` is below every position: no limit.
const HISTORY_ALL: i32 = i32::MAX;

fn history_limit(history_length: Option<usize>) -> i32 {
    history_length.map_or(HISTORY_ALL, |n| i32::try_from(n).unwrap_or(HISTORY_ALL))
}

fn internal(e: sqlx::Error) -> StoreError {
    StoreError::Internal(format!("unexpected row shape: {e}"))
}

/// Rebuilds a snapshot from its row: the stored core plus history and artifact rows in order.
fn task_of(row: &PgRow) -> StoreResult<Task> {
    let snapshot: Vec<u8> = row.try_get("snapshot").map_err(internal)?;
    let history: Vec<Vec<u8>> = row.try_get("history").map_err(internal)?;
    let artifacts: Vec<Vec<u8>> = row.try_get("artifacts").map_err(internal)?;
    let mut task: Task = decode(&snapshot, "task snapshot")?;
    task.history = history
        .iter()
        .map(|m| decode::<Message>(m, "history message"))
        .collect::<StoreResult<_>>()?;
    task.artifacts = artifacts
        .iter()
        .map(|a| decode::<Artifact>(a, "artifact"))
        .collect::<StoreResult<_>>()?;
    Ok(task)
}

fn upstream_of(row: &PgRow) -> StoreResult<Option<UpstreamRef>> {
    let task_id: Option<String> = row.try_get("upstream_task_id").map_err(internal)?;
    let context_id: Option<String> = row.try_get("upstream_context_id").map_err(internal)?;
    Ok(task_id.map(|task_id| UpstreamRef {
        task_id,
        context_id: context_id.unwrap_or_default(),
    }))
}

fn marks_of(row: &PgRow) -> StoreResult<DispatchMarks> {
    let sent_turn: Option<i32> = row.try_get("upstream_sent_turn").map_err(internal)?;
    Ok(DispatchMarks {
        priority: row.try_get("priority").map_err(internal)?,
        sent_turn: sent_turn.and_then(|t| u32::try_from(t).ok()),
        sent_at_ms: row.try_get("sent_at_ms").map_err(internal)?,
        epoch: seq_of(row, "epoch")?,
    })
}

fn seq_of(row: &PgRow, column: &str) -> StoreResult<u64> {
    let seq: i64 = row.try_get(column).map_err(internal)?;
    u64::try_from(seq).map_err(|_| StoreError::Internal(format!("negative sequence {seq}")))
}

/// A task with at most `history_length` recent messages; scoped to `owner` when given (the
/// append path reads without an owner: the runner already owns the task).
pub(super) async fn load(
    pool: &PgPool,
    task_id: &str,
    owner: Option<&str>,
    history_length: Option<usize>,
) -> StoreResult<Option<TaskRecord>> {
    const SQL: &str = "\
        SELECT t.owner, t.agent, t.seq, t.snapshot, t.upstream_task_id, t.upstream_context_id, \
               t.priority, t.upstream_sent_turn, t.epoch, t.upstream_key, \
               (extract(epoch FROM t.upstream_sent_at) * 1000)::bigint AS sent_at_ms, \
               ARRAY(SELECT h.message FROM task_history h \
                      WHERE h.task_id = t.id AND h.position >= t.history_len - $3 \
                      ORDER BY h.position) AS history, \
               ARRAY(SELECT a.artifact FROM task_artifacts a \
                      WHERE a.task_id = t.id ORDER BY a.position) AS artifacts \
          FROM tasks t \
         WHERE t.id = $1 AND ($2::text IS NULL OR t.owner = $2)";
    let row = sqlx::query(SQL)
        .bind(task_id)
        .bind(owner)
        .bind(history_limit(history_length))
        .fetch_optional(pool)
        .await
        .map_err(db_error)?;
    let Some(row) = row else {
        return Ok(None);
    };
    Ok(Some(TaskRecord {
        task: task_of(&row)?,
        owner: row.try_get("owner").map_err(internal)?,
        agent: row.try_get("agent").map_err(internal)?,
        seq: seq_of(&row, "seq")?,
        upstream: upstream_of(&row)?,
        dispatch: marks_of(&row)?,
        upstream_key: row.try_get("upstream_key").map_err(internal)?,
    }))
}

/// The sequence number, state and epoch of a task, whoever owns it.
pub(super) async fn seq_and_state(
    pool: &PgPool,
    task_id: &str,
) -> StoreResult<Option<(u64, TaskState, u64)>> {
    let row = sqlx::query("SELECT seq, state, epoch FROM tasks WHERE id = $1")
        .bind(task_id)
        .fetch_optional(pool)
        .await
        .map_err(db_error)?;
    let Some(row) = row else {
        return Ok(None);
    };
    let state: i16 = row.try_get("state").map_err(internal)?;
    let state = TaskState::try_from(i32::from(state)).unwrap_or(TaskState::Unspecified);
    Ok(Some((seq_of(&row, "seq")?, state, seq_of(&row, "epoch")?)))
}

/// One ListTasks page. The SQL text is assembled from fixed fragments per filter shape (values
/// are always bound), so each shape gets its own prepared statement and index plan instead of
/// one generic plan with `$n IS NULL OR ...` branches.
pub(super) async fn list(pool: &PgPool, owner: &str, q: &ListQuery) -> StoreResult<TaskPage> {
    let mut filters = String::from("t.owner = $1");
    let mut n = 1;
    let mut param = || {
        n += 1;
        n
    };
    if q.context_id.is_some() {
        filters.push_str(&format!(" AND t.context_id = ${}", param()));
    }
    if q.status.is_some() {
        filters.push_str(&format!(" AND t.state = ${}", param()));
    }
    if q.status_after.is_some() {
        filters.push_str(&format!(" AND t.status_ms >= ${}", param()));
    }
    let keyset = match q.cursor {
        Some(_) => {
            let (ms, id) = (param(), param());
            format!(" AND (t.status_ms, t.id) < (${ms}, ${id})")
        }
        None => String::new(),
    };
    let limit = param();
    let history = match q.history_length {
        Some(0) => "'{}'::bytea[]".to_owned(),
        _ => format!(
            "ARRAY(SELECT h.message FROM task_history h \
              WHERE h.task_id = p.id AND h.position >= p.history_len - ${} \
              ORDER BY h.position)",
            param()
        ),
    };
    let artifacts = if q.include_artifacts {
        "ARRAY(SELECT a.artifact FROM task_artifacts a WHERE a.task_id = p.id ORDER BY a.position)"
    } else {
        "'{}'::bytea[]"
    };
    let sql = format!(
        "WITH page AS ( \
           SELECT t.id, t.status_ms, t.history_len, t.snapshot FROM tasks t \
            WHERE {filters}{keyset} \
            ORDER BY t.status_ms DESC, t.id DESC LIMIT ${limit}) \
         SELECT (SELECT count(*) FROM tasks t WHERE {filters}) AS total, \
                p.id, p.status_ms, p.snapshot, {history} AS history, {artifacts} AS artifacts \
           FROM (SELECT 1) AS one LEFT JOIN page p ON true \
          ORDER BY p.status_ms DESC, p.id DESC"
    );
    let mut query = sqlx::query(AssertSqlSafe(sql)).bind(owner);
    if let Some(context_id) = &q.context_id {
        query = query.bind(context_id);
    }
    if let Some(status) = q.status {
        query = query.bind(status as i16);
    }
    if let Some(after) = q.status_after {
        query = query.bind(after.as_millis());
    }
    if let Some(cursor) = &q.cursor {
        query = query.bind(cursor.status_millis).bind(&cursor.task_id);
    }
    let page_size = i64::try_from(q.page_size).unwrap_or(i64::MAX - 1);
    query = query.bind(page_size + 1);
    if q.history_length != Some(0) {
        query = query.bind(history_limit(q.history_length));
    }
    let rows = query.fetch_all(pool).await.map_err(db_error)?;

    let total: i64 = match rows.first() {
        Some(row) => row.try_get("total").map_err(internal)?,
        None => 0,
    };
    let mut tasks = Vec::with_capacity(rows.len());
    let mut keys = Vec::with_capacity(rows.len());
    for row in &rows {
        let id: Option<String> = row.try_get("id").map_err(internal)?;
        let Some(id) = id else {
            continue; // the empty page's placeholder row
        };
        let ms: i64 = row.try_get("status_ms").map_err(internal)?;
        tasks.push(task_of(row)?);
        keys.push((ms, id));
    }
    let next = if tasks.len() > q.page_size {
        tasks.truncate(q.page_size);
        keys.truncate(q.page_size);
        keys.pop().map(|(status_millis, task_id)| Cursor {
            status_millis,
            task_id,
        })
    } else {
        None
    };
    Ok(TaskPage {
        tasks,
        next,
        total_size: u64::try_from(total).unwrap_or(0),
    })
}

/// The events of `owner`'s task after `after_seq`; NotFound when the task is not `owner`'s.
pub(super) async fn last_seqs(
    pool: &PgPool,
    task_ids: &[String],
) -> StoreResult<Vec<(String, u64)>> {
    // One index lookup per id, on the primary key.
    const SQL: &str = "SELECT id, seq FROM tasks WHERE id = ANY($1)";
    let rows: Vec<(String, i64)> = sqlx::query_as(SQL)
        .bind(task_ids)
        .fetch_all(pool)
        .await
        .map_err(db_error)?;
    Ok(rows
        .into_iter()
        .map(|(id, seq)| (id, u64::try_from(seq).unwrap_or_default()))
        .collect())
}

pub(super) async fn events_after(
    pool: &PgPool,
    owner: &str,
    task_id: &str,
    after_seq: i64,
) -> StoreResult<Vec<StoredEvent>> {
    // The LEFT JOIN keeps one row for an existing task without newer events.
    const SQL: &str = "\
        SELECT e.seq, e.payload FROM tasks t \
          LEFT JOIN task_events e ON e.task_id = t.id AND e.seq > $3 \
         WHERE t.id = $1 AND t.owner = $2 \
         ORDER BY e.seq";
    let rows = sqlx::query(SQL)
        .bind(task_id)
        .bind(owner)
        .bind(after_seq)
        .fetch_all(pool)
        .await
        .map_err(db_error)?;
    if rows.is_empty() {
        return Err(StoreError::NotFound(task_id.to_owned()));
    }
    let mut events = Vec::with_capacity(rows.len());
    for row in &rows {
        let seq: Option<i64> = row.try_get("seq").map_err(internal)?;
        let Some(seq) = seq else {
            continue;
        };
        let payload: Vec<u8> = row.try_get("payload").map_err(internal)?;
        events.push(StoredEvent {
            task_id: task_id.to_owned(),
            seq: u64::try_from(seq).unwrap_or(0),
            event: std::sync::Arc::new(decode::<StreamResponse>(&payload, "event")?),
            push: true,
        });
    }
    Ok(events)
}

/// What `owner` holds (see [`crate::TaskStore::usage`]): the sums of its `owner_bytes` rows,
/// which every create, append and purge keeps in step with its tasks (migrations 0011, 0016),
/// so the read costs a few rows however many tasks the owner has or has had.
pub(super) async fn usage(
    pool: &PgPool,
    owner: &str,
    count_up_to: u64,
) -> StoreResult<crate::OwnerUsage> {
    const SQL: &str = "\
        SELECT coalesce(sum(open), 0)::int8, coalesce(sum(bytes), 0)::int8 \
          FROM owner_bytes WHERE owner = $1";
    let (open, bytes): (i64, i64) = sqlx::query_as(SQL)
        .bind(owner)
        .fetch_one(pool)
        .await
        .map_err(db_error)?;
    let open = u64::try_from(open).unwrap_or(0);
    Ok(crate::OwnerUsage {
        open_tasks: if count_up_to == 0 {
            open
        } else {
            open.min(count_up_to)
        },
        bytes: u64::try_from(bytes).unwrap_or(0),
    })
}
