package sqlqueue

import "strconv"

// sqliteWrites are SQLite's statements that write the jobs table (claims,
// the lease-guarded changes, pushes and revivals, dead letters and bulk
// actions) and the few others its operations run: see query. Each is
// whole here; the constants and the two functions below are parts
// several of them share.
var sqliteWrites = queryTemplates{
	// The claim (reserve): a look before taking the write lock, then a
	// select and an update by seq, the rowid, in one BEGIN IMMEDIATE
	// transaction.
	qClaimProbe:  "SELECT 1 FROM {jobs} WHERE state = 'pending' AND queue IN ({list ?}) AND run_at <= ? AND lease_expires_at <= ? LIMIT 1",
	qClaimSelect: "SELECT " + jobCols + " FROM {jobs} WHERE state = 'pending' AND queue IN ({list ?}) AND run_at <= ? AND lease_expires_at <= ? ORDER BY priority DESC, run_at, seq LIMIT ?",
	qClaimUpdate: "UPDATE {jobs} SET attempts = attempts + ?, lease_token = ? || '-' || seq, lease_expires_at = ?, updated_at = ?, started_at = ?, worker = ? WHERE seq IN ({list ?})",

	// One job under its lease.
	qAckDelete:    "DELETE FROM {jobs} WHERE " + sqliteLeased,
	qAckDone:      "UPDATE {jobs} SET state = 'done', finished_at = ?, updated_at = ? WHERE " + sqliteLeased,
	qRetryLeased:  "UPDATE {jobs} SET history = " + sqliteHistory + ", lease_token = NULL, lease_expires_at = 0, run_at = ?, available_at = ?, last_error = ?, updated_at = ? WHERE " + sqliteLeased,
	qDeadLeased:   "UPDATE {jobs} SET history = " + sqliteHistory + ", state = 'dead', lease_token = NULL, lease_expires_at = 0, last_error = ?, finished_at = ?, updated_at = ? WHERE " + sqliteLeased,
	qCancelLeased: "UPDATE {jobs} SET state = 'cancelled', lease_token = NULL, lease_expires_at = 0, last_error = ?, finished_at = ?, updated_at = ? WHERE " + sqliteLeased,
	qSnoozeLeased: "UPDATE {jobs} SET attempts = CASE WHEN attempts > 0 THEN attempts - 1 ELSE 0 END, snoozes = snoozes + ?, lease_token = NULL, lease_expires_at = 0," +
		" run_at = ?, available_at = ?, updated_at = ? WHERE " + sqliteLeased,

	// Many jobs under their leases (finishLeases): by token (the tokens
	// as a JSON array, then now), and matching each (id, token) pair
	// (IDs and tokens as two text-array literals, then now). The
	// parameters are numbered.
	qStartLeases:       sqliteByToken(sqliteStartHead, 2),
	qAckLeases:         sqliteByToken(sqliteAckHead, 0),
	qDoneLeases:        sqliteByToken(sqliteDoneHead, 2),
	qExtendLeases:      sqliteByToken(sqliteExtendHead, 2),
	qStartLeasesPairs:  sqliteByPair(sqliteStartHead, 2),
	qAckLeasesPairs:    sqliteByPair(sqliteAckHead, 0),
	qDoneLeasesPairs:   sqliteByPair(sqliteDoneHead, 2),
	qExtendLeasesPairs: sqliteByPair(sqliteExtendHead, 2),

	// Pushes and revivals.
	qInsertJobs: "INSERT INTO {jobs} (" + insertCols + ") VALUES {list " + insertRow + "} ON CONFLICT DO NOTHING RETURNING id",
	qRevive: `UPDATE {jobs} SET seq = (SELECT MAX(seq) + 1 FROM {jobs}), queue = ?, name = ?, payload = ?, priority = ?, attempts = 0,
  max_attempts = ?, timeout_us = ?, unique_key = ?, tags = ?, meta = ?, available_at = ?, run_at = ?, updated_at = ?,
  created_at = CASE WHEN state = 'dead' AND ? = 1 THEN created_at ELSE ? END,
  finished_at = 0, last_error = '', lease_token = NULL, lease_expires_at = 0, snoozes = 0, retry_until = ?, state = 'pending'
WHERE id = ? AND state <> 'pending' AND NOT EXISTS (SELECT 1 FROM {jobs} o WHERE o.queue = ? AND o.unique_key = ? AND o.state = 'pending')`,
	qReplaceWaiting: "DELETE FROM {jobs} WHERE queue = ? AND unique_key = ? AND state = 'pending' AND lease_token IS NULL AND id <> ?",

	// Dead letters, cancels, bulk actions and pruning.
	qRetryDead:       sqliteRetryDead + " WHERE id = ? AND state = 'dead'",
	qRetryDeadIn:     sqliteRetryDead + " WHERE id IN (?) AND state = 'dead'",
	qForgetDead:      "DELETE FROM {jobs} WHERE id = ? AND state = 'dead'",
	qForgetDeadIn:    "DELETE FROM {jobs} WHERE id IN (?) AND state = 'dead'",
	qCancelJob:       sqliteCancel + " WHERE id = ? AND state = 'pending'",
	qCancelJobsIn:    sqliteCancel + " WHERE id IN (?) AND state = 'pending'",
	qDeleteWaitingIn: "DELETE FROM {jobs} WHERE id IN (?) AND state = 'pending' AND lease_token IS NULL",
	qDeleteInState:   "DELETE FROM {jobs} WHERE id IN (?) AND state = ?",
	qDeadIDs:         "SELECT id FROM {jobs} WHERE state = 'dead' LIMIT " + pruneBatchLit,
	qDeadIDsOf:       "SELECT id FROM {jobs} WHERE state = 'dead' AND queue = ? LIMIT " + pruneBatchLit,
	qWaitingIDs:      "SELECT id FROM {jobs} WHERE state = 'pending' AND lease_token IS NULL LIMIT " + pruneBatchLit,
	qWaitingIDsOf:    "SELECT id FROM {jobs} WHERE state = 'pending' AND lease_token IS NULL AND queue = ? LIMIT " + pruneBatchLit,

	// The lease row's epoch: the write transaction holds the whole
	// database's write lock, so the read needs no lock of its own.
	qLeaseEpoch:       "SELECT epoch FROM {meta} WHERE name = ?",
	qLeaseEpochLocked: "SELECT epoch FROM {meta} WHERE name = ?",
	qInsertMembers:    "INSERT OR IGNORE INTO {batch_jobs} (batch_id, job_id, state) VALUES {list (?, ?, 'pending')}",
}

