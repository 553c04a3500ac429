-- 0028_workflow_ends down: graphs no longer record when they finished;
-- results keep no retention of their own.
ALTER TABLE {results} DROP COLUMN keep_us;

ALTER TABLE {graphs} DROP KEY {graphs_finished_idx};

ALTER TABLE {graphs} DROP COLUMN finished_at;

UPDATE {meta} SET value = '27' WHERE name = 'schema_version';
