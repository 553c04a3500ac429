-- 0009_counts_by_statement: the batch acks count their own jobs, one
-- counter upsert per queue and statement instead of one per row. The
-- delete and update triggers skip the rows of a statement made while the
-- flag row (state 'by-statement', shard -1) is in the counts table: sqlqueue
-- inserts it in its own write transaction, finishes the jobs with DELETE (or
-- UPDATE) ... RETURNING their queues, deletes the flag and adds the counts
-- it returned, before the commit. SQLite has one writer, so no other
-- connection ever sees the flag, and every other statement (any other
-- program's too) is counted by the triggers as before.
DROP TRIGGER IF EXISTS {count_del_trg};

CREATE TRIGGER IF NOT EXISTS {count_del_trg} AFTER DELETE ON {jobs}
  WHEN NOT EXISTS (SELECT 1 FROM {counts} WHERE queue = '' AND state = 'by-statement' AND shard = -1) BEGIN
  INSERT INTO {counts} (queue, state, shard, n) VALUES (OLD.queue, OLD.state, 0, -1) ON CONFLICT (queue, state, shard) DO UPDATE SET n = n - 1; END;

DROP TRIGGER IF EXISTS {count_upd_trg};

CREATE TRIGGER IF NOT EXISTS {count_upd_trg} AFTER UPDATE OF state, queue ON {jobs}
  WHEN (OLD.state <> NEW.state OR OLD.queue <> NEW.queue)
  AND NOT EXISTS (SELECT 1 FROM {counts} WHERE queue = '' AND state = 'by-statement' AND shard = -1) BEGIN
  INSERT INTO {counts} (queue, state, shard, n) VALUES (OLD.queue, OLD.state, 0, -1) ON CONFLICT (queue, state, shard) DO UPDATE SET n = n - 1; INSERT INTO {counts} (queue, state, shard, n) VALUES (NEW.queue, NEW.state, 0, 1) ON CONFLICT (queue, state, shard) DO UPDATE SET n = n + 1; END;

UPDATE {meta} SET value = '9' WHERE name = 'schema_version';
