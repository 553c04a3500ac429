-- 0010_counts_by_statement: the batch acks count their own jobs, one
-- counter upsert per queue and transaction instead of one per row (each
-- of which took the counter row's lock and the gap before it, the
-- deadlocks between acks and pushes). The delete and update triggers skip
-- the rows changed while the session variable @meridian_counted_by_statement
-- is set: sqlqueue sets it in its own batch-ack transaction, locks and
-- reads the jobs it finishes (with their queues), finishes them, adds the
-- counts and clears the variable before the commit; a connection on which
-- clearing it failed is discarded. Every other statement, and any other
-- session's, is counted by the triggers as before.
DROP TRIGGER IF EXISTS {count_del_trg};

CREATE TRIGGER {count_del_trg} AFTER DELETE ON {jobs} FOR EACH ROW BEGIN IF @meridian_counted_by_statement IS NULL THEN
  INSERT INTO {counts} (queue, state, shard, n) VALUES (OLD.queue, OLD.state, CONNECTION_ID(), -1) ON DUPLICATE KEY UPDATE n = n - 1; END IF; END;

DROP TRIGGER IF EXISTS {count_upd_trg};

CREATE TRIGGER {count_upd_trg} AFTER UPDATE ON {jobs} FOR EACH ROW BEGIN IF (OLD.state <> NEW.state OR OLD.queue <> NEW.queue) AND @meridian_counted_by_statement IS NULL THEN
  INSERT INTO {counts} (queue, state, shard, n) VALUES (OLD.queue, OLD.state, CONNECTION_ID(), -1), (NEW.queue, NEW.state, CONNECTION_ID(), 1)
  ON DUPLICATE KEY UPDATE n = n + VALUES(n); END IF; END;

UPDATE {meta} SET value = '10' WHERE name = 'schema_version';
