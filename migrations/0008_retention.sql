-- Retention (issue 15): terminal tasks older than `[retention] task_ttl` are deleted, with their
-- rows in every table keyed by the task (0001, 0003, 0005), by a background sweep.
--
-- When a task became terminal, for the sweep to find the oldest ones with an index range scan.
-- A stored generated column rather than an index on `updated_at`: every append sets
-- `updated_at`, and an index on it would make every update non-HOT (fillfactor 75 in 0001 is
-- there for HOT updates); this column changes only with `state`, which is indexed already, and
-- stays NULL for running tasks (so their updates stay HOT, and the partial index skips them).
-- Terminal tasks are immutable, so it is the time of their last update. Adding it rewrites the
-- table once (existing terminal tasks get their `updated_at`).
ALTER TABLE tasks
    ADD COLUMN terminal_at timestamptz
        GENERATED ALWAYS AS (CASE WHEN state IN (3, 4, 5, 7) THEN updated_at END) STORED;

CREATE INDEX tasks_terminal_at ON tasks (terminal_at) WHERE terminal_at IS NOT NULL;

-- Deleting a task deletes the idempotency keys that name it.
CREATE INDEX idempotency_keys_task ON idempotency_keys (task_id);
