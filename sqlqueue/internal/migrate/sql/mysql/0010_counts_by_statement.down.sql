-- 0010_counts_by_statement down: the triggers count every row again.
DROP TRIGGER IF EXISTS {count_del_trg};

CREATE TRIGGER {count_del_trg} AFTER DELETE ON {jobs} FOR EACH ROW
  INSERT INTO {counts} (queue, state, shard, n) VALUES (OLD.queue, OLD.state, CONNECTION_ID(), -1) ON DUPLICATE KEY UPDATE n = n - 1;

DROP TRIGGER IF EXISTS {count_upd_trg};

CREATE TRIGGER {count_upd_trg} AFTER UPDATE ON {jobs} FOR EACH ROW BEGIN IF OLD.state <> NEW.state OR OLD.queue <> NEW.queue THEN
  INSERT INTO {counts} (queue, state, shard, n) VALUES (OLD.queue, OLD.state, CONNECTION_ID(), -1), (NEW.queue, NEW.state, CONNECTION_ID(), 1)
  ON DUPLICATE KEY UPDATE n = n + VALUES(n); END IF; END;

UPDATE {meta} SET value = '9' WHERE name = 'schema_version';
