-- Push delivery (issue 6): the worker's progress per task, its delivery log and dead letters.
-- Deleting a task (retention) must delete its rows here too (no foreign keys, as in 0001).

-- One row per task that has push configs and events to deliver: how far its events have gone
-- out to its webhooks, and which worker may deliver them now. The lease keeps the events of one
-- task in order when several workers received them from the consumer group: only the holder
-- delivers, from `delivered_seq + 1` on; it is renewed while the holder works and runs out if
-- the holder dies.
CREATE TABLE push_progress (
    task_id       text COLLATE "C" PRIMARY KEY,
    delivered_seq bigint NOT NULL,                       -- every event <= this is done (delivered or dead-lettered)
    lease_owner   text COLLATE "C",                      -- worker name; NULL = free
    lease_until   timestamptz NOT NULL,
    updated_at    timestamptz NOT NULL DEFAULT now()
) WITH (fillfactor = 70);  -- updated twice per batch; room for HOT updates

-- Every attempt, with its outcome: delivered, retry (another attempt follows), dead_lettered
-- (the last attempt, or a refusal that is not retried).
CREATE TABLE push_delivery_log (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    task_id    text COLLATE "C" NOT NULL,
    seq        bigint NOT NULL,
    config_id  text COLLATE "C" NOT NULL,
    attempt    integer NOT NULL,                         -- 1 = first
    outcome    text NOT NULL,
    status     integer,                                  -- HTTP status when a response came
    error      text,                                     -- never holds credentials
    latency_us bigint NOT NULL,
    worker     text NOT NULL,
    at         timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX push_delivery_log_task ON push_delivery_log (task_id, seq);

-- Deliveries that gave up. `a2a-worker dead-letters list|replay` reads and replays them.
CREATE TABLE push_dead_letters (
    id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    task_id        text COLLATE "C" NOT NULL,
    seq            bigint NOT NULL,
    config_id      text COLLATE "C" NOT NULL,
    url            text NOT NULL,
    config         bytea NOT NULL,                       -- TaskPushNotificationConfig, credentials included
    event          bytea NOT NULL,                       -- StreamResponse
    attempts       integer NOT NULL,
    last_error     text NOT NULL,
    created_at     timestamptz NOT NULL DEFAULT now(),
    replayed_at    timestamptz,                          -- last replay, if any
    replay_outcome text
);
