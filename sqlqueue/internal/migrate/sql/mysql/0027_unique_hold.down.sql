-- 0026_unique_hold down: finished jobs hold no unique keys again; the
-- states jobs named are dropped.
ALTER TABLE {jobs}
  MODIFY active_key VARBINARY(1020) GENERATED ALWAYS AS (CASE WHEN state = 'pending' THEN unique_key END) STORED;

ALTER TABLE {jobs} DROP COLUMN unique_hold;

UPDATE {meta} SET value = '26' WHERE name = 'schema_version';
