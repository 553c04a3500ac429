-- 0018_results: job results (queue.SetResult, driver.Results), kept apart
-- from the jobs so that a result outlives its job's deletion at ack:
-- written with a done job's ack when its handler set one, read by job ID,
-- pruned by the maintenance once expires_us has passed.
CREATE TABLE IF NOT EXISTS {results} (
  id TEXT NOT NULL PRIMARY KEY,
  result BLOB NOT NULL,
  expires_us INTEGER NOT NULL
);

CREATE INDEX IF NOT EXISTS {results_exp_idx} ON {results} (expires_us);

UPDATE {meta} SET value = '18' WHERE name = 'schema_version';
