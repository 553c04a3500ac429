-- 0018_count_triggers: the store counts itself again, as on PostgreSQL
-- and SQLite. Since 0015 and 0016 sqlqueue's statements counted what they
-- inserted, changed and deleted, so a write that did not go through them
-- (a statement by hand, a future write path that forgot, a process of
-- another release) went uncounted. Row triggers count every row now, in
-- the statement that writes it; sqlqueue counts nothing itself.
--
-- The triggers act only when a row's count moves: an insert counts its
-- state (and its scheduled bucket when it runs later), a delete likewise
-- with -1, and an update only when its queue, its state or its scheduled
-- bucket changes; a claim, a start mark or an extend of a job due now
-- only tests the IF (MySQL has no WHEN clause). Each connection adds to
-- rows of its own (shard: CONNECTION_ID(), see 0005).
--
-- Processes of the previous release count in Go: stop them before this
-- migration (their writes would be counted twice) and start processes of
-- this release after it. Processes of this release running while the
-- tables are at an older version go uncounted until this migration runs
-- again: it counts the jobs table anew at its end, holding writers off
-- meanwhile (LOCK TABLES), so the counts are exact afterwards. Creating
-- triggers needs the TRIGGER privilege (with binary logging on, also
-- SUPER or log_bin_trust_function_creators), the recount LOCK TABLES.
-- Idempotent.
DROP TRIGGER IF EXISTS {count_ins_trg};

CREATE TRIGGER {count_ins_trg} AFTER INSERT ON {jobs} FOR EACH ROW BEGIN
  INSERT INTO {counts} (queue, state, shard, n) VALUES (NEW.queue, NEW.state, CONNECTION_ID(), 1) ON DUPLICATE KEY UPDATE n = n + 1; IF NEW.state = 'pending' AND NEW.run_at > NEW.updated_at THEN
  INSERT INTO {counts} (queue, state, shard, n) VALUES (NEW.queue, CONCAT('at:', NEW.run_at DIV 300000000), CONNECTION_ID(), 1) ON DUPLICATE KEY UPDATE n = n + 1; END IF; END;

DROP TRIGGER IF EXISTS {count_del_trg};

CREATE TRIGGER {count_del_trg} AFTER DELETE ON {jobs} FOR EACH ROW BEGIN
  INSERT INTO {counts} (queue, state, shard, n) VALUES (OLD.queue, OLD.state, CONNECTION_ID(), -1) ON DUPLICATE KEY UPDATE n = n - 1; IF OLD.state = 'pending' AND OLD.run_at > OLD.updated_at THEN
  INSERT INTO {counts} (queue, state, shard, n) VALUES (OLD.queue, CONCAT('at:', OLD.run_at DIV 300000000), CONNECTION_ID(), -1) ON DUPLICATE KEY UPDATE n = n - 1; END IF; END;

DROP TRIGGER IF EXISTS {count_upd_trg};

CREATE TRIGGER {count_upd_trg} AFTER UPDATE ON {jobs} FOR EACH ROW IF OLD.state <> NEW.state OR OLD.queue <> NEW.queue
  OR (OLD.state = 'pending' AND OLD.run_at > OLD.updated_at) OR (NEW.state = 'pending' AND NEW.run_at > NEW.updated_at) THEN IF OLD.state <> NEW.state OR OLD.queue <> NEW.queue THEN
  INSERT INTO {counts} (queue, state, shard, n) VALUES (OLD.queue, OLD.state, CONNECTION_ID(), -1), (NEW.queue, NEW.state, CONNECTION_ID(), 1)
  ON DUPLICATE KEY UPDATE n = n + VALUES(n); END IF; IF OLD.state = 'pending' AND OLD.run_at > OLD.updated_at THEN
  INSERT INTO {counts} (queue, state, shard, n) VALUES (OLD.queue, CONCAT('at:', OLD.run_at DIV 300000000), CONNECTION_ID(), -1) ON DUPLICATE KEY UPDATE n = n - 1; END IF; IF NEW.state = 'pending' AND NEW.run_at > NEW.updated_at THEN
  INSERT INTO {counts} (queue, state, shard, n) VALUES (NEW.queue, CONCAT('at:', NEW.run_at DIV 300000000), CONNECTION_ID(), 1) ON DUPLICATE KEY UPDATE n = n + 1; END IF; END IF;

-- The jobs as they are now, counted anew while no other session writes
-- them: LOCK TABLES waits for the transactions that use the tables to end
-- and holds new ones off until UNLOCK TABLES. Every change before it was
-- made under the triggers above or is in the table it reads.
LOCK TABLES {jobs} WRITE, {counts} WRITE;

DELETE FROM {counts};

INSERT INTO {counts} (queue, state, shard, n) SELECT queue, state, 0, COUNT(*) FROM {jobs} GROUP BY queue, state;

INSERT INTO {counts} (queue, state, shard, n) SELECT queue, CONCAT('at:', run_at DIV 300000000), 0, COUNT(*) FROM {jobs}
  WHERE state = 'pending' AND run_at > updated_at GROUP BY 1, 2;

UNLOCK TABLES;

UPDATE {meta} SET value = '18' WHERE name = 'schema_version';