var (
	// sqliteLeased is the condition of a lease-guarded change of one job:
	// the lease (id, token, now).
	sqliteLeased = "id = ? AND lease_token = ? AND state = 'pending' AND lease_expires_at > ?"

	// sqliteHistory is the history column with the attempt under way
	// appended as it ends (the end time, then the error), the oldest entry
	// dropped (json_remove of $[0]) once it holds queue.MaxHistory: a JSON
	// array of historyEntry. It reads attempts, started_at and worker as
	// the row has them.
	sqliteHistory = `json_insert(CASE WHEN history IS NULL OR history = '' THEN '[]' WHEN json_array_length(history) >= ` + maxHistoryLit +
		` THEN json_remove(history, '$[0]') ELSE history END, '$[#]', json_object('a', attempts, 's', started_at, 'f', ?, 'e', ?, 'w', worker))`

	// The heads of the changes of many jobs under their leases, their
	// parameters numbered: a start mark (now, now), an ack that deletes
	// (none), one that keeps the job as done (now, now), an extension
	// (expiry, now).
	sqliteStartHead  = "UPDATE {jobs} SET attempts = attempts + 1, updated_at = MAX(updated_at + 1, ?1), started_at = ?2"
	sqliteAckHead    = "DELETE FROM {jobs}"
	sqliteDoneHead   = "UPDATE {jobs} SET state = 'done', finished_at = ?1, updated_at = ?2"
	sqliteExtendHead = "UPDATE {jobs} SET lease_expires_at = ?1, updated_at = MAX(updated_at + 1, ?2)"

	// sqliteRetryDead makes dead letters pending again, available now
	// (now, now, now), attempts reset; sqliteCancel cancels jobs (now, now,
	// the error recorded).
	sqliteRetryDead = "UPDATE {jobs} SET state = 'pending', attempts = 0, available_at = ?, run_at = ?, updated_at = ?, finished_at = 0, lease_token = NULL, lease_expires_at = 0"
	sqliteCancel    = "UPDATE {jobs} SET state = 'cancelled', finished_at = ?, updated_at = ?, last_error = ?"
)

// sqliteByToken is the by-token statement of a change of many jobs under
// their leases: head (with n numbered parameters), then the tokens as a
// JSON array (jsonTokens) and now. CROSS JOIN keeps the tokens the outer
// loop, so every token is one rowid lookup (the seq its token ends in);
// state and the expiry are tested on the row found (unary +: no index is
// to serve them). It returns the (id, lease_token) of the rows it changed
// or deleted, whose IDs the caller must check.
func sqliteByToken(head string, n int) string {
	toks, at := "?"+strconv.Itoa(n+1), "?"+strconv.Itoa(n+2)
	return head + " WHERE seq IN (SELECT k.seq FROM json_each(" + toks + ") l CROSS JOIN {jobs} k" +
		" ON k.seq = CAST(substr(l.value, instr(l.value, '-') + 1) AS INTEGER)" +
		" WHERE k.lease_token = l.value AND +k.state = 'pending' AND +k.lease_expires_at > " + at + ") RETURNING id, lease_token"
}

// sqliteByPair is the statement of a change of many jobs under their
// leases that matches each (id, token) pair in SQL: head (with n
// numbered parameters), then the IDs and the tokens as two text-array
// literals (see pgArray), turned into JSON arrays, and now. Each token
// ends in its row's seq, so every lease is one rowid lookup.
func sqliteByPair(head string, n int) string {
	ids, toks, at := "?"+strconv.Itoa(n+1), "?"+strconv.Itoa(n+2), "?"+strconv.Itoa(n+3)
	js := func(p string) string { return "'[' || substr(" + p + ", 2, length(" + p + ") - 2) || ']'" }
	return "WITH a(k, id) AS MATERIALIZED (SELECT key, value FROM json_each(" + js(ids) + ")) " +
		head + " WHERE seq IN (SELECT CAST(substr(value, instr(value, '-') + 1) AS INTEGER) FROM json_each(" + js(toks) + "))" +
		" AND (id, lease_token) IN (SELECT a.id, b.value FROM json_each(" + js(toks) + ") b JOIN a ON a.k = b.key)" +
		" AND +state = 'pending' AND +lease_expires_at > " + at + " RETURNING id, lease_token"
}
