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
-- never read, and its rows are zero once its jobs have been claimed
-- (a claim moves updated_at past run_at). Jobs that run at once (run_at
-- not after updated_at) never touch these rows, nor do claims of them,
-- acks, extends. Statement triggers of their own, beside the state
-- counts', on the same shards (the connection's backend PID, folded into
-- shard 0 by the maintenance pass).
CREATE OR REPLACE FUNCTION {sched_ins_fn}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
  INSERT INTO {counts} AS c (queue, state, shard, n) SELECT queue, 'at:' || (run_at / 300000000), pg_backend_pid(), COUNT(*) FROM new_rows
  WHERE state = 'pending' AND run_at > updated_at GROUP BY 1, 2
  ON CONFLICT (queue, state, shard) DO UPDATE SET n = c.n + EXCLUDED.n; RETURN NULL; END $$;

CREATE OR REPLACE FUNCTION {sched_del_fn}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
  INSERT INTO {counts} AS c (queue, state, shard, n) SELECT queue, 'at:' || (run_at / 300000000), pg_backend_pid(), -COUNT(*) FROM old_rows
  WHERE state = 'pending' AND run_at > updated_at GROUP BY 1, 2
  ON CONFLICT (queue, state, shard) DO UPDATE SET n = c.n + EXCLUDED.n; RETURN NULL; END $$;

CREATE OR REPLACE FUNCTION {sched_upd_fn}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
  INSERT INTO {counts} AS c (queue, state, shard, n)
  SELECT queue, 'at:' || (run_at / 300000000), pg_backend_pid(), SUM(d) FROM (
    SELECT queue, run_at, 1 AS d FROM new_rows WHERE state = 'pending' AND run_at > updated_at
    UNION ALL SELECT queue, run_at, -1 FROM old_rows WHERE state = 'pending' AND run_at > updated_at) x
  GROUP BY 1, 2 HAVING SUM(d) <> 0
  ON CONFLICT (queue, state, shard) DO UPDATE SET n = c.n + EXCLUDED.n; RETURN NULL; END $$;

DROP TRIGGER IF EXISTS {sched_ins_trg} ON {jobs};

CREATE TRIGGER {sched_ins_trg} AFTER INSERT ON {jobs} REFERENCING NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION {sched_ins_fn}();

DROP TRIGGER IF EXISTS {sched_del_trg} ON {jobs};

CREATE TRIGGER {sched_del_trg} AFTER DELETE ON {jobs} REFERENCING OLD TABLE AS old_rows
  FOR EACH STATEMENT EXECUTE FUNCTION {sched_del_fn}();

DROP TRIGGER IF EXISTS {sched_upd_trg} ON {jobs};

CREATE TRIGGER {sched_upd_trg} AFTER UPDATE ON {jobs} REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION {sched_upd_fn}();

-- The jobs already stored; CREATE TRIGGER locked the jobs table against
-- writes until this migration commits.
DELETE FROM {counts} WHERE state LIKE 'at:%';

INSERT INTO {counts} (queue, state, shard, n) SELECT queue, 'at:' || (run_at / 300000000), 0, COUNT(*) FROM {jobs}
  WHERE state = 'pending' AND run_at > updated_at GROUP BY 1, 2;

UPDATE {meta} SET value = '5' WHERE name = 'schema_version';
