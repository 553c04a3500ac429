-- 0025_results: job results (queue.SetResult, driver.Results), kept apart
-- from the jobs so that a result outlives its job's deletion at ack:
-- written with a done job's ack when its handler set one, read by job ID,
-- pruned by the maintenance once expires_us has passed. A BLOB holds
-- driver.MaxResultBytes.
CREATE TABLE IF NOT EXISTS {results} (
  id VARCHAR(255) NOT NULL PRIMARY KEY,
  result BLOB NOT NULL,
  expires_us BIGINT NOT NULL,
  KEY {results_exp_idx} (expires_us)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

UPDATE {meta} SET value = '25' WHERE name = 'schema_version';
