//! The one statement that commits a batch of new tasks and appended events.
//!
//! Per part, a CTE turns the batch's arrays into rows (`unnest`); the task rows are inserted
//! (`ON CONFLICT DO NOTHING`: a duplicate id changes nothing) or updated under the sequence guard,
//! and every other row (event, history, artifacts) is written by joining on what that insert or
//! update `RETURNING`ed, so a refused job writes nothing. The statement is its own transaction,
//! and it also writes each job's outbox row (`event_outbox`, migration 0015: the events still to
//! be published), so nothing committed can go unannounced (see `outbox.rs`); a create without
//! push configs has nothing to announce, and no row ([`crate::outboxed`]).
//! Only the parts a batch needs are included, so the common shapes are short; each shape is
//! prepared once per connection.

use std::collections::HashMap;

use sqlx::postgres::{PgArguments, PgConnection, Postgres};
use sqlx::query::Query;
use sqlx::{AssertSqlSafe, Row};

use super::codec::{Plan, TaskRow};

pub(super) struct CreateJob {
    pub id: String,
    pub owner: String,
    pub agent: String,
    pub context_id: String,
    /// `NewTask::upstream_key`.
    pub upstream_key: Option<String>,
    /// The row after every event.
    pub row: TaskRow,
    /// Events 1..=n: the task as created, then the changes stored with it.
    pub events: Vec<Vec<u8>>,
    pub plan: Plan,
    /// Whether the task is created with push configs: only then does its creating commit get
    /// an outbox row (see [`crate::outboxed`]).
    pub push: bool,
}

pub(super) struct AppendJob {
    pub task_id: String,
    pub expected: i64,
    /// The fencing token the append is guarded by (`None`: not a turn's write).
    pub epoch: Option<i64>,
    pub row: TaskRow,
    /// How the task's bytes change (`row.bytes` less those of the snapshot at `expected`).
    pub delta: i64,
    /// Events expected + 1..=expected + n.
    pub events: Vec<Vec<u8>>,
    pub plan: Plan,
}

impl CreateJob {
    fn seq(&self) -> i64 {
        self.events.len() as i64
    }
}

impl AppendJob {
    fn seq(&self) -> i64 {
        self.expected + self.events.len() as i64
    }
}

/// Task id → 0 for a task created, or the new sequence number of an applied append and whether
/// its task has push configs (`tasks.push`, migration 0017; false for a create: a create with a
/// config says so itself). Jobs that are missing were refused (duplicate id, or the sequence
/// guard).
pub(super) type Outcome = HashMap<String, (i64, bool)>;

/// What a statement did: its jobs' [`Outcome`], and the outbox rows `(task id, seq)` it deleted
/// of those it was handed as published.
#[derive(Default)]
pub(super) struct Done {
    pub outcome: Outcome,
    pub forgotten: Vec<(String, i64)>,
}

