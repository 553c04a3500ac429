-- 0022_lease_fn down: the batch lease statements of version 21 read
-- unnest directly; the function goes.
DROP FUNCTION IF EXISTS {leases_fn}(TEXT[], TEXT[]);

UPDATE {meta} SET value = '21' WHERE name = 'schema_version';
