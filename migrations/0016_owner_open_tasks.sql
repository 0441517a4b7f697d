-- An owner's open tasks, counted with the writes (issue 26, item 5; the benchmark regression).
--
-- The per-owner quota on open tasks used to count them at the time of each check with
-- `count(*) ... WHERE owner = $1 AND state IN (0, 1, 2, 6, 8)` on `tasks_owner_state_recent`.
-- Every task of a busy owner passes through an open state and leaves it with a non-HOT update,
-- so until vacuum that index range holds one dead entry per task the owner sent recently: the
-- count's cost grew with the owner's send rate and the time since the last vacuum (measured: the
-- count running in 32 of 60 samples of pg_stat_activity during a gRPC send run, the persisted
-- send rate falling during the run).
--
-- Now each create and append adds its change of the owner's open tasks to the owner's row in
-- `owner_bytes`, in the same statement as the write (as it does with the bytes since 0011): a
-- create of a task that is not terminal +1, an append that makes it terminal -1 (an append to
-- a terminal task is refused, and retention deletes terminal tasks only, so no other write
-- changes the count). An owner's open tasks are the sum of its rows, a read of a few rows.
ALTER TABLE owner_bytes ADD COLUMN open bigint NOT NULL DEFAULT 0;

-- The tasks open now, in slot 0 (the slot retention writes to).
INSERT INTO owner_bytes (owner, slot, bytes, open)
SELECT owner, 0, 0, count(*) FROM tasks WHERE state NOT IN (3, 4, 5, 7) GROUP BY owner
ON CONFLICT (owner, slot) DO UPDATE SET open = owner_bytes.open + excluded.open;
