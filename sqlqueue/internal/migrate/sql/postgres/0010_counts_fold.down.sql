-- 0009_counts_fold down: the state counts' functions of 0004 and the
-- scheduled-bucket triggers of 0005 again, the fillfactor of 0001 and the
-- list index of 0007 over every job.
-- The counts rows are kept: both shapes maintain the same rows.
CREATE OR REPLACE FUNCTION {count_ins_fn}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
  INSERT INTO {counts} AS c (queue, state, shard, n) SELECT queue, state, pg_backend_pid(), COUNT(*) FROM new_rows GROUP BY queue, state
  ON CONFLICT (queue, state, shard) DO UPDATE SET n = c.n + EXCLUDED.n; RETURN NULL; END $$;

CREATE OR REPLACE FUNCTION {count_del_fn}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
  INSERT INTO {counts} AS c (queue, state, shard, n) SELECT queue, state, pg_backend_pid(), -COUNT(*) FROM old_rows GROUP BY queue, state
  ON CONFLICT (queue, state, shard) DO UPDATE SET n = c.n + EXCLUDED.n; RETURN NULL; END $$;

CREATE OR REPLACE FUNCTION {count_upd_fn}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
  INSERT INTO {counts} AS c (queue, state, shard, n)
  SELECT queue, state, pg_backend_pid(), SUM(d) FROM (SELECT queue, state, 1 AS d FROM new_rows UNION ALL SELECT queue, state, -1 FROM old_rows) x
  GROUP BY queue, state HAVING SUM(d) <> 0
  ON CONFLICT (queue, state, shard) DO UPDATE SET n = c.n + EXCLUDED.n; RETURN NULL; END $$;

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

ALTER TABLE {jobs} SET (fillfactor = 50);

DROP INDEX IF EXISTS {list_idx};

CREATE INDEX IF NOT EXISTS {list_idx} ON {jobs} (state, queue, finished_at, seq);

UPDATE {meta} SET value = '9' WHERE name = 'schema_version';
