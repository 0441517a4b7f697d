-- Per-owner push-config quotas (issue 15): each config names its task's owner, so counting an
-- owner's configs reads only theirs (and stops at the quota), not all of the owner's tasks.
ALTER TABLE push_configs ADD COLUMN owner text COLLATE "C";
UPDATE push_configs p SET owner = t.owner FROM tasks t WHERE t.id = p.task_id;
-- A config whose task is gone was unreachable already (every statement joins tasks).
DELETE FROM push_configs WHERE owner IS NULL;
ALTER TABLE push_configs ALTER COLUMN owner SET NOT NULL;
CREATE INDEX push_configs_owner ON push_configs (owner);
