-- 0016_monitored_tags: the monitored tags (driver.TagMonitor) and the
-- records of their jobs, kept apart from the jobs table's retention: per
-- tag, the recent list (list 0) and the failed one (list 1), each trimmed
-- to the last driver.MaxTaggedJobs records by at_us. Text compares by
-- bytes (COLLATE "C"), as Go orders the IDs of records of one time.
CREATE TABLE IF NOT EXISTS {tags} (
  tag TEXT COLLATE "C" NOT NULL PRIMARY KEY,
  since_us BIGINT NOT NULL
);

CREATE TABLE IF NOT EXISTS {tag_jobs} (
  tag TEXT COLLATE "C" NOT NULL,
  list SMALLINT NOT NULL,
  id TEXT COLLATE "C" NOT NULL,
  queue TEXT NOT NULL,
  name TEXT NOT NULL,
  state TEXT NOT NULL,
  at_us BIGINT NOT NULL,
  attempts INTEGER NOT NULL,
  error TEXT NOT NULL,
  PRIMARY KEY (tag, list, id)
);

CREATE INDEX IF NOT EXISTS {tag_jobs_at_idx} ON {tag_jobs} (tag, list, at_us, id);

UPDATE {meta} SET value = '16' WHERE name = 'schema_version';
