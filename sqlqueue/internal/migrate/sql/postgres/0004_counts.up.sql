-- 0004_counts: per-queue counts of jobs by stored state ('pending', which
-- is ready, scheduled and running; 'done', 'dead', 'cancelled'), kept by
-- the database itself so that every way a job changes state (a push in the
-- caller's transaction, COPY, a batch ack, pruning) counts, and the
-- dashboard reads a few rows instead of counting the jobs table.
--
-- Statement-level triggers with transition tables: one upsert per queue
-- and state per statement, not per job. An UPDATE that changes no state
-- or queue (a claim, an extend, a nack) adds nothing: its old and new
-- rows cancel out and HAVING drops them. Rows are upserted in (queue,
-- state) order, so two statements lock counter rows in the same order.
CREATE TABLE IF NOT EXISTS {counts} (
  queue TEXT NOT NULL,
  state TEXT NOT NULL,
  n BIGINT NOT NULL,
  PRIMARY KEY (queue, state)
);

CREATE OR REPLACE FUNCTION {count_ins_fn}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
  INSERT INTO {counts} AS c (queue, state, n) SELECT queue, state, COUNT(*) FROM new_rows GROUP BY queue, state ORDER BY queue, state
  ON CONFLICT (queue, state) DO UPDATE SET n = c.n + EXCLUDED.n; RETURN NULL; END $$;

CREATE OR REPLACE FUNCTION {count_del_fn}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
  INSERT INTO {counts} AS c (queue, state, n) SELECT queue, state, -COUNT(*) FROM old_rows GROUP BY queue, state ORDER BY queue, state
  ON CONFLICT (queue, state) DO UPDATE SET n = c.n + EXCLUDED.n; RETURN NULL; END $$;

CREATE OR REPLACE FUNCTION {count_upd_fn}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
  INSERT INTO {counts} AS c (queue, state, n)
  SELECT queue, state, SUM(d) FROM (SELECT queue, state, 1 AS d FROM new_rows UNION ALL SELECT queue, state, -1 FROM old_rows) x
  GROUP BY queue, state HAVING SUM(d) <> 0 ORDER BY queue, state
  ON CONFLICT (queue, state) DO UPDATE SET n = c.n + EXCLUDED.n; RETURN NULL; END $$;

DROP TRIGGER IF EXISTS {count_ins_trg} ON {jobs};

CREATE TRIGGER {count_ins_trg} AFTER INSERT ON {jobs} REFERENCING NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION {count_ins_fn}();

DROP TRIGGER IF EXISTS {count_del_trg} ON {jobs};

CREATE TRIGGER {count_del_trg} AFTER DELETE ON {jobs} REFERENCING OLD TABLE AS old_rows
  FOR EACH STATEMENT EXECUTE FUNCTION {count_del_fn}();

DROP TRIGGER IF EXISTS {count_upd_trg} ON {jobs};

CREATE TRIGGER {count_upd_trg} AFTER UPDATE ON {jobs} REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION {count_upd_fn}();

-- The counts of the jobs already stored. CREATE TRIGGER locked the jobs
-- table against writes until this migration commits, so none is missed or
-- counted twice.
DELETE FROM {counts};

INSERT INTO {counts} (queue, state, n) SELECT queue, state, COUNT(*) FROM {jobs} GROUP BY queue, state;

UPDATE {meta} SET value = '4' WHERE name = 'schema_version';
