-- 0004_counts: per-queue counts of jobs by stored state ('pending', which
-- is ready, scheduled and running; 'done', 'dead', 'cancelled'), kept by
-- triggers so that every way a job changes state counts and the dashboard
-- reads a few rows instead of counting the jobs table. SQLite has only
-- row triggers: each row a statement inserts, deletes or moves between
-- states or queues adds one to a counter row; an UPDATE that changes
-- neither (a claim, an extend, a nack) does not fire (WHEN). Writes are
-- serialised by SQLite's one writer, so counter rows are never contended.
CREATE TABLE IF NOT EXISTS {counts} (
  queue TEXT NOT NULL,
  state TEXT NOT NULL,
  n INTEGER NOT NULL,
  PRIMARY KEY (queue, state)
) WITHOUT ROWID;

CREATE TRIGGER IF NOT EXISTS {count_ins_trg} AFTER INSERT ON {jobs} BEGIN
  INSERT INTO {counts} (queue, state, n) VALUES (NEW.queue, NEW.state, 1) ON CONFLICT (queue, state) DO UPDATE SET n = n + 1; END;

CREATE TRIGGER IF NOT EXISTS {count_del_trg} AFTER DELETE ON {jobs} BEGIN
  INSERT INTO {counts} (queue, state, n) VALUES (OLD.queue, OLD.state, -1) ON CONFLICT (queue, state) DO UPDATE SET n = n - 1; END;

CREATE TRIGGER IF NOT EXISTS {count_upd_trg} AFTER UPDATE OF state, queue ON {jobs}
  WHEN OLD.state <> NEW.state OR OLD.queue <> NEW.queue BEGIN
  INSERT INTO {counts} (queue, state, n) VALUES (OLD.queue, OLD.state, -1) ON CONFLICT (queue, state) DO UPDATE SET n = n - 1; INSERT INTO {counts} (queue, state, n) VALUES (NEW.queue, NEW.state, 1) ON CONFLICT (queue, state) DO UPDATE SET n = n + 1; END;

-- The counts of the jobs already stored, in this migration's transaction.
DELETE FROM {counts};

INSERT INTO {counts} (queue, state, n) SELECT queue, state, COUNT(*) FROM {jobs} GROUP BY queue, state;

UPDATE {meta} SET value = '4' WHERE name = 'schema_version';
