-- 0023_uncounted_claims: a claim no longer runs the counting function of
-- the jobs table's update trigger.
--
-- A claim changes no state and no queue, and the only bucket it can take
-- a job out of (a job written to run later, claimed once due, see
-- 0005_scheduled) is the current one or one that has passed, which
-- Counts never reads: it reads the buckets after the current one and
-- counts the current one's waiting jobs on the claim index. So whatever
-- the function would add for a claim is never read, yet it ran for every
-- claim: at 1,000 jobs a second some 40 us of a one-job claim's 250, its
-- statement alone 13 us (run AY in docs/benchmarks-history.md).
--
-- The trigger now skips statements whose text begins with the claim's
-- mark (the claim statement of this release, sqlqueue's pgUncounted):
-- their function call and statement are skipped, though the transition
-- tables are still filled (a WHEN cannot spare that). Every other update
-- is counted as before. A job claimed from a bucket stays counted in it
-- until the maintenance pass drops the rows of buckets more than an hour
-- past.
-- Replacing the trigger takes the table's SHARE ROW EXCLUSIVE lock until
-- this migration commits, so no update is counted by both or neither.
DROP TRIGGER IF EXISTS {count_upd_trg} ON {jobs};

CREATE TRIGGER {count_upd_trg} AFTER UPDATE ON {jobs} REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
  FOR EACH STATEMENT WHEN (NOT starts_with(current_query(), '/* meridian: a claim, counted by no trigger */'))
  EXECUTE FUNCTION {count_upd_fn}();

UPDATE {meta} SET value = '23' WHERE name = 'schema_version';
