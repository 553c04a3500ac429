-- 0011_lease_epoch down: drops the leases' fencing epochs.
ALTER TABLE {meta} DROP COLUMN IF EXISTS epoch;

UPDATE {meta} SET value = '10' WHERE name = 'schema_version';
