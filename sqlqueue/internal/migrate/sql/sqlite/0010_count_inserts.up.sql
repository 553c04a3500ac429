-- 0010_count_inserts: the jobs a push inserts are counted by the push
-- itself, one upsert per queue (and per scheduled bucket) in the push's
-- transaction, instead of by two row triggers firing for every inserted
-- row (the state count of 0004 and the scheduled bucket of 0005). Their
-- upsert per row cost a burn-down's queue phase about a tenth of its
-- throughput (docs/benchmarks.md, run S). sqlqueue's pushes on SQLite
-- therefore always run in a transaction. Updates and deletes are still
-- counted by the other triggers: on SQLite a trigger's upsert costs about
-- what counting the rows in Go would there (BenchmarkAckManyCounts).
--
-- A job inserted by a process of an older release after this migration
-- is not counted: stop the old writers first. Rows inserted by hand are
-- not counted either (docs/operations.md names the statements that count
-- again).
DROP TRIGGER IF EXISTS {count_ins_trg};

DROP TRIGGER IF EXISTS {sched_ins_trg};

UPDATE {meta} SET value = '10' WHERE name = 'schema_version';
