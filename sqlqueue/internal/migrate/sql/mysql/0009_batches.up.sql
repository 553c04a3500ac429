-- 0009_batches: batches (queue.Batch). One row per batch with its
-- counters, its callback jobs (encoded) and the moments its callbacks
-- came due; one row per member with where it stands. A member's outcome,
-- the batch's counters and a callback's push are one transaction, and a
-- callback is pushed only by the transaction whose conditional UPDATE of
-- its *_at column wins (see sqlqueue/batch.go). seq orders the list. IDs
-- are VARBINARY like the jobs table's, compared byte for byte.
CREATE TABLE IF NOT EXISTS {batches} (
  id VARBINARY(255) NOT NULL,
  seq BIGINT NOT NULL AUTO_INCREMENT,
  name VARCHAR(255) NOT NULL,
  allow_failures INT NOT NULL,
  callbacks LONGTEXT NOT NULL,
  total BIGINT NOT NULL,
  done BIGINT NOT NULL,
  failed BIGINT NOT NULL,
  cancelled BIGINT NOT NULL,
  created_at BIGINT NOT NULL,
  updated_at BIGINT NOT NULL,
  cancelled_at BIGINT NOT NULL,
  then_at BIGINT NOT NULL,
  catch_at BIGINT NOT NULL,
  finished_at BIGINT NOT NULL,
  PRIMARY KEY (id),
  UNIQUE KEY {batches_seq_idx} (seq),
  KEY {batches_finished_idx} (finished_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE IF NOT EXISTS {batch_jobs} (
  batch_id VARBINARY(255) NOT NULL,
  job_id VARBINARY(1020) NOT NULL,
  state VARCHAR(16) NOT NULL,
  PRIMARY KEY (batch_id, job_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

UPDATE {meta} SET value = '9' WHERE name = 'schema_version';
