-- Idempotency keys (issue 13) replace message claims.
--
-- SendMessage is no longer deduplicated by messageId: clients reuse message ids, and a different
-- message must never be answered with another task. A client that wants a retried send to be
-- answered with the first one's task sends an `Idempotency-Key`; the key is claimed per owner
-- before the message is dispatched, with a fingerprint of the request (the same key with a
-- different request is refused) and the task's sequence number at that moment (the first request
-- has done its part once the task exists past it).
DROP TABLE message_claims;

CREATE TABLE idempotency_keys (
    owner       text COLLATE "C" NOT NULL,
    key         text COLLATE "C" NOT NULL,
    fingerprint text NOT NULL,
    task_id     text COLLATE "C" NOT NULL,
    after_seq   bigint NOT NULL,
    -- The replica that claimed the key (as `tasks.dispatcher`): once its dispatch lease has
    -- expired, a key whose request never reached its task may be claimed again.
    replica     text COLLATE "C" DEFAULT nullif(current_setting('a2a.replica', true), ''),
    expires_at  timestamptz NOT NULL,
    PRIMARY KEY (owner, key)
);

-- The background sweep deletes expired keys oldest first.
CREATE INDEX idempotency_keys_expires_at ON idempotency_keys (expires_at);
