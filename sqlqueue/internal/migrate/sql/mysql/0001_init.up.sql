-- 0001_init: the jobs table and its indexes, pauses, workers, per-minute
-- metrics, and the meta table that records the schema version.
--
-- MySQL and MariaDB commit each DDL statement on its own, so every
-- statement here is idempotent: a run cut short is completed by running
-- the file again. The version row is written last.
CREATE TABLE IF NOT EXISTS {jobs} (
  id VARCHAR(255) NOT NULL,
  seq BIGINT NOT NULL AUTO_INCREMENT,
  queue VARCHAR(255) NOT NULL,
  name VARCHAR(255) NOT NULL,
  payload LONGBLOB NOT NULL,
  priority INT NOT NULL,
  attempts INT NOT NULL,
  max_attempts INT NOT NULL,
  timeout_us BIGINT NOT NULL,
  unique_key VARCHAR(255) NULL,
  tags TEXT NOT NULL,
  meta TEXT NOT NULL,
  available_at BIGINT NOT NULL,
  run_at BIGINT NOT NULL,
  created_at BIGINT NOT NULL,
  updated_at BIGINT NOT NULL,
  finished_at BIGINT NOT NULL,
  last_error TEXT NOT NULL,
  lease_token VARCHAR(64) NULL,
  state VARCHAR(8) NOT NULL,
  active_key VARCHAR(255) GENERATED ALWAYS AS (CASE WHEN state = 'pending' THEN unique_key END) STORED,
  PRIMARY KEY (id),
  UNIQUE KEY {seq_idx} (seq),
  KEY {claim_idx} (queue, state, priority DESC, run_at, seq),
  UNIQUE KEY {unique_idx} (queue, active_key),
  KEY {state_idx} (state, queue, seq),
  KEY {finished_idx} (state, finished_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE IF NOT EXISTS {pauses} (queue VARCHAR(255) NOT NULL PRIMARY KEY, paused_at BIGINT NOT NULL) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE IF NOT EXISTS {workers} (
  id VARCHAR(255) NOT NULL PRIMARY KEY,
  host VARCHAR(255) NOT NULL,
  pid INT NOT NULL,
  queues TEXT NOT NULL,
  concurrency INT NOT NULL,
  started_at BIGINT NOT NULL,
  last_seen BIGINT NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE IF NOT EXISTS {metrics} (
  queue VARCHAR(255) NOT NULL,
  minute_at BIGINT NOT NULL,
  processed BIGINT NOT NULL,
  failed BIGINT NOT NULL,
  runtime_total_us BIGINT NOT NULL,
  runtime_max_us BIGINT NOT NULL,
  wait_total_us BIGINT NOT NULL,
  PRIMARY KEY (queue, minute_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE IF NOT EXISTS {meta} (name VARCHAR(64) NOT NULL PRIMARY KEY, value VARCHAR(255) NOT NULL, expires_at BIGINT NOT NULL) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

INSERT IGNORE INTO {meta} (name, value, expires_at) VALUES ('maintenance_leader', '', 0);

INSERT INTO {meta} (name, value, expires_at) VALUES ('schema_version', '1', 0)
  ON DUPLICATE KEY UPDATE value = VALUES(value);
