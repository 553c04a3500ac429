-- 0007_attempts down: drops the attempt columns.
ALTER TABLE {jobs} DROP COLUMN history;

ALTER TABLE {jobs} DROP COLUMN worker;

ALTER TABLE {jobs} DROP COLUMN started_at;

UPDATE {meta} SET value = '6' WHERE name = 'schema_version';
