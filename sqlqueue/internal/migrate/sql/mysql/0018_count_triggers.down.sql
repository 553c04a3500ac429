-- 0018_count_triggers down: no trigger counts, as after 0016; the
-- statements of the previous release count what they write. Stop the
-- processes of this release first (theirs would go uncounted), then
-- start the previous release's. The jobs are counted anew at the end,
-- writers held off meanwhile, so the counts are exact for it.
DROP TRIGGER IF EXISTS {count_ins_trg};

DROP TRIGGER IF EXISTS {count_del_trg};

DROP TRIGGER IF EXISTS {count_upd_trg};

LOCK TABLES {jobs} WRITE, {counts} WRITE;

DELETE FROM {counts};

INSERT INTO {counts} (queue, state, shard, n) SELECT queue, state, 0, COUNT(*) FROM {jobs} GROUP BY queue, state;

INSERT INTO {counts} (queue, state, shard, n) SELECT queue, CONCAT('at:', run_at DIV 300000000), 0, COUNT(*) FROM {jobs}
  WHERE state = 'pending' AND run_at > updated_at GROUP BY 1, 2;

UNLOCK TABLES;

UPDATE {meta} SET value = '17' WHERE name = 'schema_version';
