-- 0020_fleet: the fleet's commands to worker processes (driver.Fleet):
-- one row for the fleet (target '*': its pause and its count of
-- terminations) and one per worker commanded on its own.
CREATE TABLE IF NOT EXISTS {fleet} (
  target VARCHAR(255) NOT NULL PRIMARY KEY,
  paused TINYINT NOT NULL DEFAULT 0,
  terminations BIGINT NOT NULL DEFAULT 0,
  updated_at BIGINT NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

UPDATE {meta} SET value = '20' WHERE name = 'schema_version';
