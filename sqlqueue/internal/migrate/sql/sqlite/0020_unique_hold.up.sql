-- 0019_unique_hold: uniqueness by state (queue.Unique(key, also...),
-- driver.Job.UniqueStates). unique_hold lists the finished states in
-- which a job keeps holding its unique key, as ",dead,done," (NULL: none,
-- every job that names no states); the unique index now covers a row
-- that is pending or in one of its own hold states. Only pushes of jobs
-- that name states write the column, so a release one version down
-- pushes and works against this table unchanged, and this release's
-- plain pushes work against the table one version down. The index keeps
-- the term state = 'pending', so the statements that look a key up among
-- pending jobs still use it.
-- SQLite has no ADD COLUMN IF NOT EXISTS: the runner skips an ALTER whose
-- column exists.
ALTER TABLE {jobs} ADD COLUMN unique_hold TEXT;

DROP INDEX IF EXISTS {unique_idx};

CREATE UNIQUE INDEX IF NOT EXISTS {unique_idx} ON {jobs} (queue, unique_key)
  WHERE unique_key IS NOT NULL AND (state = 'pending' OR instr(unique_hold, ',' || state || ',') > 0);

UPDATE {meta} SET value = '20' WHERE name = 'schema_version';