/// Commits `creates` and `appends` (all for distinct tasks) in one statement, which also
/// deletes the outbox rows of `published` commits (task id, last sequence number): their
/// events were acknowledged by the bus, so the delete rides on a commit that happens anyway
/// instead of costing a transaction of its own (see `write::Writer::forget`).
pub(super) async fn execute(
    conn: &mut PgConnection,
    creates: &[&CreateJob],
    appends: &[&AppendJob],
    published: &[(&str, i64)],
) -> Result<Done, sqlx::Error> {
    let c = CreateParts::of(creates);
    let a = AppendParts::of(appends);
    let mut n = 0;
    let mut ctes = Vec::new();
    let mut results = Vec::new();
    if !creates.is_empty() {
        c.sql(&mut n, &mut ctes);
        results.push("SELECT id, 0::int8 AS seq, false AS push, false AS gone FROM c_created");
    }
    if !appends.is_empty() {
        a.sql(&mut n, &mut ctes);
        results.push("SELECT id, seq, push, false AS gone FROM a_updated");
    }
    if !published.is_empty() {
        // Rows a relay pass holds (`FOR UPDATE` in `outbox::relay`) are skipped, not waited
        // for: the write never waits on a bus publish, and the relay deletes them itself.
        // Rows are never updated, so a concurrent delete is all a lock can run into.
        let [ids, seqs] = params(&mut n);
        ctes.push(format!(
            "o_claimed AS (SELECT o.task_id, o.seq FROM event_outbox o \
               JOIN unnest(${ids}::text[], ${seqs}::int8[]) AS d(task_id, seq) \
                 ON o.task_id = d.task_id AND o.seq = d.seq \
             FOR UPDATE OF o SKIP LOCKED), \
             o_done AS (DELETE FROM event_outbox o USING o_claimed d \
             WHERE o.task_id = d.task_id AND o.seq = d.seq RETURNING o.task_id, o.seq)"
        ));
        results.push("SELECT task_id AS id, seq, false AS push, true AS gone FROM o_done");
    }
    // How the owners' stored bytes and open tasks changed, in this connection's own slot (see
    // migrations 0011 and 0016): a create of a task that is not terminal opens one, an append
    // that makes its task terminal closes one (appends to terminal tasks are refused below).
    let mut changed = Vec::new();
    if !creates.is_empty() {
        changed.push(
            "SELECT i.owner, i.bytes AS d, (i.state NOT IN (3, 4, 5, 7))::int AS o \
             FROM c_input i JOIN c_created c ON c.id = i.id",
        );
    }
    if !appends.is_empty() {
        changed.push(
            "SELECT u.owner, i.delta AS d, -(i.state IN (3, 4, 5, 7))::int AS o \
             FROM a_updated u JOIN a_input i ON i.task_id = u.id",
        );
    }
    ctes.push(format!(
        "usage AS (INSERT INTO owner_bytes (owner, slot, bytes, open) \
         SELECT owner, pg_backend_pid(), sum(d)::int8, sum(o)::int8 FROM ({}) x \
          GROUP BY owner HAVING sum(d) <> 0 OR sum(o) <> 0 \
         ON CONFLICT (owner, slot) DO UPDATE SET bytes = owner_bytes.bytes + excluded.bytes, \
           open = owner_bytes.open + excluded.open)",
        changed.join(" UNION ALL ")
    ));
    let sql = format!("WITH {} {}", ctes.join(", "), results.join(" UNION ALL "));
    let mut query = sqlx::query(AssertSqlSafe(sql));
    if !creates.is_empty() {
        query = c.bind(query, creates);
    }
    if !appends.is_empty() {
        query = a.bind(query, appends);
    }
    if !published.is_empty() {
        query = query
            .bind(published.iter().map(|(t, _)| *t).collect::<Vec<_>>())
            .bind(published.iter().map(|(_, s)| *s).collect::<Vec<_>>());
    }
    let rows = query.fetch_all(conn).await?;
    let mut done = Done::default();
    for r in &rows {
        let (id, seq): (String, i64) = (r.try_get("id")?, r.try_get("seq")?);
        if r.try_get("gone")? {
            done.forgotten.push((id, seq));
        } else {
            done.outcome.insert(id, (seq, r.try_get("push")?));
        }
    }
    Ok(done)
}

/// `$n` placeholders in order.
fn params<const K: usize>(n: &mut usize) -> [usize; K] {
    std::array::from_fn(|_| {
        *n += 1;
        *n
    })
}

type Q<'a> = Query<'a, Postgres, PgArguments>;

/// Which optional row kinds a batch of creates writes.
struct CreateParts {
    history: bool,
    artifacts: bool,
}

impl CreateParts {
    fn of(jobs: &[&CreateJob]) -> Self {
        Self {
            history: jobs.iter().any(|j| !j.plan.history.is_empty()),
            artifacts: jobs.iter().any(|j| !j.plan.artifacts.is_empty()),
        }
    }

