-- 0014_fleet: the fleet's commands to worker processes (driver.Fleet):
-- one row for the fleet (target '*': its pause and its count of
-- terminations) and one per worker commanded on its own.
CREATE TABLE IF NOT EXISTS {fleet} (
  target TEXT PRIMARY KEY,
  paused INTEGER NOT NULL DEFAULT 0,
  terminations INTEGER NOT NULL DEFAULT 0,
  updated_at INTEGER NOT NULL
);

UPDATE {meta} SET value = '14' WHERE name = 'schema_version';
