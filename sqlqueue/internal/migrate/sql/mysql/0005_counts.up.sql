-- 0005_counts: per-queue counts of jobs by stored state ('pending', which
-- is ready, scheduled and running; 'done', 'dead', 'cancelled'), kept by
-- triggers so that every way a job changes state counts and the dashboard
-- reads a few rows instead of counting the jobs table. MySQL and MariaDB
-- have only row triggers: each row a statement inserts, deletes or moves
-- between states or queues adds one to a counter row; an UPDATE that
-- changes neither (a claim, an extend, a nack) only tests the IF. The two
-- rows of a move are upserted in (queue, state) order, so transactions
-- lock counter rows in one order. Creating a trigger needs the TRIGGER
-- privilege (and, with binary logging on, SUPER or
-- log_bin_trust_function_creators).
CREATE TABLE IF NOT EXISTS {counts} (
  queue VARCHAR(255) NOT NULL,
  state VARCHAR(16) NOT NULL,
  n BIGINT NOT NULL,
  PRIMARY KEY (queue, state)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

DROP TRIGGER IF EXISTS {count_ins_trg};

CREATE TRIGGER {count_ins_trg} AFTER INSERT ON {jobs} FOR EACH ROW
  INSERT INTO {counts} (queue, state, n) VALUES (NEW.queue, NEW.state, 1) ON DUPLICATE KEY UPDATE n = n + 1;

DROP TRIGGER IF EXISTS {count_del_trg};

CREATE TRIGGER {count_del_trg} AFTER DELETE ON {jobs} FOR EACH ROW
  INSERT INTO {counts} (queue, state, n) VALUES (OLD.queue, OLD.state, -1) ON DUPLICATE KEY UPDATE n = n - 1;

DROP TRIGGER IF EXISTS {count_upd_trg};

CREATE TRIGGER {count_upd_trg} AFTER UPDATE ON {jobs} FOR EACH ROW BEGIN IF OLD.state <> NEW.state OR OLD.queue <> NEW.queue THEN
  INSERT INTO {counts} (queue, state, n)
  SELECT m.queue, m.state, m.d FROM (SELECT OLD.queue AS queue, OLD.state AS state, -1 AS d UNION ALL SELECT NEW.queue, NEW.state, 1) m
  ORDER BY m.queue, m.state ON DUPLICATE KEY UPDATE n = n + VALUES(n); END IF; END;

-- The counts of the jobs already stored. MySQL's DDL is not
-- transactional: run this migration while no process writes the queue.
DELETE FROM {counts};

INSERT INTO {counts} (queue, state, n) SELECT queue, state, COUNT(*) FROM {jobs} GROUP BY queue, state;

UPDATE {meta} SET value = '5' WHERE name = 'schema_version';
