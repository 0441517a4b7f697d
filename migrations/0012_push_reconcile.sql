-- Push delivery against the ledger (issue 27, items 2 and 6; review H5, M10).
--
-- The worker's progress per task (`push_progress.delivered_seq`) is the record of what went
-- out; the Redis stream only wakes the worker. A reconciliation sweep finds the tasks whose
-- progress is behind `tasks.seq` (events Redis lost, trimmed, or never received) and delivers
-- them from the event log. To keep that sweep cheap whatever the number of tasks kept:
--   `settled`  true once delivery reached a terminal task's last event: nothing will follow,
--              and the partial index below forgets the row;
--   `swept_at` when a sweep last looked at the row: each sweep takes the rows looked at least
--              long ago (a range scan of the partial index), so a row is examined at most once
--              per sweep interval, by one worker (`FOR UPDATE SKIP LOCKED`).
-- Delivery itself (claim, renew, advance) changes neither column, so its updates stay HOT.
ALTER TABLE push_progress
    ADD COLUMN settled boolean NOT NULL DEFAULT false,
    ADD COLUMN swept_at timestamptz NOT NULL DEFAULT '-infinity';

CREATE INDEX push_progress_unsettled ON push_progress (swept_at) WHERE NOT settled;

-- Dead letters: the owner of their task (a per-owner cap keeps the newest), and an index by
-- task so that retention deletes them with their task. Credentials and tokens are no longer
-- stored: the worker redacts the config before it inserts a dead letter (rows written before
-- this migration go with their task's retention).
ALTER TABLE push_dead_letters ADD COLUMN owner text COLLATE "C";
CREATE INDEX push_dead_letters_task ON push_dead_letters (task_id);
CREATE INDEX push_dead_letters_owner ON push_dead_letters (owner, id) WHERE owner IS NOT NULL;
