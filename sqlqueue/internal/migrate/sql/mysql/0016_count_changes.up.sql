-- 0016_count_changes: no trigger counts an update or a delete of a job;
-- the statements count what they change, as pushes count what they insert
-- since 0015. The update and delete triggers of 0012 fired on every row a
-- claim, a start mark or an ack wrote, to find in most cases that it had
-- nothing to count: a burn-down's work phase ran 13% faster without them
-- (docs/benchmarks.md, run S). sqlqueue now counts every UPDATE and DELETE
-- of jobs in the statement's transaction: the claim the scheduled jobs it
-- takes, the batch ack the jobs it finishes, and every other change by
-- locking and reading the rows before it and reading them again after it.
--
-- A job changed by a process of an older release after this migration is
-- not counted: stop the old processes first, as for 0010, 0012 and 0015.
-- Rows changed by hand are not counted either (docs/operations.md names
-- the statements that count again). Idempotent.
DROP TRIGGER IF EXISTS {count_upd_trg};

DROP TRIGGER IF EXISTS {count_del_trg};

UPDATE {meta} SET value = '16' WHERE name = 'schema_version';
