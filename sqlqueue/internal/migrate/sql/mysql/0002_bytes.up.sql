-- 0002_bytes: IDs, queue names and unique keys compare byte for byte.
--
-- utf8mb4_bin is a PAD SPACE collation: it ignores trailing spaces, so
-- "emails " matched a Reserve of "emails" and the unique key "k " was a
-- duplicate of "k". VARBINARY compares every byte on MySQL and MariaDB
-- alike (MariaDB's utf8mb4_nopad_bin does not exist on MySQL). 1020 bytes
-- hold the 255 four-byte characters VARCHAR(255) held, so no stored value
-- is cut.
--
-- Each ALTER is idempotent (it states the final column), as MySQL commits
-- DDL statement by statement; the version row is written last.
ALTER TABLE {jobs}
  MODIFY id VARBINARY(1020) NOT NULL,
  MODIFY queue VARBINARY(1020) NOT NULL,
  MODIFY unique_key VARBINARY(1020) NULL,
  MODIFY active_key VARBINARY(1020) GENERATED ALWAYS AS (CASE WHEN state = 'pending' THEN unique_key END) STORED;

ALTER TABLE {pauses} MODIFY queue VARBINARY(1020) NOT NULL;

ALTER TABLE {metrics} MODIFY queue VARBINARY(1020) NOT NULL;

UPDATE {meta} SET value = '2' WHERE name = 'schema_version';
