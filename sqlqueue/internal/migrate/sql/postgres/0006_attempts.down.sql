-- 0006_attempts down: drops the attempt columns.
ALTER TABLE {jobs} DROP COLUMN IF EXISTS history, DROP COLUMN IF EXISTS worker, DROP COLUMN IF EXISTS started_at;

UPDATE {meta} SET value = '5' WHERE name = 'schema_version';
