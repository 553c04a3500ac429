-- 0029_sequences: sequences per key (queue.Sequence, driver.Sequencer).
-- One row per sequence with members (queue and key), naming its head: the
-- one member a claim may take (pending) or the dead letter that holds it.
-- One row per waiting member (its job in state 'sequenced'), in push order
-- by pos. A push of a member locks its sequence's row; the end of a head
-- and the promotion of the next member are one transaction with the
-- head's ack (see sqlqueue/sequence.go). Jobs outside sequences touch
-- neither table. Keys compare byte for byte, as the jobs table's.
CREATE TABLE IF NOT EXISTS {sequences} (
  queue VARCHAR(255) NOT NULL,
  seq_key VARCHAR(255) NOT NULL,
  head_id VARCHAR(255) NOT NULL,
  PRIMARY KEY (queue, seq_key),
  UNIQUE KEY {sequences_head_idx} (head_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE IF NOT EXISTS {sequence_jobs} (
  pos BIGINT NOT NULL AUTO_INCREMENT,
  queue VARCHAR(255) NOT NULL,
  seq_key VARCHAR(255) NOT NULL,
  job_id VARCHAR(255) NOT NULL,
  PRIMARY KEY (pos),
  KEY {sequence_jobs_key_idx} (queue, seq_key, pos),
  UNIQUE KEY {sequence_jobs_job_idx} (job_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

UPDATE {meta} SET value = '29' WHERE name = 'schema_version';
