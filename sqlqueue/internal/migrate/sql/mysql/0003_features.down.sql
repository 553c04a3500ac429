-- 0003_features down: drops periodic records, UniqueFor holds, snooze
-- counts and retry deadlines, and deletes cancelled jobs (version 2 has no
-- such state).
DELETE FROM {jobs} WHERE state = 'cancelled';

DROP TABLE IF EXISTS {uniques};

DROP TABLE IF EXISTS {periodic};

ALTER TABLE {jobs} DROP COLUMN retry_until, DROP COLUMN snoozes;

ALTER TABLE {jobs} MODIFY state VARCHAR(8) NOT NULL;

UPDATE {meta} SET value = '2' WHERE name = 'schema_version';
