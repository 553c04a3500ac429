-- 0017_monitored_tags: the monitored tags (driver.TagMonitor) and the
-- records of their jobs, kept apart from the jobs table's retention: per
-- tag, the recent list (list 0) and the failed one (list 1), each trimmed
-- to the last driver.MaxTaggedJobs records by at_us.
CREATE TABLE IF NOT EXISTS {tags} (
  tag TEXT NOT NULL PRIMARY KEY,
  since_us INTEGER NOT NULL
);

CREATE TABLE IF NOT EXISTS {tag_jobs} (
  tag TEXT NOT NULL,
  list INTEGER NOT NULL,
  id TEXT NOT NULL,
  queue TEXT NOT NULL,
  name TEXT NOT NULL,
  state TEXT NOT NULL,
  at_us INTEGER NOT NULL,
  attempts INTEGER NOT NULL,
  error TEXT NOT NULL,
  PRIMARY KEY (tag, list, id)
);

CREATE INDEX IF NOT EXISTS {tag_jobs_at_idx} ON {tag_jobs} (tag, list, at_us, id);

UPDATE {meta} SET value = '17' WHERE name = 'schema_version';
