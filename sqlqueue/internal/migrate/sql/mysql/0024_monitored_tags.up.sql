-- 0024_monitored_tags: the monitored tags (driver.TagMonitor) and the
-- records of their jobs, kept apart from the jobs table's retention: per
-- tag, the recent list (list 0) and the failed one (list 1), each trimmed
-- to the last driver.MaxTaggedJobs records by at_us. Each statement is
-- idempotent; the version row is written last.
CREATE TABLE IF NOT EXISTS {tags} (
  tag VARCHAR(255) NOT NULL PRIMARY KEY,
  since_us BIGINT NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE IF NOT EXISTS {tag_jobs} (
  tag VARCHAR(255) NOT NULL,
  list SMALLINT NOT NULL,
  id VARCHAR(255) NOT NULL,
  queue VARCHAR(255) NOT NULL,
  name VARCHAR(255) NOT NULL,
  state VARCHAR(16) NOT NULL,
  at_us BIGINT NOT NULL,
  attempts INT NOT NULL,
  error TEXT NOT NULL,
  PRIMARY KEY (tag, list, id),
  KEY {tag_jobs_at_idx} (tag, list, at_us, id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

UPDATE {meta} SET value = '24' WHERE name = 'schema_version';
