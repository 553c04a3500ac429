-- 0009_worker_held: the jobs each worker holds, by queue, as it reports
-- them with its heartbeat (queue.WorkerInfo Running and Reserved: JSON
-- objects from queue name to count; NULL when it holds none or predates
-- this column). The running count of a queue is their sum over the live
-- workers, and the running list reads only the queues they hold jobs in,
-- since no index holds a job's lease expiry.
ALTER TABLE {workers} ADD COLUMN IF NOT EXISTS running TEXT NULL, ADD COLUMN IF NOT EXISTS reserved TEXT NULL;

UPDATE {meta} SET value = '9' WHERE name = 'schema_version';
