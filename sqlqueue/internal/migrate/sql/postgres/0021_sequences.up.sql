-- 0021_sequences: sequences per key (queue.Sequence, driver.Sequencer).
-- One row per sequence with members (queue and key), naming its head: the
-- one member a claim may take (pending) or the dead letter that holds it.
-- One row per waiting member (its job in state 'sequenced'), in push order
-- by pos. A push of a member locks its sequence's row; the end of a head
-- and the promotion of the next member are one transaction with the
-- head's ack (see sqlqueue/sequence.go). Jobs outside sequences touch
-- neither table.
CREATE TABLE IF NOT EXISTS {sequences} (
  queue TEXT NOT NULL,
  seq_key TEXT NOT NULL,
  head_id TEXT NOT NULL,
  PRIMARY KEY (queue, seq_key)
);

CREATE UNIQUE INDEX IF NOT EXISTS {sequences_head_idx} ON {sequences} (head_id);

CREATE TABLE IF NOT EXISTS {sequence_jobs} (
  pos BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  queue TEXT NOT NULL,
  seq_key TEXT NOT NULL,
  job_id TEXT NOT NULL
);

CREATE INDEX IF NOT EXISTS {sequence_jobs_key_idx} ON {sequence_jobs} (queue, seq_key, pos);

CREATE UNIQUE INDEX IF NOT EXISTS {sequence_jobs_job_idx} ON {sequence_jobs} (job_id);

UPDATE {meta} SET value = '21' WHERE name = 'schema_version';
