-- Upstream agents and crash-safe dispatch (issue 8).
--
-- Idempotent SendMessage. A client message id is claimed once per owner, before the message is
-- dispatched; a retried send with the same id finds the claim and follows the task it names
-- instead of dispatching again.
CREATE TABLE message_claims (
    owner      text COLLATE "C" NOT NULL,
    message_id text COLLATE "C" NOT NULL,
    task_id    text COLLATE "C" NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (owner, message_id)
);

-- Dispatch leases. Each gateway process (replica) holds one lease row, renewed every third of
-- its term; a task records the replica that runs its turn (`dispatcher`). A task that is
-- SUBMITTED or WORKING while its dispatcher's lease has expired is an orphan: another replica
-- claims it (`FOR UPDATE SKIP LOCKED`, so exactly one does) and re-attaches to it.
--
-- The dispatcher is the session setting `a2a.replica` (set by the store's connect options) of
-- the connection that created or last appended to the task: the writer is the dispatcher, at no
-- extra statement per task.
CREATE TABLE dispatch_leases (
    replica    text COLLATE "C" PRIMARY KEY,
    expires_at timestamptz NOT NULL
);

ALTER TABLE tasks
    ADD COLUMN dispatcher text COLLATE "C" DEFAULT nullif(current_setting('a2a.replica', true), '');

-- Only running tasks (SUBMITTED 1, WORKING 2) are ever looked up by dispatcher.
CREATE INDEX tasks_running_dispatcher ON tasks (dispatcher) WHERE state IN (1, 2);
