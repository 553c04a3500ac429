-- 0013_claim_index: the claim index loses lease_expires_at, as PostgreSQL's
-- has no lease column either, so a claim, a start mark and an extend write
-- only the row and no secondary index entry (with the expiry as the last
-- key column each of them delete-marked an entry and inserted another,
-- which purge then had to clean up). Measured on MariaDB 10.11 (200,000-
-- job burn-down, docs/benchmarks.md run R): about a tenth of the server's
-- CPU per job. The running count and list no longer need the expiry in an
-- index (the workers report the jobs they hold, 0011_worker_held), and
-- the reads that test a lease now look up the rows at the head of the
-- claim order they pass: the jobs the workers hold, a bounded number.
--
-- Idempotent: the index is dropped and made again whole in one statement.
-- It rebuilds the index (online: InnoDB lets writes go on while it reads
-- the table once).
ALTER TABLE {jobs} DROP INDEX {claim_idx}, ADD INDEX {claim_idx} (queue, state, priority DESC, run_at, seq);

UPDATE {meta} SET value = '13' WHERE name = 'schema_version';
