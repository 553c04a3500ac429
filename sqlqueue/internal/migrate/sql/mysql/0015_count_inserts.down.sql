-- 0015_count_inserts down: the insert trigger of 0012 counts every inserted
-- row again (pushes still count their own jobs until the binary is
-- rolled back too: roll the binary back first).
DROP TRIGGER IF EXISTS {count_ins_trg};

CREATE TRIGGER {count_ins_trg} AFTER INSERT ON {jobs} FOR EACH ROW BEGIN
  INSERT INTO {counts} (queue, state, shard, n) VALUES (NEW.queue, NEW.state, CONNECTION_ID(), 1) ON DUPLICATE KEY UPDATE n = n + 1; IF NEW.state = 'pending' AND NEW.run_at > NEW.updated_at THEN
  INSERT INTO {counts} (queue, state, shard, n) VALUES (NEW.queue, CONCAT('at:', NEW.run_at DIV 300000000), CONNECTION_ID(), 1) ON DUPLICATE KEY UPDATE n = n + 1; END IF; END;

UPDATE {meta} SET value = '14' WHERE name = 'schema_version';
