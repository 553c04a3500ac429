-- 0002_bytes down: back to utf8mb4_bin text columns, which ignore trailing
-- spaces. It fails (and changes nothing of the failing table) when two
-- stored IDs, paused queues or metrics rows differ only in trailing spaces,
-- or a value is longer than 255 characters: remove those first.
ALTER TABLE {jobs}
  MODIFY id VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  MODIFY queue VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  MODIFY unique_key VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
  MODIFY active_key VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin GENERATED ALWAYS AS (CASE WHEN state = 'pending' THEN unique_key END) STORED;

ALTER TABLE {pauses} MODIFY queue VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL;

ALTER TABLE {metrics} MODIFY queue VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL;

UPDATE {meta} SET value = '1' WHERE name = 'schema_version';
