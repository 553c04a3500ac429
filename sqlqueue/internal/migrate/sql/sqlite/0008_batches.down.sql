-- 0008_batches down: drops the batches and their members' records (the
-- member jobs stay, as ordinary jobs).
DROP TABLE IF EXISTS {batch_jobs};

DROP TABLE IF EXISTS {batches};

UPDATE {meta} SET value = '7' WHERE name = 'schema_version';
