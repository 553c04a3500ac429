-- 0001_init: the jobs table and its indexes, pauses, workers, per-minute
-- metrics, and the meta table that records the schema version.
--
-- A queue table turns over its rows all the time: vacuum and analyze it
-- after a small fraction of changes, not autovacuum's default 20%, and
-- without throttling. Pages are filled to half, so that each row's claim
-- finds room on its own page for the new row version: a claim changes only
-- lease_expires_at, lease_token, attempts and updated_at, none of them
-- indexed, so with room it is a HOT update and writes no index entry.
CREATE TABLE IF NOT EXISTS {jobs} (
  id TEXT PRIMARY KEY,
  seq BIGINT GENERATED ALWAYS AS IDENTITY,
  queue TEXT NOT NULL,
  name TEXT NOT NULL,
  payload BYTEA NOT NULL,
  priority INTEGER NOT NULL,
  attempts INTEGER NOT NULL,
  max_attempts INTEGER NOT NULL,
  timeout_us BIGINT NOT NULL,
  unique_key TEXT,
  tags TEXT NOT NULL,
  meta TEXT NOT NULL,
  available_at BIGINT NOT NULL,
  run_at BIGINT NOT NULL,
  created_at BIGINT NOT NULL,
  updated_at BIGINT NOT NULL,
  finished_at BIGINT NOT NULL,
  last_error TEXT NOT NULL,
  lease_token TEXT,
  state TEXT NOT NULL,
  lease_expires_at BIGINT NOT NULL DEFAULT 0
) WITH (fillfactor = 50, autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_threshold = 1000,
  autovacuum_vacuum_insert_scale_factor = 0.01, autovacuum_analyze_scale_factor = 0.02, autovacuum_vacuum_cost_delay = 0);

CREATE INDEX IF NOT EXISTS {claim_idx} ON {jobs} (queue, priority DESC, run_at, seq) WHERE state = 'pending';

CREATE UNIQUE INDEX IF NOT EXISTS {unique_idx} ON {jobs} (queue, unique_key) WHERE state = 'pending' AND unique_key IS NOT NULL;

CREATE INDEX IF NOT EXISTS {state_idx} ON {jobs} (state, queue, seq);

CREATE INDEX IF NOT EXISTS {finished_idx} ON {jobs} (state, finished_at) WHERE state <> 'pending';

CREATE TABLE IF NOT EXISTS {pauses} (queue TEXT PRIMARY KEY, paused_at BIGINT NOT NULL);

CREATE TABLE IF NOT EXISTS {workers} (
  id TEXT PRIMARY KEY,
  host TEXT NOT NULL,
  pid INTEGER NOT NULL,
  queues TEXT NOT NULL,
  concurrency INTEGER NOT NULL,
  started_at BIGINT NOT NULL,
  last_seen BIGINT NOT NULL
);

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

CREATE TABLE IF NOT EXISTS {meta} (name TEXT PRIMARY KEY, value TEXT NOT NULL, expires_at BIGINT NOT NULL);

INSERT INTO {meta} (name, value, expires_at) VALUES ('maintenance_leader', '', 0) ON CONFLICT DO NOTHING;

INSERT INTO {meta} (name, value, expires_at) VALUES ('schema_version', '1', 0)
  ON CONFLICT (name) DO UPDATE SET value = EXCLUDED.value;
