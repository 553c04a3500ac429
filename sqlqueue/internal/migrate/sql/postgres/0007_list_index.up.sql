-- 0007_list_index: the index that orders the lists of finished jobs.
-- Dead letters are listed by failure time, done and cancelled jobs by the
-- time they finished (finished_at, set by the statement that finishes the
-- job), newest first, per queue: (state, queue, finished_at, seq). It
-- replaces (state, queue, seq), whose (state, queue) prefix it keeps for
-- the loose scans of the queues with jobs in a state, so a job changing
-- state writes as many index entries as before; waiting and running jobs
-- are listed on the claim index. Building it reads the table once.
CREATE INDEX IF NOT EXISTS {list_idx} ON {jobs} (state, queue, finished_at, seq);

DROP INDEX IF EXISTS {state_idx};

UPDATE {meta} SET value = '7' WHERE name = 'schema_version';
