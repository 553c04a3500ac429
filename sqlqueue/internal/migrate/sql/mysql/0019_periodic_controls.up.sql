-- 0019_periodic_controls: a periodic job can be paused (no tick is claimed
-- while paused, in any process) and run now from a tool that lacks its Go
-- type, from the job a tick enqueues, kept as the last worker built it.
-- MySQL 8 has no ADD COLUMN IF NOT EXISTS: the runner skips an ALTER whose
-- column exists. A BLOB takes no default: NULL stands for none.
ALTER TABLE {periodic} ADD COLUMN paused TINYINT NOT NULL DEFAULT 0;

ALTER TABLE {periodic} ADD COLUMN template LONGBLOB NULL;

UPDATE {meta} SET value = '19' WHERE name = 'schema_version';
