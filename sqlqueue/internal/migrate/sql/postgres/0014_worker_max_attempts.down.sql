-- 0014_worker_max_attempts down: drops the workers' attempt limits.
ALTER TABLE {workers} DROP COLUMN IF EXISTS max_attempts;

UPDATE {meta} SET value = '13' WHERE name = 'schema_version';
