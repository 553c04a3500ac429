-- 0006_scheduled down: drops the scheduled-bucket triggers and their rows
-- of the counts table.
DROP TRIGGER IF EXISTS {sched_upd_trg};

DROP TRIGGER IF EXISTS {sched_del_trg};

DROP TRIGGER IF EXISTS {sched_ins_trg};

DELETE FROM {counts} WHERE state LIKE 'at:%';

UPDATE {meta} SET value = '5' WHERE name = 'schema_version';
