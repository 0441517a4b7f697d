-- Upstream agents registered through the admin API (`/admin/v1/agents`), shared by every
-- replica: each polls `admin_agents_version` every second and re-reads the table when it moved.
CREATE TABLE admin_agents (
    name text PRIMARY KEY,
    -- The `[[agents]]` entry as JSON, as the API received it.
    entry text NOT NULL,
    -- Its strong ETag (If-Match).
    etag text NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);

-- One row: bumped in the transaction of every change.
CREATE TABLE admin_agents_version (
    id int PRIMARY KEY CHECK (id = 1),
    version bigint NOT NULL
);
INSERT INTO admin_agents_version (id, version) VALUES (1, 0);

-- Who changed what, when.
CREATE TABLE admin_audit (
    id bigserial PRIMARY KEY,
    at timestamptz NOT NULL DEFAULT now(),
    who text NOT NULL,
    action text NOT NULL,
    agent text NOT NULL,
    etag text
);
