-- 0013_periodic_controls: a periodic job can be paused (no tick is claimed
-- while paused, in any process) and run now from a tool that lacks its Go
-- type, from the job a tick enqueues, kept as the last worker built it.
-- SQLite has no ADD COLUMN IF NOT EXISTS: the runner skips an ALTER whose
-- column exists.
ALTER TABLE {periodic} ADD COLUMN paused INTEGER NOT NULL DEFAULT 0;

ALTER TABLE {periodic} ADD COLUMN template BLOB NOT NULL DEFAULT x'';

UPDATE {meta} SET value = '13' WHERE name = 'schema_version';
