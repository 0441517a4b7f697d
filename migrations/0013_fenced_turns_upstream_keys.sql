-- Fenced turns (issue 27, item 5; review M4).
--
-- `epoch` is the task's fencing token: each takeover claim of the task (`take_over`) adds one,
-- and the runner of a turn carries the epoch it started under in every append and every
-- "sending" dispatch mark (`... AND epoch = $n` inside the existing statements). A replica whose
-- task was taken over therefore can no longer commit it or mark it sent: its writes change
-- nothing and it stops the turn. Existing rows start at 0, as new tasks do.
ALTER TABLE tasks ADD COLUMN epoch int8 NOT NULL DEFAULT 0;

-- The upstream `Idempotency-Key` of a keyed send (review M7): what the task's keys derive from
-- when it is not the task id, a digest of the caller's (owner, key). A retry whose key was
-- freed or reclaimed mints a new task id but derives the same upstream key, so the upstream
-- deduplicates it; a takeover and the task's later turns read it here. NULL: the task id.
ALTER TABLE tasks ADD COLUMN upstream_key text;
