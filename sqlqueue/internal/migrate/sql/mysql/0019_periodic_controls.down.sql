-- 0019_periodic_controls down: no paused schedules and no job templates;
-- a paused schedule ticks again.
ALTER TABLE {periodic} DROP COLUMN template;

ALTER TABLE {periodic} DROP COLUMN paused;

UPDATE {meta} SET value = '18' WHERE name = 'schema_version';
