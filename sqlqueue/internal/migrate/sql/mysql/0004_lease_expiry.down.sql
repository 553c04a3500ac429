-- 0004_lease_expiry down: see the up file.
UPDATE {meta} SET value = '3' WHERE name = 'schema_version';
