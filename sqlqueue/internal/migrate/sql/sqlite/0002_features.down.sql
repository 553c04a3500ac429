-- 0002_features down: drops periodic records, UniqueFor holds, snooze
-- counts and retry deadlines, and deletes cancelled jobs (version 1 has no
-- such state).
DELETE FROM {jobs} WHERE state = 'cancelled';

DROP TABLE IF EXISTS {uniques};

DROP TABLE IF EXISTS {periodic};

ALTER TABLE {jobs} DROP COLUMN retry_until;

ALTER TABLE {jobs} DROP COLUMN snoozes;

UPDATE {meta} SET value = '1' WHERE name = 'schema_version';
