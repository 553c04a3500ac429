-- 0006_attempts: what the job page shows of a job's attempts. A claim
-- writes started_at (when the attempt began; Start dates it again where
-- the worker counts attempts as they start) and worker (the reserving
-- worker's ID, "" when it named none); a Nack or Fail appends the attempt
-- that ended to history, a JSON array of its last 20 failed attempts, in
-- the same statement. None of them is indexed; an ack writes none of them.
-- SQLite has no ADD COLUMN IF NOT EXISTS: the runner skips an ALTER whose
-- column exists.
ALTER TABLE {jobs} ADD COLUMN started_at INTEGER NOT NULL DEFAULT 0;

ALTER TABLE {jobs} ADD COLUMN worker TEXT NOT NULL DEFAULT '';

ALTER TABLE {jobs} ADD COLUMN history TEXT;

UPDATE {meta} SET value = '6' WHERE name = 'schema_version';
