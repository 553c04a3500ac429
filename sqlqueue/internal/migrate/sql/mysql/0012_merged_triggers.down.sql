-- 0011_merged_triggers down: the state counts and the scheduled buckets
-- get a trigger each again, as 0006 and 0010 made them.
DROP TRIGGER IF EXISTS {count_ins_trg};

CREATE TRIGGER {count_ins_trg} AFTER INSERT ON {jobs} FOR EACH ROW
  INSERT INTO {counts} (queue, state, shard, n) VALUES (NEW.queue, NEW.state, CONNECTION_ID(), 1) ON DUPLICATE KEY UPDATE n = n + 1;

DROP TRIGGER IF EXISTS {sched_ins_trg};

CREATE TRIGGER {sched_ins_trg} AFTER INSERT ON {jobs} FOR EACH ROW BEGIN IF NEW.state = 'pending' AND NEW.run_at > NEW.updated_at THEN
  INSERT INTO {counts} (queue, state, shard, n) VALUES (NEW.queue, CONCAT('at:', NEW.run_at DIV 300000000), CONNECTION_ID(), 1) ON DUPLICATE KEY UPDATE n = n + 1; END IF; END;

DROP TRIGGER IF EXISTS {count_del_trg};

CREATE TRIGGER {count_del_trg} AFTER DELETE ON {jobs} FOR EACH ROW BEGIN IF @meridian_counted_by_statement IS NULL THEN
  INSERT INTO {counts} (queue, state, shard, n) VALUES (OLD.queue, OLD.state, CONNECTION_ID(), -1) ON DUPLICATE KEY UPDATE n = n - 1; END IF; END;

DROP TRIGGER IF EXISTS {sched_del_trg};

CREATE TRIGGER {sched_del_trg} AFTER DELETE ON {jobs} FOR EACH ROW BEGIN IF OLD.state = 'pending' AND OLD.run_at > OLD.updated_at THEN
  INSERT INTO {counts} (queue, state, shard, n) VALUES (OLD.queue, CONCAT('at:', OLD.run_at DIV 300000000), CONNECTION_ID(), -1) ON DUPLICATE KEY UPDATE n = n - 1; END IF; END;

DROP TRIGGER IF EXISTS {count_upd_trg};

CREATE TRIGGER {count_upd_trg} AFTER UPDATE ON {jobs} FOR EACH ROW BEGIN IF (OLD.state <> NEW.state OR OLD.queue <> NEW.queue) AND @meridian_counted_by_statement IS NULL THEN
  INSERT INTO {counts} (queue, state, shard, n) VALUES (OLD.queue, OLD.state, CONNECTION_ID(), -1), (NEW.queue, NEW.state, CONNECTION_ID(), 1)
  ON DUPLICATE KEY UPDATE n = n + VALUES(n); END IF; END;

DROP TRIGGER IF EXISTS {sched_upd_trg};

CREATE TRIGGER {sched_upd_trg} AFTER UPDATE ON {jobs} FOR EACH ROW BEGIN IF OLD.state = 'pending' AND OLD.run_at > OLD.updated_at THEN
  INSERT INTO {counts} (queue, state, shard, n) VALUES (OLD.queue, CONCAT('at:', OLD.run_at DIV 300000000), CONNECTION_ID(), -1) ON DUPLICATE KEY UPDATE n = n - 1; END IF; IF NEW.state = 'pending' AND NEW.run_at > NEW.updated_at THEN
  INSERT INTO {counts} (queue, state, shard, n) VALUES (NEW.queue, CONCAT('at:', NEW.run_at DIV 300000000), CONNECTION_ID(), 1) ON DUPLICATE KEY UPDATE n = n + 1; END IF; END;

UPDATE {meta} SET value = '11' WHERE name = 'schema_version';
