-- 0012_count_triggers: the store counts itself again, as on PostgreSQL
-- and MySQL (its 0017). Since 0010 the pushes counted the jobs they
-- inserted, so a row inserted any other way (by hand, by a process of
-- another release) went uncounted. One insert trigger now counts each
-- inserted row's state and, when it runs later, its scheduled bucket (the
-- two triggers of 0004 and 0005 in one body); updates and deletes are
-- counted by the triggers of 0004 and 0005 as before. sqlqueue counts
-- nothing itself.
--
-- Processes of the previous release count their inserts in Go: stop them
-- before this migration (their inserts would be counted twice) and start
-- processes of this release after it. The jobs are counted anew below, in
-- this migration's transaction (writers wait for it), so the counts are
-- exact afterwards whatever wrote meanwhile.
DROP TRIGGER IF EXISTS {sched_ins_trg};

DROP TRIGGER IF EXISTS {count_ins_trg};

CREATE TRIGGER {count_ins_trg} AFTER INSERT ON {jobs} BEGIN
  INSERT INTO {counts} (queue, state, shard, n) VALUES (NEW.queue, NEW.state, 0, 1) ON CONFLICT (queue, state, shard) DO UPDATE SET n = n + 1; INSERT INTO {counts} (queue, state, shard, n) SELECT NEW.queue, 'at:' || (NEW.run_at / 300000000), 0, 1 WHERE NEW.state = 'pending' AND NEW.run_at > NEW.updated_at ON CONFLICT (queue, state, shard) DO UPDATE SET n = n + 1; END;

DELETE FROM {counts};

INSERT INTO {counts} (queue, state, shard, n) SELECT queue, state, 0, COUNT(*) FROM {jobs} GROUP BY queue, state;

INSERT INTO {counts} (queue, state, shard, n) SELECT queue, 'at:' || (run_at / 300000000), 0, COUNT(*) FROM {jobs}
  WHERE state = 'pending' AND run_at > updated_at GROUP BY 1, 2;

UPDATE {meta} SET value = '12' WHERE name = 'schema_version';
