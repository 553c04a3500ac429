CREATE TABLE IF NOT EXISTS "meridian_v1" (
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
);

ALTER TABLE "meridian_v1" SET (fillfactor = 50, autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_threshold = 1000,
  autovacuum_vacuum_insert_scale_factor = 0.01, autovacuum_analyze_scale_factor = 0.02, autovacuum_vacuum_cost_delay = 0);

CREATE INDEX IF NOT EXISTS "meridian_v1_claim" ON "meridian_v1" (queue, priority DESC, run_at, seq) WHERE state = 'pending';

CREATE UNIQUE INDEX IF NOT EXISTS "meridian_v1_unique" ON "meridian_v1" (queue, unique_key) WHERE state = 'pending' AND unique_key IS NOT NULL;

CREATE INDEX IF NOT EXISTS "meridian_v1_state" ON "meridian_v1" (state, queue, seq);

CREATE INDEX IF NOT EXISTS "meridian_v1_finished" ON "meridian_v1" (state, finished_at) WHERE state <> 'pending';

CREATE TABLE IF NOT EXISTS "meridian_v1_pauses" (queue TEXT PRIMARY KEY, paused_at BIGINT NOT NULL);

CREATE TABLE IF NOT EXISTS "meridian_v1_workers" (
  id TEXT PRIMARY KEY,
  host TEXT NOT NULL,
  pid INTEGER NOT NULL,
  queues TEXT NOT NULL,
  concurrency INTEGER NOT NULL,
  started_at BIGINT NOT NULL,
  last_seen BIGINT NOT NULL
);

CREATE TABLE IF NOT EXISTS "meridian_v1_metrics" (
  queue TEXT NOT NULL,
  minute_at BIGINT NOT NULL,
  processed BIGINT NOT NULL,
  failed BIGINT NOT NULL,
  runtime_total_us BIGINT NOT NULL,
  runtime_max_us BIGINT NOT NULL,
  wait_total_us BIGINT NOT NULL,
  PRIMARY KEY (queue, minute_at)
);

CREATE TABLE IF NOT EXISTS "meridian_v1_meta" (name TEXT PRIMARY KEY, value TEXT NOT NULL, expires_at BIGINT NOT NULL);

INSERT INTO "meridian_v1_meta" (name, value, expires_at) VALUES ('schema_version', '1', 0) ON CONFLICT DO NOTHING;

INSERT INTO "meridian_v1_meta" (name, value, expires_at) VALUES ('maintenance_leader', '', 0) ON CONFLICT DO NOTHING;

