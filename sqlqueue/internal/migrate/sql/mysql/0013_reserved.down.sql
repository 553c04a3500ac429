-- 0013_reserved down: PLACEHOLDER (see the up file).
UPDATE {meta} SET value = '12' WHERE name = 'schema_version';
