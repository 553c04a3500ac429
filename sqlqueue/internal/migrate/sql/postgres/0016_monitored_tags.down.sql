-- 0016_monitored_tags down: the monitored tags and their records are dropped.
DROP TABLE IF EXISTS {tag_jobs};
DROP TABLE IF EXISTS {tags};

UPDATE {meta} SET value = '15' WHERE name = 'schema_version';
