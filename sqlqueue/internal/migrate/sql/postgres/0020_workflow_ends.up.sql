-- 0020_workflow_ends: when a graph finished, and results kept while their
-- graph or batch runs. finished_at is 0 while a graph has a waiting or
-- pending node; the maintenance sets it once none is left (and back to 0
-- on RetryGraph), and prunes the graph, its nodes and its edges a
-- retention after it. A done node's (or pending batch member's) result is
-- stored with expires_us at the far end of time and keep_us, the result
-- retention its Worker gave it; when the graph or batch finishes,
-- expires_us becomes that moment plus keep_us. Both columns default to 0,
-- so a release one version down writes and reads these tables unchanged.
ALTER TABLE {graphs} ADD COLUMN IF NOT EXISTS finished_at BIGINT NOT NULL DEFAULT 0;

CREATE INDEX IF NOT EXISTS {graphs_finished_idx} ON {graphs} (finished_at);

ALTER TABLE {results} ADD COLUMN IF NOT EXISTS keep_us BIGINT NOT NULL DEFAULT 0;

UPDATE {meta} SET value = '20' WHERE name = 'schema_version';
