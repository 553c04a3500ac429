-- 0018_results down: the job results are dropped.
DROP TABLE IF EXISTS {results};

UPDATE {meta} SET value = '17' WHERE name = 'schema_version';
