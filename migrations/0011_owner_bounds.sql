-- Per-owner bounds (issue 26): interrupted tasks expire, and what one owner stores is counted.
--
-- The expiry sweep finds the interrupted tasks (INPUT_REQUIRED 6, AUTH_REQUIRED 8) whose status
-- is oldest with a range scan of this partial index; running and terminal tasks are not in it.
-- `state` and `status_ms` are indexed already, so it costs no HOT update that was HOT before.
CREATE INDEX tasks_interrupted ON tasks (status_ms) WHERE state IN (6, 8);

-- The bytes of the task's messages and artifacts (`a2a_store::stored_bytes`), written with the
-- row; not indexed, so updates stay HOT. Tasks stored before this migration count 0.
ALTER TABLE tasks ADD COLUMN bytes bigint NOT NULL DEFAULT 0;

-- What each owner stores, as sums of the changes of `tasks.bytes`. A row per (owner, slot): each
-- writer connection adds to the row of its own backend pid (`slot`), so concurrent writers never
-- wait on each other's row; retention subtracts in slot 0, and folds the rows of connections
-- that are gone into it. An owner's bytes are the sum of its rows.
CREATE TABLE owner_bytes (
    owner text COLLATE "C" NOT NULL,
    slot  integer NOT NULL,
    bytes bigint NOT NULL,
    PRIMARY KEY (owner, slot)
);