    fn sql(&self, n: &mut usize, ctes: &mut Vec<String>) {
        let [
            id,
            owner,
            agent,
            ctx,
            seq,
            state,
            ms,
            snap,
            hlen,
            alen,
            bytes,
        ] = params(n);
        let [ukey, push] = params(n);
        let [e_id, e_seq, e_payload] = params(n);
        ctes.push(format!(
            "c_input AS (SELECT * FROM unnest(${id}::text[], ${owner}::text[], ${agent}::text[], \
               ${ctx}::text[], ${seq}::int8[], ${state}::int2[], ${ms}::int8[], \
               ${snap}::bytea[], ${hlen}::int4[], ${alen}::int4[], ${bytes}::int8[], \
               ${ukey}::text[], ${push}::bool[]) \
             AS i(id, owner, agent, context_id, seq, state, status_ms, snapshot, history_len, \
                  artifacts_len, bytes, upstream_key, push)), \
             c_created AS (INSERT INTO tasks (id, owner, agent, context_id, state, status_ms, \
               seq, history_len, artifacts_len, snapshot, bytes, upstream_key) \
             SELECT id, owner, agent, context_id, state, status_ms, seq, history_len, \
               artifacts_len, snapshot, bytes, upstream_key FROM c_input \
             ON CONFLICT (id) DO NOTHING RETURNING id), \
             c_events AS (INSERT INTO task_events (task_id, seq, payload) \
             SELECT e.task_id, e.seq, e.payload \
               FROM unnest(${e_id}::text[], ${e_seq}::int8[], ${e_payload}::bytea[]) \
                    AS e(task_id, seq, payload) \
               JOIN c_created c ON c.id = e.task_id), \
             c_outbox AS (INSERT INTO event_outbox (task_id, seq, first_seq) \
             SELECT i.id, i.seq, 1 FROM c_input i JOIN c_created c ON c.id = i.id \
             WHERE i.push \
             ON CONFLICT DO NOTHING)"
        ));
        if self.history {
            let [ids, pos, msg] = params(n);
            ctes.push(format!(
                "c_history AS (INSERT INTO task_history (task_id, position, message) \
                 SELECT h.task_id, h.position, h.message \
                   FROM unnest(${ids}::text[], ${pos}::int4[], ${msg}::bytea[]) \
                        AS h(task_id, position, message) \
                   JOIN c_created c ON c.id = h.task_id)"
            ));
        }
        if self.artifacts {
            let [ids, pos, aid, bytes] = params(n);
            ctes.push(format!(
                "c_artifacts AS (INSERT INTO task_artifacts (task_id, position, artifact_id, \
                   artifact) \
                 SELECT a.task_id, a.position, a.artifact_id, a.artifact \
                   FROM unnest(${ids}::text[], ${pos}::int4[], ${aid}::text[], ${bytes}::bytea[]) \
                        AS a(task_id, position, artifact_id, artifact) \
                   JOIN c_created c ON c.id = a.task_id)"
            ));
        }
    }

    fn bind<'a>(&self, q: Q<'a>, jobs: &[&'a CreateJob]) -> Q<'a> {
        let mut q = q
            .bind(jobs.iter().map(|j| j.id.as_str()).collect::<Vec<_>>())
            .bind(jobs.iter().map(|j| j.owner.as_str()).collect::<Vec<_>>())
            .bind(jobs.iter().map(|j| j.agent.as_str()).collect::<Vec<_>>())
            .bind(
                jobs.iter()
                    .map(|j| j.context_id.as_str())
                    .collect::<Vec<_>>(),
            )
            .bind(jobs.iter().map(|j| j.seq()).collect::<Vec<_>>());
        q = bind_rows(q, jobs.iter().map(|j| &j.row));
        q = q
            .bind(
                jobs.iter()
                    .map(|j| j.upstream_key.as_deref())
                    .collect::<Vec<_>>(),
            )
            .bind(jobs.iter().map(|j| j.push).collect::<Vec<_>>());
        q = bind_events(q, jobs.iter().map(|j| (j.id.as_str(), 1, &j.events)));
        if self.history {
            q = bind3(q, jobs.iter().map(|j| (j.id.as_str(), &j.plan.history)));
        }
        if self.artifacts {
            q = bind_artifacts(q, jobs.iter().map(|j| (j.id.as_str(), &j.plan.artifacts)));
        }
        q
    }
}

/// Which optional row changes a batch of appends makes.
struct AppendParts {
    history: bool,
    history_cut: bool,
    artifacts: bool,
    chunks: bool,
    artifacts_cut: bool,
}

impl AppendParts {
    fn of(jobs: &[&AppendJob]) -> Self {
        let any = |f: fn(&Plan) -> bool| jobs.iter().any(|j| f(&j.plan));
        Self {
            history: any(|p| !p.history.is_empty()),
            history_cut: any(|p| p.history_cut),
            artifacts: any(|p| !p.artifacts.is_empty()),
            chunks: any(|p| !p.chunks.is_empty()),
            artifacts_cut: any(|p| p.artifacts_cut),
        }
    }

