-- 0016_count_changes down: the update and delete triggers of 0012 count
-- every changed row again (the statements of this release count them too
-- until the binary is rolled back: roll the binary back first). The
-- triggers skip the rows of a batch ack of an older release, which sets
-- @meridian_counted_by_statement and counts its jobs itself.
DROP TRIGGER IF EXISTS {count_del_trg};

CREATE TRIGGER {count_del_trg} AFTER DELETE ON {jobs} FOR EACH ROW IF @meridian_counted_by_statement IS NULL OR (OLD.state = 'pending' AND OLD.run_at > OLD.updated_at) THEN IF @meridian_counted_by_statement IS NULL THEN
  INSERT INTO {counts} (queue, state, shard, n) VALUES (OLD.queue, OLD.state, CONNECTION_ID(), -1) ON DUPLICATE KEY UPDATE n = n - 1; END IF; IF OLD.state = 'pending' AND OLD.run_at > OLD.updated_at THEN
  INSERT INTO {counts} (queue, state, shard, n) VALUES (OLD.queue, CONCAT('at:', OLD.run_at DIV 300000000), CONNECTION_ID(), -1) ON DUPLICATE KEY UPDATE n = n - 1; END IF; END IF;

DROP TRIGGER IF EXISTS {count_upd_trg};

CREATE TRIGGER {count_upd_trg} AFTER UPDATE ON {jobs} FOR EACH ROW IF ((OLD.state <> NEW.state OR OLD.queue <> NEW.queue) AND @meridian_counted_by_statement IS NULL)
  OR (OLD.state = 'pending' AND OLD.run_at > OLD.updated_at) OR (NEW.state = 'pending' AND NEW.run_at > NEW.updated_at) THEN IF (OLD.state <> NEW.state OR OLD.queue <> NEW.queue) AND @meridian_counted_by_statement IS NULL THEN
  INSERT INTO {counts} (queue, state, shard, n) VALUES (OLD.queue, OLD.state, CONNECTION_ID(), -1), (NEW.queue, NEW.state, CONNECTION_ID(), 1)
  ON DUPLICATE KEY UPDATE n = n + VALUES(n); END IF; IF OLD.state = 'pending' AND OLD.run_at > OLD.updated_at THEN
  INSERT INTO {counts} (queue, state, shard, n) VALUES (OLD.queue, CONCAT('at:', OLD.run_at DIV 300000000), CONNECTION_ID(), -1) ON DUPLICATE KEY UPDATE n = n - 1; END IF; IF NEW.state = 'pending' AND NEW.run_at > NEW.updated_at THEN
  INSERT INTO {counts} (queue, state, shard, n) VALUES (NEW.queue, CONCAT('at:', NEW.run_at DIV 300000000), CONNECTION_ID(), 1) ON DUPLICATE KEY UPDATE n = n + 1; END IF; END IF;

UPDATE {meta} SET value = '15' WHERE name = 'schema_version';
