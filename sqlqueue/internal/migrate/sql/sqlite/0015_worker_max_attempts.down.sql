-- 0015_worker_max_attempts down: drops the workers' attempt limits.
ALTER TABLE {workers} DROP COLUMN max_attempts;

UPDATE {meta} SET value = '14' WHERE name = 'schema_version';
