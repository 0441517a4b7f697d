-- Whether a task has (or had) a push config, returned by every append (issue 27, item 3).
--
-- Every commit used to be published twice on Redis: to the task's stream for its followers and
-- to a partition of the push worker's stream. For a task without a push config the second entry
-- only made the worker claim the task's lease (a PostgreSQL statement per task) to learn there
-- was nothing to deliver, and cost Redis 3 of the 7 commands of an echo send. Now a write says
-- whether the task has push configs, and only those commits reach the worker's stream.
--
-- Set by the statement that stores a config (an UPDATE of the task's row, so it takes the row's
-- lock): an append that commits after it sees `true`; one that committed before it took the
-- row's lock first, and its events are the config's starting point or earlier, which the
-- worker's reconciliation sweep delivers (as it did before). Never cleared: a task whose
-- configs were all deleted is published to the worker, which finds no config.
ALTER TABLE tasks ADD COLUMN push boolean NOT NULL DEFAULT false;

UPDATE tasks SET push = true WHERE id IN (SELECT task_id FROM push_configs);
