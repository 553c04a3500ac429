-- 0003_features: what cancel, snooze, RetryUntil, UniqueFor and periodic
-- jobs store. A cancelled job is a new state value, 'cancelled', kept like
-- a done one; active_key is NULL for it, which frees its unique key.
--
-- MySQL commits DDL statement by statement and MySQL 8 has no ADD COLUMN
-- IF NOT EXISTS: the tables come first (idempotent), the ALTERs last, just
-- before the version row.
CREATE TABLE IF NOT EXISTS {periodic} (
  name VARBINARY(1020) NOT NULL PRIMARY KEY,
  schedule TEXT NOT NULL,
  last_tick BIGINT NOT NULL,
  next_tick BIGINT NOT NULL,
  last_job_id VARBINARY(1020) NOT NULL,
  updated_at BIGINT NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE IF NOT EXISTS {uniques} (
  queue VARBINARY(1020) NOT NULL,
  unique_key VARBINARY(1020) NOT NULL,
  expires_at BIGINT NOT NULL,
  PRIMARY KEY (queue, unique_key)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- 'cancelled' needs a longer state column (idempotent: it states the final
-- column). The ADD COLUMN is skipped by the runner when the columns exist.
ALTER TABLE {jobs} MODIFY state VARCHAR(16) NOT NULL;

ALTER TABLE {jobs} ADD COLUMN snoozes INT NOT NULL DEFAULT 0, ADD COLUMN retry_until BIGINT NOT NULL DEFAULT 0;

UPDATE {meta} SET value = '3' WHERE name = 'schema_version';
