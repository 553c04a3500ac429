-- 0005_counts down: drops the counting triggers and the counts.
DROP TRIGGER IF EXISTS {count_upd_trg};

DROP TRIGGER IF EXISTS {count_del_trg};

DROP TRIGGER IF EXISTS {count_ins_trg};

DROP TABLE IF EXISTS {counts};

UPDATE {meta} SET value = '4' WHERE name = 'schema_version';
