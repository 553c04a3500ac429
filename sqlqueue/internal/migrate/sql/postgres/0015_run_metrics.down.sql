-- 0015_run_metrics down: back to per-queue minutes in {metrics}; the
-- metrics recorded since the upgrade are dropped.
CREATE TABLE IF NOT EXISTS {metrics} (
  queue TEXT NOT NULL,
  minute_at BIGINT NOT NULL,
  processed BIGINT NOT NULL,
  failed BIGINT NOT NULL,
  runtime_total_us BIGINT NOT NULL,
  runtime_max_us BIGINT NOT NULL,
  wait_total_us BIGINT NOT NULL,
  PRIMARY KEY (queue, minute_at)
);

DROP TABLE IF EXISTS {run_metrics};

UPDATE {meta} SET value = '14' WHERE name = 'schema_version';
