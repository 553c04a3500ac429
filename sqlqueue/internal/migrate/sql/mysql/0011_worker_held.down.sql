-- 0011_worker_held down: drops the workers' held jobs.
ALTER TABLE {workers} DROP COLUMN reserved;

ALTER TABLE {workers} DROP COLUMN running;

UPDATE {meta} SET value = '10' WHERE name = 'schema_version';
