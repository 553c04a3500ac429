-- 0011_worker_held: the jobs each worker holds, by queue, as it reports
-- them with its heartbeat (queue.WorkerInfo Running and Reserved: JSON
-- objects from queue name to count; NULL when it holds none or predates
-- this column). The running count of a queue is their sum over the live
-- workers, and the running list reads only the queues they hold jobs in,
-- since no index holds a job's lease expiry.
-- One column per ALTER: MySQL 8 has no ADD COLUMN IF NOT EXISTS, and the
-- runner skips an ALTER whose column exists.
ALTER TABLE {workers} ADD COLUMN running TEXT NULL;

ALTER TABLE {workers} ADD COLUMN reserved TEXT NULL;

UPDATE {meta} SET value = '11' WHERE name = 'schema_version';
