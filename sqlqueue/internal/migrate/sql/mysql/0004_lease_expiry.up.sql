-- 0004_lease_expiry: reserved for the [reliability] branch's lease-expiry
-- column; on this branch it only records the version, so that the
-- migrations after it load. The [reliability] file replaces this one.
UPDATE {meta} SET value = '4' WHERE name = 'schema_version';
