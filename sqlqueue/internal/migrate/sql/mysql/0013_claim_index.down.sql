-- 0013_claim_index down: the lease expiry goes back to the end of the
-- claim index, as 0004 made it.
ALTER TABLE {jobs} DROP INDEX {claim_idx}, ADD INDEX {claim_idx} (queue, state, priority DESC, run_at, seq, lease_expires_at);

UPDATE {meta} SET value = '12' WHERE name = 'schema_version';
