-- 0006_attempts: what the job page shows of a job's attempts. A claim
-- writes started_at (when the attempt began; Start dates it again where
-- the worker counts attempts as they start) and worker (the reserving
-- worker's ID, "" when it named none); a Nack or Fail appends the attempt
-- that ended to history, a JSON array of its last 20 failed attempts, in
-- the same statement. None of them is indexed, so a claim stays a HOT
-- update; an ack writes none of them.
ALTER TABLE {jobs} ADD COLUMN IF NOT EXISTS started_at BIGINT NOT NULL DEFAULT 0,
  ADD COLUMN IF NOT EXISTS worker TEXT NOT NULL DEFAULT '',
  ADD COLUMN IF NOT EXISTS history TEXT;

UPDATE {meta} SET value = '6' WHERE name = 'schema_version';
