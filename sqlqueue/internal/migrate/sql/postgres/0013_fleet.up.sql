-- 0013_fleet: the fleet's commands to worker processes (driver.Fleet):
-- one row for the fleet (target '*': its pause and its count of
-- terminations) and one per worker commanded on its own.
CREATE TABLE IF NOT EXISTS {fleet} (
  target TEXT PRIMARY KEY,
  paused SMALLINT NOT NULL DEFAULT 0,
  terminations BIGINT NOT NULL DEFAULT 0,
  updated_at BIGINT NOT NULL
);

UPDATE {meta} SET value = '13' WHERE name = 'schema_version';
