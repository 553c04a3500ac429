-- 0008_list_index down: back to (state, queue, seq).
ALTER TABLE {jobs} ADD KEY {state_idx} (state, queue, seq), DROP KEY {list_idx};

UPDATE {meta} SET value = '7' WHERE name = 'schema_version';
