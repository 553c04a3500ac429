-- 0017_results down: the job results are dropped.
DROP TABLE IF EXISTS {results};

UPDATE {meta} SET value = '16' WHERE name = 'schema_version';
