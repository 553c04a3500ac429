CREATE TABLE IF NOT EXISTS `meridian_v1` (
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
  UNIQUE KEY `meridian_v1_seq` (seq),
  KEY `meridian_v1_claim` (queue, state, priority DESC, run_at, seq),
  UNIQUE KEY `meridian_v1_unique` (queue, active_key),
  KEY `meridian_v1_state` (state, queue, seq),
  KEY `meridian_v1_finished` (state, finished_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE IF NOT EXISTS `meridian_v1_pauses` (queue VARCHAR(255) NOT NULL PRIMARY KEY, paused_at BIGINT NOT NULL) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE IF NOT EXISTS `meridian_v1_workers` (
  id VARCHAR(255) NOT NULL PRIMARY KEY,
  host VARCHAR(255) NOT NULL,
  pid INT NOT NULL,
  queues TEXT NOT NULL,
  concurrency INT NOT NULL,
  started_at BIGINT NOT NULL,
  last_seen BIGINT NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE IF NOT EXISTS `meridian_v1_metrics` (
  queue VARCHAR(255) NOT NULL,
  minute_at BIGINT NOT NULL,
  processed BIGINT NOT NULL,
  failed BIGINT NOT NULL,
  runtime_total_us BIGINT NOT NULL,
  runtime_max_us BIGINT NOT NULL,
  wait_total_us BIGINT NOT NULL,
  PRIMARY KEY (queue, minute_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE IF NOT EXISTS `meridian_v1_meta` (name VARCHAR(64) NOT NULL PRIMARY KEY, value VARCHAR(255) NOT NULL, expires_at BIGINT NOT NULL) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

INSERT IGNORE INTO `meridian_v1_meta` (name, value, expires_at) VALUES ('schema_version', '1', 0);

INSERT IGNORE INTO `meridian_v1_meta` (name, value, expires_at) VALUES ('maintenance_leader', '', 0);

