-- 0016_run_metrics down: back to per-queue minutes in {metrics}; the
-- metrics recorded since the upgrade are dropped.
CREATE TABLE IF NOT EXISTS {metrics} (
  queue TEXT NOT NULL,
  minute_at INTEGER NOT NULL,
  processed INTEGER NOT NULL,
  failed INTEGER NOT NULL,
  runtime_total_us INTEGER NOT NULL,
  runtime_max_us INTEGER NOT NULL,
  wait_total_us INTEGER NOT NULL,
  PRIMARY KEY (queue, minute_at)
);

DROP TABLE IF EXISTS {run_metrics};

UPDATE {meta} SET value = '15' WHERE name = 'schema_version';
