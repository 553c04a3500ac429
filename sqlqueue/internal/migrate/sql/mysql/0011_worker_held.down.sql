-- 0011_worker_held down: drops the workers' held jobs.
ALTER TABLE {workers} DROP COLUMN running, DROP COLUMN reserved;

UPDATE {meta} SET value = '10' WHERE name = 'schema_version';
