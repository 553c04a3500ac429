-- 0009_counts_fold: the scheduled-bucket counts (0005_scheduled) are kept
-- by the state counts' own trigger functions (0004_counts), the jobs
-- table leaves more room on each page for the new row versions of claims
-- and start marks, and the list index holds finished jobs only.
--
-- One statement trigger per statement instead of two: each function reads
-- its transition tables once and adds, in one grouping-sets pass, the
-- per-state counts and the five-minute buckets of the jobs written to run
-- later, into the same counts rows as before (state 'at:<run_at /
-- 300000000>'), so the counts stay what 0004 and 0005 kept and no recount
-- is needed. Per job of the burn-down that is one trigger call less for
-- each claim, start mark and ack statement, and no second scan of its
-- transition tables.
CREATE OR REPLACE FUNCTION {count_ins_fn}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
  INSERT INTO {counts} AS c (queue, state, shard, n)
  SELECT queue, COALESCE(state, 'at:' || b), pg_backend_pid(), COUNT(*) FROM (
    SELECT queue, state, CASE WHEN state = 'pending' AND run_at > updated_at THEN run_at / 300000000 END AS b FROM new_rows) x
  GROUP BY GROUPING SETS ((queue, state), (queue, b)) HAVING GROUPING(state) = 0 OR b IS NOT NULL
  ON CONFLICT (queue, state, shard) DO UPDATE SET n = c.n + EXCLUDED.n; RETURN NULL; END $$;

CREATE OR REPLACE FUNCTION {count_del_fn}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
  INSERT INTO {counts} AS c (queue, state, shard, n)
  SELECT queue, COALESCE(state, 'at:' || b), pg_backend_pid(), -COUNT(*) FROM (
    SELECT queue, state, CASE WHEN state = 'pending' AND run_at > updated_at THEN run_at / 300000000 END AS b FROM old_rows) x
  GROUP BY GROUPING SETS ((queue, state), (queue, b)) HAVING GROUPING(state) = 0 OR b IS NOT NULL
  ON CONFLICT (queue, state, shard) DO UPDATE SET n = c.n + EXCLUDED.n; RETURN NULL; END $$;

CREATE OR REPLACE FUNCTION {count_upd_fn}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
  INSERT INTO {counts} AS c (queue, state, shard, n)
  SELECT queue, COALESCE(state, 'at:' || b), pg_backend_pid(), SUM(d) FROM (
    SELECT queue, state, CASE WHEN state = 'pending' AND run_at > updated_at THEN run_at / 300000000 END AS b, 1 AS d FROM new_rows
    UNION ALL SELECT queue, state, CASE WHEN state = 'pending' AND run_at > updated_at THEN run_at / 300000000 END, -1 FROM old_rows) x
  GROUP BY GROUPING SETS ((queue, state), (queue, b)) HAVING SUM(d) <> 0 AND (GROUPING(state) = 0 OR b IS NOT NULL)
  ON CONFLICT (queue, state, shard) DO UPDATE SET n = c.n + EXCLUDED.n; RETURN NULL; END $$;

-- The functions above count the buckets from here on; the same transaction
-- drops 0005's triggers, so no statement is counted by both or neither.
DROP TRIGGER IF EXISTS {sched_upd_trg} ON {jobs};

DROP TRIGGER IF EXISTS {sched_del_trg} ON {jobs};

DROP TRIGGER IF EXISTS {sched_ins_trg} ON {jobs};

DROP FUNCTION IF EXISTS {sched_upd_fn}();

DROP FUNCTION IF EXISTS {sched_del_fn}();

DROP FUNCTION IF EXISTS {sched_ins_fn}();

-- A claim's row version is wider than the pushed row (its lease token and
-- worker ID, some 70 bytes), and until the claim commits the page holds
-- both; the start mark then needs room beside the claim's version. At a
-- fillfactor of 50 a page of small jobs (~230 bytes each) had room for
-- three in four of those versions: 17% of the burn-down's claims and start
-- marks were not HOT, each writing an entry into every index (and leaving
-- a dead one for the next claims to walk). At 36, 96% are HOT. It applies
-- to the pages written from now on; the heap of small jobs grows by about
-- 40%.
ALTER TABLE {jobs} SET (fillfactor = 36);

-- The list index (0007) orders the lists of finished jobs; waiting and
-- running jobs are listed on the claim index, and the queues with pending
-- jobs are found on it too. Partial, a push and an ack write and leave one
-- index entry fewer per job (the continuous mode's server CPU per job fell
-- by about a sixth). Building it reads the table once.
DROP INDEX IF EXISTS {list_idx};

CREATE INDEX IF NOT EXISTS {list_idx} ON {jobs} (state, queue, finished_at, seq) WHERE state <> 'pending';

UPDATE {meta} SET value = '10' WHERE name = 'schema_version';
