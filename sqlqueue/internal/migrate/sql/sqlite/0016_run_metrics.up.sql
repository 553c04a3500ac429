-- 0016_run_metrics: run metrics per queue and job name, per minute (span_s
-- 60, kept a day) and per hour (span_s 3600, kept seven days), each with
-- its runtimes counted in the 24 log-scale buckets of
-- driver.RuntimeHistogram (rt0 to rt23), from which the p50 and p95
-- runtimes are read. They replace the per-queue minutes of {metrics},
-- whose rows are not carried over: the charts start afresh on upgrade.
CREATE TABLE IF NOT EXISTS {run_metrics} (
  span_s INTEGER NOT NULL,
  at_s INTEGER NOT NULL,
  queue TEXT NOT NULL,
  name TEXT NOT NULL,
  processed INTEGER NOT NULL,
  failed INTEGER NOT NULL,
  runtime_total_us INTEGER NOT NULL,
  runtime_max_us INTEGER NOT NULL,
  wait_total_us INTEGER NOT NULL,
  rt0 INTEGER NOT NULL,
  rt1 INTEGER NOT NULL,
  rt2 INTEGER NOT NULL,
  rt3 INTEGER NOT NULL,
  rt4 INTEGER NOT NULL,
  rt5 INTEGER NOT NULL,
  rt6 INTEGER NOT NULL,
  rt7 INTEGER NOT NULL,
  rt8 INTEGER NOT NULL,
  rt9 INTEGER NOT NULL,
  rt10 INTEGER NOT NULL,
  rt11 INTEGER NOT NULL,
  rt12 INTEGER NOT NULL,
  rt13 INTEGER NOT NULL,
  rt14 INTEGER NOT NULL,
  rt15 INTEGER NOT NULL,
  rt16 INTEGER NOT NULL,
  rt17 INTEGER NOT NULL,
  rt18 INTEGER NOT NULL,
  rt19 INTEGER NOT NULL,
  rt20 INTEGER NOT NULL,
  rt21 INTEGER NOT NULL,
  rt22 INTEGER NOT NULL,
  rt23 INTEGER NOT NULL,
  PRIMARY KEY (span_s, at_s, queue, name)
);

DROP TABLE IF EXISTS {metrics};

UPDATE {meta} SET value = '16' WHERE name = 'schema_version';
