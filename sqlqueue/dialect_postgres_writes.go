package sqlqueue

// pgWrites are PostgreSQL's statements that write the jobs table (claims,
// the lease-guarded changes, pushes and revivals, dead letters and bulk
// actions) and the few others its operations run: see query. Each is
// whole here; the constants below are parts several of them share.
var pgWrites = queryTemplates{
	// The claim (reserve): one statement. The pause check is uncorrelated,
	// so it runs once as a One-Time Filter above the claim-index scan.
	qClaim: `WITH c AS (
  SELECT id, run_at AS claimed_run_at, lease_token IS NOT NULL AS recovered FROM {jobs} j
  WHERE state = 'pending' AND queue IN ({list ?}) AND run_at <= ? AND lease_expires_at <= ?
    AND NOT EXISTS (SELECT 1 FROM {pauses} p WHERE p.queue IN ({list ?}))
  ORDER BY priority DESC, run_at, seq
  LIMIT ?
  FOR UPDATE OF j SKIP LOCKED)
UPDATE {jobs} t SET attempts = t.attempts + CAST(? AS INTEGER), lease_token = CAST(? AS TEXT) || '-' || t.seq, lease_expires_at = ?, updated_at = ?,
  started_at = CAST(? AS BIGINT), worker = CAST(? AS TEXT)
FROM c WHERE t.id = c.id
RETURNING ` + pgClaimCols,

	// One job under its lease.
	qAckDelete:    "DELETE FROM {jobs} WHERE " + pgLeased,
	qAckDone:      "UPDATE {jobs} SET state = 'done', finished_at = ?, updated_at = ? WHERE " + pgLeased,
	qRetryLeased:  "UPDATE {jobs} SET history = " + pgHistory + ", lease_token = NULL, lease_expires_at = 0, run_at = ?, available_at = ?, last_error = ?, updated_at = ? WHERE " + pgLeased,
	qDeadLeased:   "UPDATE {jobs} SET history = " + pgHistory + ", state = 'dead', lease_token = NULL, lease_expires_at = 0, last_error = ?, finished_at = ?, updated_at = ? WHERE " + pgLeased,
	qCancelLeased: "UPDATE {jobs} SET state = 'cancelled', lease_token = NULL, lease_expires_at = 0, last_error = ?, finished_at = ?, updated_at = ? WHERE " + pgLeased,
	qSnoozeLeased: "UPDATE {jobs} SET attempts = CASE WHEN attempts > 0 THEN attempts - 1 ELSE 0 END, snoozes = snoozes + ?, lease_token = NULL, lease_expires_at = 0," +
		" run_at = ?, available_at = ?, updated_at = ? WHERE " + pgLeased,

	// Many jobs under their leases (finishLeases): the leases are two
	// text arrays (IDs, tokens), then now.
	qStartLeases:     pgStartLeases,
	qAckLeases:       pgAckLeases,
	qDoneLeases:      pgDoneLeases,
	qExtendLeases:    "UPDATE {jobs} t SET lease_expires_at = ?, updated_at = GREATEST(updated_at + 1, ?) FROM" + pgLeasesFrom,
	qStartAckLeases:  "WITH c0 AS (" + pgStartLeases + "), c1 AS (" + pgAckLeases + ") " + pgBothParts,
	qStartDoneLeases: "WITH c0 AS (" + pgStartLeases + "), c1 AS (" + pgDoneLeases + ") " + pgBothParts,

	// Pushes and revivals.
	qInsertJobs: pgInsertJobs,
	qInsertJobsNotify: "WITH ins AS (" + pgInsertJobs + ") SELECT id FROM ins UNION ALL SELECT NULL FROM (" + pgNotify +
		") n WHERE EXISTS (SELECT 1 FROM ins)",
	qNotify: pgNotify,
	qRevive: `UPDATE {jobs} SET seq = DEFAULT, queue = ?, name = ?, payload = ?, priority = ?, attempts = 0,
  max_attempts = ?, timeout_us = ?, unique_key = ?, tags = ?, meta = ?, available_at = ?, run_at = ?, updated_at = ?,
  created_at = CASE WHEN state = 'dead' AND ? = 1 THEN created_at ELSE ? END,
  finished_at = 0, last_error = '', lease_token = NULL, lease_expires_at = 0, snoozes = 0, retry_until = ?, state = 'pending'
WHERE id = ? AND state <> 'pending' AND NOT EXISTS (SELECT 1 FROM {jobs} o WHERE o.queue = ? AND o.unique_key = ? AND o.state = 'pending')`,
	qReplaceWaiting: "DELETE FROM {jobs} WHERE queue = ? AND unique_key = ? AND state = 'pending' AND lease_token IS NULL AND id <> ?",

	// Dead letters, cancels, bulk actions and pruning.
	qRetryDead:       pgRetryDead + " WHERE id = ? AND state = 'dead'",
	qRetryDeadIn:     pgRetryDead + " WHERE id IN (?) AND state = 'dead'",
	qForgetDead:      "DELETE FROM {jobs} WHERE id = ? AND state = 'dead'",
	qForgetDeadIn:    "DELETE FROM {jobs} WHERE id IN (?) AND state = 'dead'",
	qCancelJob:       pgCancel + " WHERE id = ? AND state = 'pending'",
	qCancelJobsIn:    pgCancel + " WHERE id IN (?) AND state = 'pending'",
	qDeleteWaitingIn: "DELETE FROM {jobs} WHERE id IN (?) AND state = 'pending' AND lease_token IS NULL",
	qDeleteInState:   "DELETE FROM {jobs} WHERE id IN (?) AND state = ?",
	qDeadIDs:         "SELECT id FROM {jobs} WHERE state = 'dead' LIMIT " + pruneBatchLit,
	qDeadIDsOf:       "SELECT id FROM {jobs} WHERE state = 'dead' AND queue = ? LIMIT " + pruneBatchLit,
	qWaitingIDs:      "SELECT id FROM {jobs} WHERE state = 'pending' AND lease_token IS NULL LIMIT " + pruneBatchLit,
	qWaitingIDsOf:    "SELECT id FROM {jobs} WHERE state = 'pending' AND lease_token IS NULL AND queue = ? LIMIT " + pruneBatchLit,

	qLeaseEpoch:       "SELECT epoch FROM {meta} WHERE name = ?",
	qLeaseEpochLocked: "SELECT epoch FROM {meta} WHERE name = ? FOR UPDATE",
	qInsertMembers:    "INSERT INTO {batch_jobs} (batch_id, job_id, state) VALUES {list (?, ?, 'pending')} ON CONFLICT DO NOTHING",

	qVacuumDue: `SELECT COALESCE(n_dead_tup >= ?, false),
  COALESCE(GREATEST(last_analyze, last_autoanalyze) < now() - make_interval(secs => ?), true)
FROM (SELECT 1) one LEFT JOIN pg_stat_user_tables ON relid = to_regclass(?)`,
	qVacuum:        "VACUUM (SKIP_LOCKED) {jobs}",
	qVacuumAnalyze: "VACUUM (ANALYZE, SKIP_LOCKED) {jobs}",
}

