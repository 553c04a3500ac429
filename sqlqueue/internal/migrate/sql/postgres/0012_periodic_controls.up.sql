-- 0012_periodic_controls: a periodic job can be paused (no tick is claimed
-- while paused, in any process) and run now from a tool that lacks its Go
-- type, from the job a tick enqueues, kept as the last worker built it.
ALTER TABLE {periodic} ADD COLUMN IF NOT EXISTS paused BOOLEAN NOT NULL DEFAULT FALSE;

ALTER TABLE {periodic} ADD COLUMN IF NOT EXISTS template BYTEA NOT NULL DEFAULT '';

UPDATE {meta} SET value = '12' WHERE name = 'schema_version';
