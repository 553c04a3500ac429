-- 0022_ack_counts: MariaDB's batch ack counts the jobs it deletes itself,
-- one counter upsert for the whole ack instead of one per job. The delete
-- trigger skips the rows a session deletes while the session variable
-- @meridian_acks_counted is set: sqlqueue sets it around its own batch
-- ack (DELETE ... RETURNING each job's queue, state and scheduled bucket,
-- then one upsert of what they took from the counts, in the same
-- transaction), clears it before the commit, and discards a connection on
-- which clearing it failed. Every other statement, and every other
-- session's (a statement by hand, a process of another release), is
-- counted by the trigger as before, so the counts stay exact whatever
-- writes the table. On MySQL 8 (no DELETE ... RETURNING) the variable is
-- never set and nothing changes.
--
-- Writers of the previous release may keep running: they never set the
-- variable. Stop them before a down migration past this one only if they
-- are of this release (their acks would go uncounted). Idempotent.
DROP TRIGGER IF EXISTS {count_del_trg};

CREATE TRIGGER {count_del_trg} AFTER DELETE ON {jobs} FOR EACH ROW IF @meridian_acks_counted IS NULL THEN
  INSERT INTO {counts} (queue, state, shard, n) VALUES (OLD.queue, OLD.state, CONNECTION_ID(), -1) ON DUPLICATE KEY UPDATE n = n - 1; IF OLD.state = 'pending' AND OLD.run_at > OLD.updated_at THEN
  INSERT INTO {counts} (queue, state, shard, n) VALUES (OLD.queue, CONCAT('at:', OLD.run_at DIV 300000000), CONNECTION_ID(), -1) ON DUPLICATE KEY UPDATE n = n - 1; END IF; END IF;

UPDATE {meta} SET value = '22' WHERE name = 'schema_version';