var (
	// pgLeased is the condition of a lease-guarded change of one job:
	// the lease (id, token, now).
	pgLeased = "id = ? AND lease_token = ? AND state = 'pending' AND lease_expires_at > ?"

	// pgHistory is the history column with the attempt under way appended
	// as it ends (the end time, then the error), the oldest entry dropped
	// (jsonb "- 0") once it holds queue.MaxHistory: a JSON array of
	// historyEntry. It reads attempts, started_at and worker as the row
	// has them.
	pgHistory = `(CASE WHEN history IS NULL OR history = '' THEN '[]'::jsonb WHEN jsonb_array_length(history::jsonb) >= ` + maxHistoryLit +
		` THEN history::jsonb - 0 ELSE history::jsonb END || jsonb_build_object('a', attempts, 's', started_at, 'f', CAST(? AS BIGINT), 'e', CAST(? AS TEXT), 'w', worker))::text`

	// pgLeasesFrom ends a change of many jobs under their leases: the
	// leases as two text arrays and now. The lease terms are wrapped in
	// IS TRUE so that the primary key is the only index the planner can
	// use: bare, "lease_expires_at > $n" could match an index, where the
	// primary key reads only the leased rows. unnest keeps the nested
	// loop over the primary key under a generic plan too (it assumes 10
	// elements), where a VALUES list of an analyzed table becomes a hash
	// join over a sequential scan.
	pgLeasesFrom  = " unnest(CAST(? AS TEXT[]), CAST(? AS TEXT[])) AS v(id, tok)" + pgLeasesWhere
	pgLeasesWhere = " WHERE t.id = v.id AND (t.lease_token = v.tok AND t.state = 'pending' AND t.lease_expires_at > ?) IS TRUE RETURNING t.id, t.lease_token"
	pgStartLeases = "UPDATE {jobs} t SET attempts = attempts + 1, updated_at = GREATEST(updated_at + 1, ?), started_at = ? FROM" + pgLeasesFrom
	pgAckLeases   = "DELETE FROM {jobs} t USING" + pgLeasesFrom
	pgDoneLeases  = "UPDATE {jobs} t SET state = 'done', finished_at = ?, updated_at = ? FROM" + pgLeasesFrom
	// pgBothParts returns the rows of two data-modifying CTEs, c0 and c1,
	// told apart by their part's number.
	pgBothParts = "SELECT 0, id, lease_token FROM c0 UNION ALL SELECT 1, id, lease_token FROM c1"

	// pgInsertJobs inserts the rows it can and returns their IDs.
	pgInsertJobs = "INSERT INTO {jobs} (" + insertCols + ") VALUES {list " + insertRow + "} ON CONFLICT DO NOTHING RETURNING id"
	// pgNotify wakes the listeners of a channel with a payload.
	pgNotify = "SELECT pg_notify(?, ?)"

	// pgRetryDead makes dead letters pending again, available now (now,
	// now, now), attempts reset; pgCancel cancels jobs (now, now, the
	// error recorded).
	pgRetryDead = "UPDATE {jobs} SET state = 'pending', attempts = 0, available_at = ?, run_at = ?, updated_at = ?, finished_at = 0, lease_token = NULL, lease_expires_at = 0"
	pgCancel    = "UPDATE {jobs} SET state = 'cancelled', finished_at = ?, updated_at = ?, last_error = ?"
)
