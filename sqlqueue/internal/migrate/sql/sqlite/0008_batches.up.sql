-- 0008_batches: batches (queue.Batch). One row per batch with its
-- counters, its callback jobs (encoded) and the moments its callbacks
-- came due; one row per member with where it stands. A member's outcome,
-- the batch's counters and a callback's push are one transaction, and a
-- callback is pushed only by the transaction whose conditional UPDATE of
-- its *_at column wins (see sqlqueue/batch.go). seq orders the list.
CREATE TABLE IF NOT EXISTS {batches} (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  id TEXT NOT NULL UNIQUE,
  name TEXT NOT NULL,
  allow_failures INTEGER NOT NULL,
  callbacks TEXT NOT NULL,
  total INTEGER NOT NULL,
  done INTEGER NOT NULL,
  failed INTEGER NOT NULL,
  cancelled INTEGER NOT NULL,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  cancelled_at INTEGER NOT NULL,
  then_at INTEGER NOT NULL,
  catch_at INTEGER NOT NULL,
  finished_at INTEGER NOT NULL
);

CREATE INDEX IF NOT EXISTS {batches_finished_idx} ON {batches} (finished_at) WHERE finished_at > 0;

CREATE TABLE IF NOT EXISTS {batch_jobs} (
  batch_id TEXT NOT NULL,
  job_id TEXT NOT NULL,
  state TEXT NOT NULL,
  PRIMARY KEY (batch_id, job_id)
);

UPDATE {meta} SET value = '8' WHERE name = 'schema_version';
