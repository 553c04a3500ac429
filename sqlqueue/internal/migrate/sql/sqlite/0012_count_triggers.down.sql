-- 0012_count_triggers down: no trigger counts inserted rows, as after
-- 0010; the pushes of the previous release count them. Stop the processes
-- of this release first (their inserts would go uncounted), then start
-- the previous release's. The jobs are counted anew in this transaction.
DROP TRIGGER IF EXISTS {count_ins_trg};

DROP TRIGGER IF EXISTS {sched_ins_trg};

DELETE FROM {counts};

INSERT INTO {counts} (queue, state, shard, n) SELECT queue, state, 0, COUNT(*) FROM {jobs} GROUP BY queue, state;

INSERT INTO {counts} (queue, state, shard, n) SELECT queue, 'at:' || (run_at / 300000000), 0, COUNT(*) FROM {jobs}
  WHERE state = 'pending' AND run_at > updated_at GROUP BY 1, 2;

UPDATE {meta} SET value = '11' WHERE name = 'schema_version';
