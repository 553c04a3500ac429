-- 0022_sequences down: the sequences are dropped (waiting members stay in
-- state 'sequenced', which this version down does not claim).
DROP TABLE IF EXISTS {sequence_jobs};

DROP TABLE IF EXISTS {sequences};

UPDATE {meta} SET value = '21' WHERE name = 'schema_version';
