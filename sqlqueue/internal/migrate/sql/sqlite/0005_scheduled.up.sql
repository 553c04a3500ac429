-- 0005_scheduled: counts of the pending jobs that were written to run
-- later (run_at after the write's updated_at: a delayed push, a retry
-- with backoff, a snooze), by five-minute bucket of run_at, in the counts
-- table under the state 'at:<run_at / 300000000>'. Counts reads the
-- buckets after the current one and counts the current bucket's future
-- jobs on the claim index, so the number of scheduled jobs is exact and
-- costs one row per queue and bucket plus the jobs due within five
-- minutes, however many are scheduled further ahead.
--
-- The key is a function of the row alone, so a job is subtracted from the
-- bucket it was added to whatever time it is: a bucket that has passed is
-- never read. Row triggers whose WHEN is false for jobs that run at once
-- (run_at not after updated_at), for their claims and acks.
CREATE TRIGGER IF NOT EXISTS {sched_ins_trg} AFTER INSERT ON {jobs}
  WHEN NEW.state = 'pending' AND NEW.run_at > NEW.updated_at BEGIN
  INSERT INTO {counts} (queue, state, shard, n) VALUES (NEW.queue, 'at:' || (NEW.run_at / 300000000), 0, 1) ON CONFLICT (queue, state, shard) DO UPDATE SET n = n + 1; END;

CREATE TRIGGER IF NOT EXISTS {sched_del_trg} AFTER DELETE ON {jobs}
  WHEN OLD.state = 'pending' AND OLD.run_at > OLD.updated_at BEGIN
  INSERT INTO {counts} (queue, state, shard, n) VALUES (OLD.queue, 'at:' || (OLD.run_at / 300000000), 0, -1) ON CONFLICT (queue, state, shard) DO UPDATE SET n = n - 1; END;

CREATE TRIGGER IF NOT EXISTS {sched_upd_trg} AFTER UPDATE ON {jobs}
  WHEN (OLD.state = 'pending' AND OLD.run_at > OLD.updated_at) OR (NEW.state = 'pending' AND NEW.run_at > NEW.updated_at) BEGIN
  INSERT INTO {counts} (queue, state, shard, n) SELECT OLD.queue, 'at:' || (OLD.run_at / 300000000), 0, -1 WHERE OLD.state = 'pending' AND OLD.run_at > OLD.updated_at ON CONFLICT (queue, state, shard) DO UPDATE SET n = n - 1; INSERT INTO {counts} (queue, state, shard, n) SELECT NEW.queue, 'at:' || (NEW.run_at / 300000000), 0, 1 WHERE NEW.state = 'pending' AND NEW.run_at > NEW.updated_at ON CONFLICT (queue, state, shard) DO UPDATE SET n = n + 1; END;

-- The jobs already stored, in this migration's transaction.
DELETE FROM {counts} WHERE state LIKE 'at:%';

INSERT INTO {counts} (queue, state, shard, n) SELECT queue, 'at:' || (run_at / 300000000), 0, COUNT(*) FROM {jobs}
  WHERE state = 'pending' AND run_at > updated_at GROUP BY 1, 2;

UPDATE {meta} SET value = '5' WHERE name = 'schema_version';