    fn sql(&self, n: &mut usize, ctes: &mut Vec<String>) {
        let [id, expected, seq, state, ms, snap, hlen, alen, bytes] = params(n);
        let [delta, epoch] = params(n);
        let [e_id, e_seq, e_payload] = params(n);
        // Terminal states (COMPLETED 3, FAILED 4, CANCELED 5, REJECTED 7) are refused here
        // too, so immutability does not rest on the caller's snapshot alone.
        // The replica whose connection appends becomes the task's dispatcher (its session
        // setting `a2a.replica`, migration 0004): whoever runs the turn writes its events.
        // A turn's append also carries the epoch it started under (migration 0013): once a
        // takeover moved it, the stale runner's append changes nothing.
        ctes.push(format!(
            "a_input AS (SELECT * FROM unnest(${id}::text[], ${expected}::int8[], \
               ${seq}::int8[], ${state}::int2[], ${ms}::int8[], ${snap}::bytea[], \
               ${hlen}::int4[], ${alen}::int4[], ${bytes}::int8[], ${delta}::int8[], \
               ${epoch}::int8[]) \
             AS i(task_id, expected, seq, state, status_ms, snapshot, history_len, \
                  artifacts_len, bytes, delta, epoch)), \
             a_updated AS (UPDATE tasks t SET seq = i.seq, state = i.state, \
               status_ms = i.status_ms, snapshot = i.snapshot, history_len = i.history_len, \
               artifacts_len = i.artifacts_len, bytes = i.bytes, updated_at = now(), \
               dispatcher = coalesce(nullif(current_setting('a2a.replica', true), ''), \
                 t.dispatcher) \
             FROM a_input i \
             WHERE t.id = i.task_id AND t.seq = i.expected AND t.state NOT IN (3, 4, 5, 7) \
               AND (i.epoch IS NULL OR t.epoch = i.epoch) \
             RETURNING t.id, t.seq, t.history_len, t.artifacts_len, t.owner, t.push), \
             a_events AS (INSERT INTO task_events (task_id, seq, payload) \
             SELECT e.task_id, e.seq, e.payload \
               FROM unnest(${e_id}::text[], ${e_seq}::int8[], ${e_payload}::bytea[]) \
                    AS e(task_id, seq, payload) \
               JOIN a_updated u ON u.id = e.task_id), \
             a_outbox AS (INSERT INTO event_outbox (task_id, seq, first_seq) \
             SELECT u.id, u.seq, i.expected + 1 FROM a_updated u \
               JOIN a_input i ON i.task_id = u.id \
             ON CONFLICT DO NOTHING)"
        ));
        if self.history {
            let [ids, pos, msg] = params(n);
            ctes.push(format!(
                "a_history AS (INSERT INTO task_history (task_id, position, message) \
                 SELECT h.task_id, h.position, h.message \
                   FROM unnest(${ids}::text[], ${pos}::int4[], ${msg}::bytea[]) \
                        AS h(task_id, position, message) \
                   JOIN a_updated u ON u.id = h.task_id \
                 ON CONFLICT (task_id, position) DO UPDATE SET message = excluded.message)"
            ));
        }
        // Rows past the new lengths exist only for a task that shrank (a Task event replacing
        // the snapshot); rows inserted by this statement are not visible to these deletes.
        if self.history_cut {
            ctes.push(
                "a_history_cut AS (DELETE FROM task_history h USING a_updated u \
                 WHERE h.task_id = u.id AND h.position >= u.history_len)"
                    .into(),
            );
        }
        if self.artifacts {
            let [ids, pos, aid, bytes] = params(n);
            ctes.push(format!(
                "a_artifacts AS (INSERT INTO task_artifacts (task_id, position, artifact_id, \
                   artifact) \
                 SELECT a.task_id, a.position, a.artifact_id, a.artifact \
                   FROM unnest(${ids}::text[], ${pos}::int4[], ${aid}::text[], ${bytes}::bytea[]) \
                        AS a(task_id, position, artifact_id, artifact) \
                   JOIN a_updated u ON u.id = a.task_id \
                 ON CONFLICT (task_id, position) \
                 DO UPDATE SET artifact_id = excluded.artifact_id, artifact = excluded.artifact)"
            ));
        }
        if self.chunks {
            let [ids, pos, delta] = params(n);
            ctes.push(format!(
                "a_chunks AS (UPDATE task_artifacts ta SET artifact = ta.artifact || c.delta \
                 FROM unnest(${ids}::text[], ${pos}::int4[], ${delta}::bytea[]) \
                      AS c(task_id, position, delta) \
                 JOIN a_updated u ON u.id = c.task_id \
                 WHERE ta.task_id = c.task_id AND ta.position = c.position)"
            ));
        }
        if self.artifacts_cut {
            ctes.push(
                "a_artifacts_cut AS (DELETE FROM task_artifacts a USING a_updated u \
                 WHERE a.task_id = u.id AND a.position >= u.artifacts_len)"
                    .into(),
            );
        }
    }

