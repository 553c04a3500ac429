-- 0007_attempts: what the job page shows of a job's attempts. A claim
-- writes started_at (when the attempt began; Start dates it again where
-- the worker counts attempts as they start) and worker (the reserving
-- worker's ID, "" when it named none); a Nack or Fail appends the attempt
-- that ended to history, a JSON array of its last 20 failed attempts, in
-- the same statement. None of them is indexed; an ack writes none of them.
-- One column per ALTER: MySQL 8 has no ADD COLUMN IF NOT EXISTS, and the
-- runner skips an ALTER whose column exists.
ALTER TABLE {jobs} ADD COLUMN started_at BIGINT NOT NULL DEFAULT 0;

ALTER TABLE {jobs} ADD COLUMN worker VARCHAR(255) NOT NULL DEFAULT '';

ALTER TABLE {jobs} ADD COLUMN history MEDIUMTEXT NULL;

UPDATE {meta} SET value = '7' WHERE name = 'schema_version';
