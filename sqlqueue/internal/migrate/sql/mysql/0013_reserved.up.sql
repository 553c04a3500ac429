-- 0013_reserved: PLACEHOLDER on branch finidx only, not to be merged. The
-- runner needs contiguous versions and another branch writes the real
-- 0013; drop this file pair when merging onto it (two names for 0013
-- make the runner fail loudly, so it cannot be forgotten).
UPDATE {meta} SET value = '13' WHERE name = 'schema_version';
