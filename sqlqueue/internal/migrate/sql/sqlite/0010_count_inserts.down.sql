-- 0010_count_inserts down: the insert triggers of 0004 and 0005 count
-- every inserted row again (pushes still count their own jobs until the
-- binary is rolled back too: roll the binary back first).
CREATE TRIGGER IF NOT EXISTS {count_ins_trg} AFTER INSERT ON {jobs} BEGIN
  INSERT INTO {counts} (queue, state, shard, n) VALUES (NEW.queue, NEW.state, 0, 1) ON CONFLICT (queue, state, shard) DO UPDATE SET n = n + 1; END;

CREATE TRIGGER IF NOT EXISTS {sched_ins_trg} AFTER INSERT ON {jobs}
  WHEN NEW.state = 'pending' AND NEW.run_at > NEW.updated_at BEGIN
  INSERT INTO {counts} (queue, state, shard, n) VALUES (NEW.queue, 'at:' || (NEW.run_at / 300000000), 0, 1) ON CONFLICT (queue, state, shard) DO UPDATE SET n = n + 1; END;

UPDATE {meta} SET value = '9' WHERE name = 'schema_version';