    fn bind<'a>(&self, q: Q<'a>, jobs: &[&'a AppendJob]) -> Q<'a> {
        let mut q = q
            .bind(jobs.iter().map(|j| j.task_id.as_str()).collect::<Vec<_>>())
            .bind(jobs.iter().map(|j| j.expected).collect::<Vec<_>>())
            .bind(jobs.iter().map(|j| j.seq()).collect::<Vec<_>>());
        q = bind_rows(q, jobs.iter().map(|j| &j.row));
        q = q
            .bind(jobs.iter().map(|j| j.delta).collect::<Vec<_>>())
            .bind(jobs.iter().map(|j| j.epoch).collect::<Vec<_>>());
        q = bind_events(
            q,
            jobs.iter()
                .map(|j| (j.task_id.as_str(), j.expected + 1, &j.events)),
        );
        let id = |j: &&'a AppendJob| j.task_id.as_str();
        if self.history {
            q = bind3(q, jobs.iter().map(|j| (id(j), &j.plan.history)));
        }
        if self.artifacts {
            q = bind_artifacts(q, jobs.iter().map(|j| (id(j), &j.plan.artifacts)));
        }
        if self.chunks {
            q = bind3(q, jobs.iter().map(|j| (id(j), &j.plan.chunks)));
        }
        q
    }
}

/// state, status_ms, snapshot, history_len, artifacts_len, bytes.
fn bind_rows<'a>(q: Q<'a>, rows: impl Iterator<Item = &'a TaskRow> + Clone) -> Q<'a> {
    q.bind(rows.clone().map(|r| r.state).collect::<Vec<_>>())
        .bind(rows.clone().map(|r| r.status_ms).collect::<Vec<_>>())
        .bind(
            rows.clone()
                .map(|r| r.snapshot.as_slice())
                .collect::<Vec<_>>(),
        )
        .bind(rows.clone().map(|r| r.history_len).collect::<Vec<_>>())
        .bind(rows.clone().map(|r| r.artifacts_len).collect::<Vec<_>>())
        .bind(rows.map(|r| r.bytes).collect::<Vec<_>>())
}

/// Per-task events, numbered from the given first sequence number, as three arrays.
fn bind_events<'a>(
    q: Q<'a>,
    tasks: impl Iterator<Item = (&'a str, i64, &'a Vec<Vec<u8>>)>,
) -> Q<'a> {
    let (mut ids, mut seqs, mut payloads) = (Vec::new(), Vec::new(), Vec::new());
    for (id, first, events) in tasks {
        for (seq, payload) in (first..).zip(events) {
            ids.push(id);
            seqs.push(seq);
            payloads.push(payload.as_slice());
        }
    }
    q.bind(ids).bind(seqs).bind(payloads)
}

/// Per-task (position, bytes) rows as the three arrays `unnest` takes.
fn bind3<'a>(q: Q<'a>, tasks: impl Iterator<Item = (&'a str, &'a Vec<(i32, Vec<u8>)>)>) -> Q<'a> {
    let (mut ids, mut positions, mut bytes) = (Vec::new(), Vec::new(), Vec::new());
    for (id, rows) in tasks {
        for (position, b) in rows {
            ids.push(id);
            positions.push(*position);
            bytes.push(b.as_slice());
        }
    }
    q.bind(ids).bind(positions).bind(bytes)
}

/// Per-task (position, artifact id, bytes) rows as four arrays.
fn bind_artifacts<'a>(
    q: Q<'a>,
    tasks: impl Iterator<Item = (&'a str, &'a Vec<(i32, String, Vec<u8>)>)>,
) -> Q<'a> {
    let (mut ids, mut positions, mut artifact_ids, mut bytes) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for (id, rows) in tasks {
        for (position, artifact_id, b) in rows {
            ids.push(id);
            positions.push(*position);
            artifact_ids.push(artifact_id.as_str());
            bytes.push(b.as_slice());
        }
    }
    q.bind(ids).bind(positions).bind(artifact_ids).bind(bytes)
}
