-- 0015_run_metrics: run metrics per queue and job name, per minute (span_s
-- 60, kept a day) and per hour (span_s 3600, kept seven days), each with
-- its runtimes counted in the 24 log-scale buckets of
-- driver.RuntimeHistogram (rt0 to rt23), from which the p50 and p95
-- runtimes are read. They replace the per-queue minutes of {metrics},
-- whose rows are not carried over: the charts start afresh on upgrade.
CREATE TABLE IF NOT EXISTS {run_metrics} (
  span_s BIGINT NOT NULL,
  at_s BIGINT NOT NULL,
  queue TEXT NOT NULL,
  name TEXT NOT NULL,
  processed BIGINT NOT NULL,
  failed BIGINT NOT NULL,
  runtime_total_us BIGINT NOT NULL,
  runtime_max_us BIGINT NOT NULL,
  wait_total_us BIGINT NOT NULL,
  rt0 BIGINT NOT NULL,
  rt1 BIGINT NOT NULL,
  rt2 BIGINT NOT NULL,
  rt3 BIGINT NOT NULL,
  rt4 BIGINT NOT NULL,
  rt5 BIGINT NOT NULL,
  rt6 BIGINT NOT NULL,
  rt7 BIGINT NOT NULL,
  rt8 BIGINT NOT NULL,
  rt9 BIGINT NOT NULL,
  rt10 BIGINT NOT NULL,
  rt11 BIGINT NOT NULL,
  rt12 BIGINT NOT NULL,
  rt13 BIGINT NOT NULL,
  rt14 BIGINT NOT NULL,
  rt15 BIGINT NOT NULL,
  rt16 BIGINT NOT NULL,
  rt17 BIGINT NOT NULL,
  rt18 BIGINT NOT NULL,
  rt19 BIGINT NOT NULL,
  rt20 BIGINT NOT NULL,
  rt21 BIGINT NOT NULL,
  rt22 BIGINT NOT NULL,
  rt23 BIGINT NOT NULL,
  PRIMARY KEY (span_s, at_s, queue, name)
);

DROP TABLE IF EXISTS {metrics};

UPDATE {meta} SET value = '15' WHERE name = 'schema_version';
