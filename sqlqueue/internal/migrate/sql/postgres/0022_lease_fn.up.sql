-- 0022_lease_fn: the leases a batch statement changes (start marks, acks,
-- extends) come from a function that tells the planner it returns one
-- row. From unnest of a parameter array the generic plan assumes ten rows
-- and loses to the custom plan of a batch of one or two, so PostgreSQL
-- planned every such statement afresh (as long as running it at 1,000
-- jobs/s). With this function's estimate fixed, the generic plan (a
-- nested loop over the primary key, as the custom plans of every batch
-- size were) costs what a custom one does and is kept after five calls.
-- PL/pgSQL, so that the planner cannot inline it and lose the estimate.
CREATE OR REPLACE FUNCTION {leases_fn}(ids TEXT[], toks TEXT[]) RETURNS TABLE (lease_id TEXT, lease_tok TEXT)
  LANGUAGE plpgsql STRICT IMMUTABLE ROWS 1 AS $$ BEGIN RETURN QUERY SELECT * FROM unnest(ids, toks); END $$;

UPDATE {meta} SET value = '22' WHERE name = 'schema_version';
