-- Takeover of turns that never reached the upstream agent (issue 13, item 11).
--
-- A replica that dies leaves tasks of three kinds to the replica taking them over: turns the
-- upstream named a task for (re-attach to it), turns still waiting in the dead replica's dispatch
-- queue (never sent: dispatch them), and turns whose send had begun when it died (the upstream
-- may or may not have them: re-send under the same Idempotency-Key if the upstream honours one,
-- else fail them as of unknown outcome). These columns tell the three apart and give a queued
-- turn back its priority. Written only for upstream agents' turns, off the batched write path.
ALTER TABLE tasks
    ADD COLUMN priority           smallint,     -- the queued turn's priority (0 = LOW .. 3 = CRITICAL)
    ADD COLUMN upstream_sent_turn integer,      -- the last turn (1 = first message) whose send began
    ADD COLUMN upstream_sent_at   timestamptz;  -- when that send began
