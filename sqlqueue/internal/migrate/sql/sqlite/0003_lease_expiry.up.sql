-- 0003_lease_expiry: a running job's lease expiry gets a column of its own,
-- as on PostgreSQL, and run_at stays the job's available-at, so a job whose
-- lease expired (its worker crashed) is claimed again at its own place in
-- the claim order, not behind the jobs queued after it. lease_expires_at is
-- 0 when no lease is held. Jobs leased under version 2 (their expiry in
-- run_at) are moved over: their available-at is in available_at.
--
-- The claim index ends in lease_expires_at, so the ready, scheduled and
-- running counts and lists read it alone, as they read run_at before; a
-- claim changes one indexed column, as it did when it moved run_at.
ALTER TABLE {jobs} ADD COLUMN lease_expires_at INTEGER NOT NULL DEFAULT 0;

DROP INDEX IF EXISTS {claim_idx};

CREATE INDEX IF NOT EXISTS {claim_idx} ON {jobs} (queue, priority DESC, run_at, seq, lease_expires_at) WHERE state = 'pending';

UPDATE {jobs} SET lease_expires_at = run_at, run_at = available_at
  WHERE state = 'pending' AND lease_token IS NOT NULL AND lease_expires_at = 0;

UPDATE {meta} SET value = '3' WHERE name = 'schema_version';
