-- The transactional outbox (issue 27, item 1; review M5).
--
-- Every commit of events (a create or an append) inserts one row here in the same statement,
-- and so the same transaction, as the events themselves: "these events of this task are still
-- to be published". The committing replica publishes them right after the commit and deletes
-- the row (in batches) once Redis acknowledged the XADD; a row that stays (Redis unreachable,
-- the replica killed between commit and publish) is relayed by any replica once it is older
-- than a few seconds, claimed with `FOR UPDATE SKIP LOCKED`, its events read back from
-- `task_events`. So nothing committed is left unannounced, whatever process dies.
--
-- One row per commit, not per event: `first_seq..=seq` are the events of the commit. The row
-- is small (no payload; the event log has it) and needs no value the statement does not already
-- bind. The primary key is what the relay deletes by; the index on `created_at` is how any
-- replica finds the rows left behind (older than its threshold: a range scan from the oldest).
-- In steady state the table holds only the commits of the last moments; during a Redis outage
-- it grows with the commit rate and shrinks as soon as Redis answers again.
CREATE TABLE event_outbox (
    task_id    text COLLATE "C" NOT NULL,
    -- The last event of the commit.
    seq        bigint NOT NULL,
    -- The first event of the commit.
    first_seq  bigint NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (task_id, seq)
) WITH (
    -- A queue: rows live milliseconds. Vacuum it often so its pages and index stay few.
    autovacuum_vacuum_scale_factor = 0,
    autovacuum_vacuum_threshold = 5000,
    autovacuum_vacuum_insert_scale_factor = 0,
    autovacuum_vacuum_insert_threshold = 5000
);

CREATE INDEX event_outbox_created ON event_outbox (created_at);
