-- 0015_count_inserts: the jobs a push inserts are counted by the push
-- itself, one upsert per queue (and per scheduled bucket) in the push's
-- transaction, instead of by a row trigger's upsert per job. Each firing
-- cost MariaDB about as much as the insert of a small job's row, which
-- made the queue phase of a burn-down (DispatchMany of 1,000 jobs) a
-- third slower (docs/benchmarks.md, run R). sqlqueue's pushes on MySQL
-- therefore always run in a transaction: on the pool one of their own,
-- inside the caller's otherwise. Deletes and updates are still counted
-- by the triggers of 0012.
--
-- A job inserted by a process of an older release after this migration
-- is not counted: stop the old writers first, as for 0010 and 0012. Rows
-- inserted by hand are not counted either (Queue.Recount counts again).
-- Idempotent.
DROP TRIGGER IF EXISTS {count_ins_trg};

UPDATE {meta} SET value = '15' WHERE name = 'schema_version';
