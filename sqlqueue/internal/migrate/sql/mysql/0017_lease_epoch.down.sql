-- 0017_lease_epoch down: drops the leases' fencing epochs.
ALTER TABLE {meta} DROP COLUMN epoch;

UPDATE {meta} SET value = '16' WHERE name = 'schema_version';
