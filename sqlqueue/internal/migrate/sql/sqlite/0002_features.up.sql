-- 0002_features: what cancel, snooze, RetryUntil, UniqueFor and periodic
-- jobs store. SQLite has no ADD COLUMN IF NOT EXISTS: the runner skips
-- an ALTER whose column exists. A cancelled job is a new state value, 'cancelled',
-- kept like a done one.
ALTER TABLE {jobs} ADD COLUMN snoozes INTEGER NOT NULL DEFAULT 0;

ALTER TABLE {jobs} ADD COLUMN retry_until INTEGER NOT NULL DEFAULT 0;

CREATE TABLE IF NOT EXISTS {periodic} (
  name TEXT PRIMARY KEY,
  schedule TEXT NOT NULL,
  last_tick INTEGER NOT NULL,
  next_tick INTEGER NOT NULL,
  last_job_id TEXT NOT NULL,
  updated_at INTEGER NOT NULL
);

CREATE TABLE IF NOT EXISTS {uniques} (
  queue TEXT NOT NULL,
  unique_key TEXT NOT NULL,
  expires_at INTEGER NOT NULL,
  PRIMARY KEY (queue, unique_key)
);

UPDATE {meta} SET value = '2' WHERE name = 'schema_version';
