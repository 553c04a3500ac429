-- 0014_finished_index: drop the (state, finished_at) index. MySQL has no
-- partial indexes, so every job inserted an entry there at its push and
-- deleted it at its ack, like the other indexes, though only finished
-- jobs are ever read through it: about 8% of MariaDB's server CPU per job
-- on the burn-down (74.0 -> 68.3 ms per 1,000 jobs, docs/benchmarks.md).
-- Its readers (the prune of the maintenance pass, DeadSince and
-- CancelledSince) now step through the queues on the list index (state,
-- queue, finished_at, seq), one range per queue, the queues read from the
-- counts table; PostgreSQL and SQLite keep theirs, partial over finished
-- jobs, which costs a pending job nothing.
--
-- Dropping a secondary index is in place and changes only metadata (no
-- table copy, writes go on); the down migration builds it again, which
-- reads the whole table. Idempotent: a run cut short that already dropped
-- it gets error 1091, which the runner skips.
ALTER TABLE {jobs} DROP KEY {finished_idx};

UPDATE {meta} SET value = '14' WHERE name = 'schema_version';
