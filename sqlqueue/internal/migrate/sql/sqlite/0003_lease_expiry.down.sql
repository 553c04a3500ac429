-- 0003_lease_expiry down: a leased job's expiry goes back into run_at.
UPDATE {jobs} SET run_at = lease_expires_at
  WHERE state = 'pending' AND lease_token IS NOT NULL AND lease_expires_at > 0;

DROP INDEX IF EXISTS {claim_idx};

CREATE INDEX IF NOT EXISTS {claim_idx} ON {jobs} (queue, priority DESC, run_at, seq) WHERE state = 'pending';

ALTER TABLE {jobs} DROP COLUMN lease_expires_at;

UPDATE {meta} SET value = '2' WHERE name = 'schema_version';
