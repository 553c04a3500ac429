-- 0003_lease_expiry: SQLite and MySQL gave a lease's expiry a column of its
-- own at this step; PostgreSQL has had lease_expires_at since 0001, so here
-- the step only records the version, keeping the three series in step.
UPDATE {meta} SET value = '3' WHERE name = 'schema_version';
