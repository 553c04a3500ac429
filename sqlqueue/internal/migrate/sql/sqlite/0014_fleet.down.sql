-- 0014_fleet down: drops the fleet's commands.
DROP TABLE IF EXISTS {fleet};

UPDATE {meta} SET value = '13' WHERE name = 'schema_version';
