-- 0019_unique_hold down: finished jobs hold no unique keys again; the
-- states jobs named are dropped.
DROP INDEX IF EXISTS {unique_idx};

CREATE UNIQUE INDEX IF NOT EXISTS {unique_idx} ON {jobs} (queue, unique_key) WHERE state = 'pending' AND unique_key IS NOT NULL;

ALTER TABLE {jobs} DROP COLUMN unique_hold;

UPDATE {meta} SET value = '19' WHERE name = 'schema_version';
