-- 0005_counts: per-queue counts of jobs by stored state ('pending', which
-- is ready, scheduled and running; 'done', 'dead', 'cancelled'), kept by
-- triggers so that every way a job changes state counts and the dashboard
-- reads a few rows instead of counting the jobs table. MySQL and MariaDB
-- have only row triggers: each row a statement inserts, deletes or moves
-- between states or queues adds one to a counter row; an UPDATE that
-- changes neither (a claim, an extend, a nack) only tests the IF.
--
-- Each connection adds to rows of its own (shard: CONNECTION_ID()), so no
-- two transactions wait on the same counter row: a long transaction that
-- dispatched a job holds only its own rows, never the queue's. A count is
-- the sum over the shards; the maintenance pass folds the rows of shards
-- no transaction holds into shard 0, which only it writes. Creating a
-- trigger needs the TRIGGER privilege (and, with binary logging on, SUPER
-- or log_bin_trust_function_creators).
-- queue has the jobs table's type (VARBINARY since 0002), so names that
-- differ in trailing spaces or bytes are counted apart.
--
-- Known risk: INSERT ... ON DUPLICATE KEY UPDATE locks the gap before the
-- key it meets, so concurrent pushes and acks can (rarely) deadlock on
-- the counts table; one in about a dozen runs of examples/mysql saw it.
-- A counts table left by an earlier shape of this migration (it never
-- shipped in a release) is replaced: the counts are recounted below anyway.
DROP TABLE IF EXISTS {counts};

CREATE TABLE IF NOT EXISTS {counts} (
  queue VARBINARY(1020) NOT NULL,
  state VARCHAR(16) NOT NULL,
  shard BIGINT NOT NULL,
  n BIGINT NOT NULL,
  PRIMARY KEY (queue, state, shard)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

DROP TRIGGER IF EXISTS {count_ins_trg};

CREATE TRIGGER {count_ins_trg} AFTER INSERT ON {jobs} FOR EACH ROW
  INSERT INTO {counts} (queue, state, shard, n) VALUES (NEW.queue, NEW.state, CONNECTION_ID(), 1) ON DUPLICATE KEY UPDATE n = n + 1;

DROP TRIGGER IF EXISTS {count_del_trg};

CREATE TRIGGER {count_del_trg} AFTER DELETE ON {jobs} FOR EACH ROW
  INSERT INTO {counts} (queue, state, shard, n) VALUES (OLD.queue, OLD.state, CONNECTION_ID(), -1) ON DUPLICATE KEY UPDATE n = n - 1;

DROP TRIGGER IF EXISTS {count_upd_trg};

CREATE TRIGGER {count_upd_trg} AFTER UPDATE ON {jobs} FOR EACH ROW BEGIN IF OLD.state <> NEW.state OR OLD.queue <> NEW.queue THEN
  INSERT INTO {counts} (queue, state, shard, n) VALUES (OLD.queue, OLD.state, CONNECTION_ID(), -1), (NEW.queue, NEW.state, CONNECTION_ID(), 1)
  ON DUPLICATE KEY UPDATE n = n + VALUES(n); END IF; END;

-- The counts of the jobs already stored. MySQL's DDL is not
-- transactional: run this migration while no process writes the queue.
DELETE FROM {counts};

INSERT INTO {counts} (queue, state, shard, n) SELECT queue, state, 0, COUNT(*) FROM {jobs} GROUP BY queue, state;

UPDATE {meta} SET value = '5' WHERE name = 'schema_version';
