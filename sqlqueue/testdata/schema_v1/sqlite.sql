CREATE TABLE IF NOT EXISTS "meridian_v1" (
  seq INTEGER PRIMARY KEY,
  id TEXT NOT NULL UNIQUE,
  queue TEXT NOT NULL,
  name TEXT NOT NULL,
  payload BLOB NOT NULL,
  priority INTEGER NOT NULL,
  attempts INTEGER NOT NULL,
  max_attempts INTEGER NOT NULL,
  timeout_us INTEGER NOT NULL,
  unique_key TEXT,
  tags TEXT NOT NULL,
  meta TEXT NOT NULL,
  available_at INTEGER NOT NULL,
  run_at INTEGER NOT NULL,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  finished_at INTEGER NOT NULL,
  last_error TEXT NOT NULL,
  lease_token TEXT,
  state TEXT NOT NULL
);

CREATE INDEX IF NOT EXISTS "meridian_v1_claim" ON "meridian_v1" (queue, priority DESC, run_at, seq) WHERE state = 'pending';

CREATE UNIQUE INDEX IF NOT EXISTS "meridian_v1_unique" ON "meridian_v1" (queue, unique_key) WHERE state = 'pending' AND unique_key IS NOT NULL;

CREATE INDEX IF NOT EXISTS "meridian_v1_state" ON "meridian_v1" (state, queue, seq);

CREATE INDEX IF NOT EXISTS "meridian_v1_finished" ON "meridian_v1" (state, finished_at) WHERE state <> 'pending';

CREATE TABLE IF NOT EXISTS "meridian_v1_pauses" (queue TEXT PRIMARY KEY, paused_at INTEGER NOT NULL);

CREATE TABLE IF NOT EXISTS "meridian_v1_workers" (
  id TEXT PRIMARY KEY,
  host TEXT NOT NULL,
  pid INTEGER NOT NULL,
  queues TEXT NOT NULL,
  concurrency INTEGER NOT NULL,
  started_at INTEGER NOT NULL,
  last_seen INTEGER NOT NULL
);

CREATE TABLE IF NOT EXISTS "meridian_v1_metrics" (
  queue TEXT NOT NULL,
  minute_at INTEGER NOT NULL,
  processed INTEGER NOT NULL,
  failed INTEGER NOT NULL,
  runtime_total_us INTEGER NOT NULL,
  runtime_max_us INTEGER NOT NULL,
  wait_total_us INTEGER NOT NULL,
  PRIMARY KEY (queue, minute_at)
);

CREATE TABLE IF NOT EXISTS "meridian_v1_meta" (name TEXT PRIMARY KEY, value TEXT NOT NULL, expires_at INTEGER NOT NULL);

INSERT OR IGNORE INTO "meridian_v1_meta" (name, value, expires_at) VALUES ('schema_version', '1', 0);

INSERT OR IGNORE INTO "meridian_v1_meta" (name, value, expires_at) VALUES ('maintenance_leader', '', 0);

