-- 0023_uncounted_claims down: the update trigger counts every update
-- again, claims included. Under version 23 a bucket kept the jobs claimed
-- from it until the maintenance pass dropped it, and version 22 prunes
-- only the rows that are zero, so the buckets are counted afresh from the
-- jobs table; the trigger's lock keeps writers out until this commits.
DROP TRIGGER IF EXISTS {count_upd_trg} ON {jobs};

CREATE TRIGGER {count_upd_trg} AFTER UPDATE ON {jobs} REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION {count_upd_fn}();

DELETE FROM {counts} WHERE state LIKE 'at:%';

INSERT INTO {counts} (queue, state, shard, n)
  SELECT queue, 'at:' || (run_at / 300000000), 0, COUNT(*) FROM {jobs} WHERE state = 'pending' AND run_at > updated_at GROUP BY 1, 2;

UPDATE {meta} SET value = '22' WHERE name = 'schema_version';
