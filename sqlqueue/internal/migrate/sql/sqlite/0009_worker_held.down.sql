-- 0009_worker_held down: drops the workers' held jobs.
ALTER TABLE {workers} DROP COLUMN reserved;

ALTER TABLE {workers} DROP COLUMN running;

UPDATE {meta} SET value = '8' WHERE name = 'schema_version';
