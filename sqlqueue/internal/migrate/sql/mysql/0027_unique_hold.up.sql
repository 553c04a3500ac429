-- 0026_unique_hold: uniqueness by state (queue.Unique(key, also...),
-- driver.Job.UniqueStates). unique_hold lists the finished states in
-- which a job keeps holding its unique key, as ",dead,done," (NULL: none,
-- every job that names no states); the generated active_key, which the
-- unique index covers, now holds the key of a row that is pending or in
-- one of its own hold states. Only pushes of jobs that name states write
-- the column, so a release one version down pushes and works against
-- this table unchanged, and this release's plain pushes work against the
-- table one version down.
--
-- Redefining a stored generated column rebuilds the table: on a large
-- table, expect the ALTER to take a while (docs/operations.md).
-- MySQL 8 has no ADD COLUMN IF NOT EXISTS: the runner skips an ALTER whose
-- column exists. The MODIFY states the final column, so it is idempotent.
ALTER TABLE {jobs} ADD COLUMN unique_hold VARCHAR(64) NULL;

ALTER TABLE {jobs}
  MODIFY active_key VARBINARY(1020) GENERATED ALWAYS AS (CASE WHEN state = 'pending' OR LOCATE(CONCAT(',', state, ','), unique_hold) > 0 THEN unique_key END) STORED;

UPDATE {meta} SET value = '27' WHERE name = 'schema_version';
