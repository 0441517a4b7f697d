-- The task ledger (issue 4): tasks, their history, artifacts and event log, and push configs.
--
-- Encoding. Every bytea column holds one protobuf message of the canonical lf.a2a.v1 model behind
-- a one-byte format envelope: byte 0 is the format version (1 = protobuf), the rest the encoding.
-- Protobuf rather than JSONB because the prost type is the canonical model: the encoding is
-- exact (no float or Struct round-trip questions), several times cheaper to produce and parse
-- than ProtoJSON on every append, and appendable: concatenating two encodings merges them, which
-- is how an artifact chunk is appended in SQL without resending the artifact. Everything a query
-- filters or sorts on is a plain column beside the bytes.
--
-- Identifiers use the "C" collation: byte order (what the in-memory store and the cursors use)
-- and cheaper comparisons than a linguistic collation.
--
-- No foreign keys from the child tables to tasks: every child row is written by the same
-- statement that inserts or updates its task row (joined to it), and the RI triggers would add a
-- lookup and a row lock per child row on the hot path. Deleting a task (retention) must delete
-- its rows in all five tables.

CREATE TABLE tasks (
    id                  text COLLATE "C" PRIMARY KEY,    -- gateway-minted (UUID v7)
    owner               text COLLATE "C" NOT NULL,       -- principal; every read filters on it
    agent               text NOT NULL,                   -- agent the task is routed to
    context_id          text COLLATE "C" NOT NULL,
    state               smallint NOT NULL,               -- lf.a2a.v1.TaskState number
    status_ms           bigint NOT NULL,                 -- status timestamp, Unix ms (0 = none)
    seq                 bigint NOT NULL,                 -- sequence number of the last event
    history_len         integer NOT NULL,                -- task_history rows: positions 0..history_len
    artifacts_len       integer NOT NULL,                -- task_artifacts rows: positions 0..artifacts_len
    upstream_task_id    text,                            -- an upstream agent's ids (routing; never shown)
    upstream_context_id text,
    snapshot            bytea NOT NULL,                  -- Task without history and artifacts
    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now()
) WITH (fillfactor = 75);  -- room on the page, so updates that touch no indexed column stay HOT

-- ListTasks is a keyset scan per owner, newest status first, ties by id; one index per filter
-- shape so that a filtered page is a scan too (both filters: the context index, state filtered).
CREATE INDEX tasks_owner_recent ON tasks (owner, status_ms DESC, id DESC);
CREATE INDEX tasks_owner_context_recent ON tasks (owner, context_id, status_ms DESC, id DESC);
CREATE INDEX tasks_owner_state_recent ON tasks (owner, state, status_ms DESC, id DESC);

CREATE TABLE task_history (
    task_id  text COLLATE "C" NOT NULL,
    position integer NOT NULL,                           -- 0 = oldest
    message  bytea NOT NULL,                             -- Message
    PRIMARY KEY (task_id, position)
);

CREATE TABLE task_artifacts (
    task_id     text COLLATE "C" NOT NULL,
    position    integer NOT NULL,                        -- order of first appearance
    artifact_id text NOT NULL,
    artifact    bytea NOT NULL,                          -- Artifact; chunks are appended with ||
    PRIMARY KEY (task_id, position)
);

CREATE TABLE task_events (
    task_id    text COLLATE "C" NOT NULL,
    seq        bigint NOT NULL,                          -- 1 = the task as created
    payload    bytea NOT NULL,                           -- StreamResponse
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (task_id, seq)
);

-- Owner-scoped through the task: every statement joins tasks on (id, owner), so another owner's
-- configs, credentials included, are never read.
CREATE TABLE push_configs (
    task_id    text COLLATE "C" NOT NULL,
    id         text COLLATE "C" NOT NULL,
    position   bigint GENERATED ALWAYS AS IDENTITY,      -- creation order; kept on replace
    config     bytea NOT NULL,                           -- TaskPushNotificationConfig, credentials included
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (task_id, id)
);
CREATE INDEX push_configs_order ON push_configs (task_id, position);
