-- 0021_worker_max_attempts: the attempt limit each worker applies to jobs
-- that carry none of their own (queue.WorkerInfo.MaxAttempts: its
-- Worker's MaxAttempts setting), as it reports it with its heartbeat; 0
-- from a worker of an earlier release. The dashboard's job page shows a
-- job's limit from it.
-- MySQL 8 has no ADD COLUMN IF NOT EXISTS: the runner skips an ALTER whose
-- column exists.
ALTER TABLE {workers} ADD COLUMN max_attempts INT NOT NULL DEFAULT 0;

UPDATE {meta} SET value = '21' WHERE name = 'schema_version';
