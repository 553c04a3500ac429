-- 0011_lease_epoch: the fencing epoch of each named lease (queue.Fence):
-- it grows each time the lease passes to a holder that did not hold it
-- live, and the leader writes carry it and check it.
-- SQLite has no ADD COLUMN IF NOT EXISTS: the runner skips an ALTER whose
-- column exists.
ALTER TABLE {meta} ADD COLUMN epoch INTEGER NOT NULL DEFAULT 0;

UPDATE {meta} SET value = '11' WHERE name = 'schema_version';
