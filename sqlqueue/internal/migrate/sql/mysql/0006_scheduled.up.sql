-- 0006_scheduled: counts of the pending jobs that were written to run
-- later (run_at after the write's updated_at: a delayed push, a retry
-- with backoff, a snooze), by five-minute bucket of run_at, in the counts
-- table under the state 'at:<run_at DIV 300000000>'. Counts reads the
-- buckets after the current one and counts the current bucket's future
-- jobs on the claim index, so the number of scheduled jobs is exact and
-- costs one row per queue and bucket plus the jobs due within five
-- minutes, however many are scheduled further ahead.
--
-- The key is a function of the row alone, so a job is subtracted from the
-- bucket it was added to whatever time it is: a bucket that has passed is
-- never read. Row triggers of their own beside the state counts' (MySQL
-- 5.7+ and MariaDB 10.2+ allow several per event), writing only for jobs
-- that run later, on the same shards (CONNECTION_ID()).
DROP TRIGGER IF EXISTS {sched_ins_trg};

CREATE TRIGGER {sched_ins_trg} AFTER INSERT ON {jobs} FOR EACH ROW BEGIN IF NEW.state = 'pending' AND NEW.run_at > NEW.updated_at THEN
  INSERT INTO {counts} (queue, state, shard, n) VALUES (NEW.queue, CONCAT('at:', NEW.run_at DIV 300000000), CONNECTION_ID(), 1) ON DUPLICATE KEY UPDATE n = n + 1; END IF; END;

DROP TRIGGER IF EXISTS {sched_del_trg};

CREATE TRIGGER {sched_del_trg} AFTER DELETE ON {jobs} FOR EACH ROW BEGIN IF OLD.state = 'pending' AND OLD.run_at > OLD.updated_at THEN
  INSERT INTO {counts} (queue, state, shard, n) VALUES (OLD.queue, CONCAT('at:', OLD.run_at DIV 300000000), CONNECTION_ID(), -1) ON DUPLICATE KEY UPDATE n = n - 1; END IF; END;

DROP TRIGGER IF EXISTS {sched_upd_trg};

CREATE TRIGGER {sched_upd_trg} AFTER UPDATE ON {jobs} FOR EACH ROW BEGIN IF OLD.state = 'pending' AND OLD.run_at > OLD.updated_at THEN
  INSERT INTO {counts} (queue, state, shard, n) VALUES (OLD.queue, CONCAT('at:', OLD.run_at DIV 300000000), CONNECTION_ID(), -1) ON DUPLICATE KEY UPDATE n = n - 1; END IF; IF NEW.state = 'pending' AND NEW.run_at > NEW.updated_at THEN
  INSERT INTO {counts} (queue, state, shard, n) VALUES (NEW.queue, CONCAT('at:', NEW.run_at DIV 300000000), CONNECTION_ID(), 1) ON DUPLICATE KEY UPDATE n = n + 1; END IF; END;

-- The jobs already stored. MySQL's DDL is not transactional: run this
-- migration while no process writes the queue.
DELETE FROM {counts} WHERE state LIKE 'at:%';

INSERT INTO {counts} (queue, state, shard, n) SELECT queue, CONCAT('at:', run_at DIV 300000000), 0, COUNT(*) FROM {jobs}
  WHERE state = 'pending' AND run_at > updated_at GROUP BY 1, 2;

UPDATE {meta} SET value = '6' WHERE name = 'schema_version';
