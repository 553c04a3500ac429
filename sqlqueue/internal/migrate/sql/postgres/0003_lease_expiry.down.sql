-- 0003_lease_expiry down: see the up file.
UPDATE {meta} SET value = '2' WHERE name = 'schema_version';
