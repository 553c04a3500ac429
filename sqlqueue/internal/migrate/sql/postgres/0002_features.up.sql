-- 0002_features: what cancel, snooze, RetryUntil, UniqueFor and periodic
-- jobs store.
--
-- The jobs table gains snoozes (a handler's snoozes, capped by the worker)
-- and retry_until (0: none); neither is indexed, so a claim stays a HOT
-- update. A cancelled job is a new state value, 'cancelled', kept like a
-- done one: the partial indexes already leave it out of the claim and the
-- unique key, and finished_idx covers its retention.
ALTER TABLE {jobs} ADD COLUMN IF NOT EXISTS snoozes INTEGER NOT NULL DEFAULT 0,
  ADD COLUMN IF NOT EXISTS retry_until BIGINT NOT NULL DEFAULT 0;

-- One row per periodic job: the last tick enqueued, so that each tick is
-- enqueued once however many processes schedule it.
CREATE TABLE IF NOT EXISTS {periodic} (
  name TEXT PRIMARY KEY,
  schedule TEXT NOT NULL,
  last_tick BIGINT NOT NULL,
  next_tick BIGINT NOT NULL,
  last_job_id TEXT NOT NULL,
  updated_at BIGINT NOT NULL
);

-- Unique keys held by UniqueFor pushes until expires_at, also after their
-- job finished.
CREATE TABLE IF NOT EXISTS {uniques} (
  queue TEXT NOT NULL,
  unique_key TEXT NOT NULL,
  expires_at BIGINT NOT NULL,
  PRIMARY KEY (queue, unique_key)
);

UPDATE {meta} SET value = '2' WHERE name = 'schema_version';
