-- 0009_worker_held down: drops the workers' held jobs.
ALTER TABLE {workers} DROP COLUMN IF EXISTS running, DROP COLUMN IF EXISTS reserved;

UPDATE {meta} SET value = '8' WHERE name = 'schema_version';
