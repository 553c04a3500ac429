-- 0017_results: job results (queue.SetResult, driver.Results), kept apart
-- from the jobs so that a result outlives its job's deletion at ack:
-- written with a done job's ack when its handler set one, read by job ID,
-- pruned by the maintenance once expires_us has passed.
CREATE TABLE IF NOT EXISTS {results} (
  id TEXT COLLATE "C" NOT NULL PRIMARY KEY,
  result BYTEA NOT NULL,
  expires_us BIGINT NOT NULL
);

CREATE INDEX IF NOT EXISTS {results_exp_idx} ON {results} (expires_us);

UPDATE {meta} SET value = '17' WHERE name = 'schema_version';
