-- The dialect of the webhook a dead letter was meant for (issue 19): a replay sends what the
-- delivery would have sent, the 0.3 Task to a 0.3 webhook, even if its config is gone by then.
-- Dead letters recorded before were 1.0's or replayed with 1.0's payload.
ALTER TABLE push_dead_letters ADD COLUMN dialect text NOT NULL DEFAULT '1.0'
    CHECK (dialect IN ('1.0', '0.3'));
