-- 0007_list_index down: back to (state, queue, seq).
CREATE INDEX IF NOT EXISTS {state_idx} ON {jobs} (state, queue, seq);

DROP INDEX IF EXISTS {list_idx};

UPDATE {meta} SET value = '6' WHERE name = 'schema_version';
