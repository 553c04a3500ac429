-- 0014_finished_index down: the (state, finished_at) index again, built
-- in place from the table (error 1061 if a run cut short already added
-- it, which the runner skips).
ALTER TABLE {jobs} ADD KEY {finished_idx} (state, finished_at);

UPDATE {meta} SET value = '13' WHERE name = 'schema_version';
