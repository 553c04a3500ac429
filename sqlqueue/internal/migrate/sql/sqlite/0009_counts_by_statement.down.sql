-- 0009_counts_by_statement down: the triggers count every row again.
DROP TRIGGER IF EXISTS {count_del_trg};

CREATE TRIGGER IF NOT EXISTS {count_del_trg} AFTER DELETE ON {jobs} BEGIN
  INSERT INTO {counts} (queue, state, shard, n) VALUES (OLD.queue, OLD.state, 0, -1) ON CONFLICT (queue, state, shard) DO UPDATE SET n = n - 1; END;

DROP TRIGGER IF EXISTS {count_upd_trg};

CREATE TRIGGER IF NOT EXISTS {count_upd_trg} AFTER UPDATE OF state, queue ON {jobs}
  WHEN OLD.state <> NEW.state OR OLD.queue <> NEW.queue BEGIN
  INSERT INTO {counts} (queue, state, shard, n) VALUES (OLD.queue, OLD.state, 0, -1) ON CONFLICT (queue, state, shard) DO UPDATE SET n = n - 1; INSERT INTO {counts} (queue, state, shard, n) VALUES (NEW.queue, NEW.state, 0, 1) ON CONFLICT (queue, state, shard) DO UPDATE SET n = n + 1; END;

UPDATE {meta} SET value = '8' WHERE name = 'schema_version';
