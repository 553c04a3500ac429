-- 0022_ack_counts down: the delete trigger counts every row again, as
-- after 0018. Stop the processes of the release that set
-- @meridian_acks_counted first: their acks would go uncounted.
DROP TRIGGER IF EXISTS {count_del_trg};

CREATE TRIGGER {count_del_trg} AFTER DELETE ON {jobs} FOR EACH ROW BEGIN
  INSERT INTO {counts} (queue, state, shard, n) VALUES (OLD.queue, OLD.state, CONNECTION_ID(), -1) ON DUPLICATE KEY UPDATE n = n - 1; IF OLD.state = 'pending' AND OLD.run_at > OLD.updated_at THEN
  INSERT INTO {counts} (queue, state, shard, n) VALUES (OLD.queue, CONCAT('at:', OLD.run_at DIV 300000000), CONNECTION_ID(), -1) ON DUPLICATE KEY UPDATE n = n - 1; END IF; END;

UPDATE {meta} SET value = '21' WHERE name = 'schema_version';
