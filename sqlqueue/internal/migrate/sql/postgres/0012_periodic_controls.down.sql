-- 0012_periodic_controls down: no paused schedules and no job templates;
-- a paused schedule ticks again.
ALTER TABLE {periodic} DROP COLUMN IF EXISTS template;

ALTER TABLE {periodic} DROP COLUMN IF EXISTS paused;

UPDATE {meta} SET value = '11' WHERE name = 'schema_version';
