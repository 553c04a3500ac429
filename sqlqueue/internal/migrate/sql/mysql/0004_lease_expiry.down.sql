-- 0004_lease_expiry down: a leased job's expiry goes back into run_at.
-- A down run cut short after the DROP fails at the UPDATE when run again;
-- the DROP is then done, and the version row alone is left to write.
UPDATE {jobs} SET run_at = lease_expires_at
  WHERE state = 'pending' AND lease_token IS NOT NULL AND lease_expires_at > 0;

-- Dropping the column takes it out of the claim index, which keeps its
-- place among the indexes.
ALTER TABLE {jobs} DROP COLUMN lease_expires_at;

UPDATE {meta} SET value = '3' WHERE name = 'schema_version';
