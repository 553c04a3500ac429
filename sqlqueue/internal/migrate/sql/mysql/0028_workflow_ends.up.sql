-- 0028_workflow_ends: when a graph finished, and results kept while their
-- graph or batch runs. finished_at is 0 while a graph has a waiting or
-- pending node; the maintenance sets it once none is left (and back to 0
-- on RetryGraph), and prunes the graph, its nodes and its edges a
-- retention after it. A done node's (or pending batch member's) result is
-- stored with expires_us at the far end of time and keep_us, the result
-- retention its Worker gave it; when the graph or batch finishes,
-- expires_us becomes that moment plus keep_us. Both columns default to 0,
-- so a release one version down writes and reads these tables unchanged.
-- MySQL 8 has no ADD COLUMN IF NOT EXISTS: the runner skips an ALTER whose
-- column (or key) exists.
ALTER TABLE {graphs} ADD COLUMN finished_at BIGINT NOT NULL DEFAULT 0;

ALTER TABLE {graphs} ADD KEY {graphs_finished_idx} (finished_at);

ALTER TABLE {results} ADD COLUMN keep_us BIGINT NOT NULL DEFAULT 0;

UPDATE {meta} SET value = '28' WHERE name = 'schema_version';
