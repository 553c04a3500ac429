-- 0005_scheduled down: drops the scheduled-bucket triggers, their
-- functions and their rows of the counts table.
DROP TRIGGER IF EXISTS {sched_upd_trg} ON {jobs};

DROP TRIGGER IF EXISTS {sched_del_trg} ON {jobs};

DROP TRIGGER IF EXISTS {sched_ins_trg} ON {jobs};

DROP FUNCTION IF EXISTS {sched_upd_fn}();

DROP FUNCTION IF EXISTS {sched_del_fn}();

DROP FUNCTION IF EXISTS {sched_ins_fn}();

DELETE FROM {counts} WHERE state LIKE 'at:%';

UPDATE {meta} SET value = '4' WHERE name = 'schema_version';
