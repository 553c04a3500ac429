-- 0004_counts down: drops the counting triggers, their functions and the
-- counts.
DROP TRIGGER IF EXISTS {count_upd_trg} ON {jobs};

DROP TRIGGER IF EXISTS {count_del_trg} ON {jobs};

DROP TRIGGER IF EXISTS {count_ins_trg} ON {jobs};

DROP FUNCTION IF EXISTS {count_upd_fn}();

DROP FUNCTION IF EXISTS {count_del_fn}();

DROP FUNCTION IF EXISTS {count_ins_fn}();

DROP TABLE IF EXISTS {counts};

UPDATE {meta} SET value = '3' WHERE name = 'schema_version';
