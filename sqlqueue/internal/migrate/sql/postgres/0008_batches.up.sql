-- 0008_batches: batches (queue.Batch). One row per batch with its
-- counters, its callback jobs (encoded) and the moments its callbacks
-- came due; one row per member with where it stands. A member's outcome,
-- the batch's counters and a callback's push are one transaction, and a
-- callback is pushed only by the transaction whose conditional UPDATE of
-- its *_at column wins (see sqlqueue/batch.go).
--
-- The batch row is updated once per finished member: pages half full keep
-- those updates HOT (no indexed column changes).
CREATE TABLE IF NOT EXISTS {batches} (
  id TEXT PRIMARY KEY,
  seq BIGINT GENERATED ALWAYS AS IDENTITY,
  name TEXT NOT NULL,
  allow_failures INTEGER NOT NULL,
  callbacks TEXT NOT NULL,
  total BIGINT NOT NULL,
  done BIGINT NOT NULL,
  failed BIGINT NOT NULL,
  cancelled BIGINT NOT NULL,
  created_at BIGINT NOT NULL,
  updated_at BIGINT NOT NULL,
  cancelled_at BIGINT NOT NULL,
  then_at BIGINT NOT NULL,
  catch_at BIGINT NOT NULL,
  finished_at BIGINT NOT NULL
) WITH (fillfactor = 50);

CREATE UNIQUE INDEX IF NOT EXISTS {batches_seq_idx} ON {batches} (seq);

CREATE INDEX IF NOT EXISTS {batches_finished_idx} ON {batches} (finished_at) WHERE finished_at > 0;

CREATE TABLE IF NOT EXISTS {batch_jobs} (
  batch_id TEXT NOT NULL,
  job_id TEXT NOT NULL,
  state TEXT NOT NULL,
  PRIMARY KEY (batch_id, job_id)
);

UPDATE {meta} SET value = '8' WHERE name = 'schema_version';
