package sqlqueue

// mysqlWrites are MySQL's (and MariaDB's) statements that write the jobs
// table (claims, the lease-guarded changes, pushes and revivals, dead
// letters and bulk actions) and the few others its operations run: see
// query. Each is whole here; the constants below are parts several of
// them share.
var mysqlWrites = queryTemplates{
	// The claim (reserve): a locking read then an update by primary key
	// (the rows are clustered on id), in one READ COMMITTED transaction.
	qClaimSelect: "SELECT " + jobCols + " FROM {jobs} WHERE state = 'pending' AND queue IN ({list ?}) AND run_at <= ? AND lease_expires_at <= ?" +
		" ORDER BY priority DESC, run_at, seq LIMIT ? FOR UPDATE SKIP LOCKED",
	qClaimUpdate: "UPDATE {jobs} SET attempts = attempts + ?, lease_token = CONCAT(?, '-', seq), lease_expires_at = ?, updated_at = ?, started_at = ?, worker = ? WHERE id IN ({list ?})",

	// One job under its lease.
	qAckDelete:    "DELETE FROM {jobs} WHERE " + mysqlLeased,
	qAckDone:      "UPDATE {jobs} SET state = 'done', finished_at = ?, updated_at = ? WHERE " + mysqlLeased,
	qRetryLeased:  "UPDATE {jobs} SET history = " + mysqlHistory + ", lease_token = NULL, lease_expires_at = 0, run_at = ?, available_at = ?, last_error = ?, updated_at = ? WHERE " + mysqlLeased,
	qDeadLeased:   "UPDATE {jobs} SET history = " + mysqlHistory + ", state = 'dead', lease_token = NULL, lease_expires_at = 0, last_error = ?, finished_at = ?, updated_at = ? WHERE " + mysqlLeased,
	qCancelLeased: "UPDATE {jobs} SET state = 'cancelled', lease_token = NULL, lease_expires_at = 0, last_error = ?, finished_at = ?, updated_at = ? WHERE " + mysqlLeased,
	qSnoozeLeased: "UPDATE {jobs} SET attempts = CASE WHEN attempts > 0 THEN attempts - 1 ELSE 0 END, snoozes = snoozes + ?, lease_token = NULL, lease_expires_at = 0," +
		" run_at = ?, available_at = ?, updated_at = ? WHERE " + mysqlLeased,

	// Many jobs under their leases (finishLeases): by primary key and
	// (id, token) pairs (the IDs, the pairs, now), their affected-row
	// count telling whether every lease held; when one did not, the rows
	// still held are locked and read (qLockLeases) and changed by primary
	// key (the IDs). On MariaDB an ack is one DELETE ... RETURNING by ID
	// and token lists (the IDs, the tokens, now).
	qStartLeases:        mysqlStartHead + mysqlLeasesWhere,
	qAckLeases:          mysqlAckHead + mysqlLeasesWhere,
	qDoneLeases:         mysqlDoneHead + mysqlLeasesWhere,
	qExtendLeases:       mysqlExtendHead + mysqlLeasesWhere,
	qLockLeases:         "SELECT id, lease_token FROM {jobs}" + mysqlLeasesWhere + " FOR UPDATE",
	qStartByID:          mysqlStartHead + " WHERE id IN ({list ?})",
	qAckByID:            mysqlAckHead + " WHERE id IN ({list ?})",
	qDoneByID:           mysqlDoneHead + " WHERE id IN ({list ?})",
	qExtendByID:         mysqlExtendHead + " WHERE id IN ({list ?})",
	qAckLeasesReturning: "DELETE FROM {jobs} WHERE id IN ({list ?}) AND lease_token IN ({list ?}) AND state = 'pending' AND lease_expires_at > ? RETURNING id, lease_token",

	// Pushes and revivals. An insert has no RETURNING: what it stored is
	// learned from LastInsertId and the affected rows, or read back.
	qInsertJobs:        "INSERT INTO {jobs} (" + insertCols + ") VALUES {list " + insertRow + "} ON DUPLICATE KEY UPDATE seq = seq",
	qInsertJob:         "INSERT INTO {jobs} (" + insertCols + ") VALUES " + insertRow,
	qJobsInserted:      "SELECT id FROM {jobs} WHERE id IN (?)",
	qJobsInsertedSince: "SELECT id FROM {jobs} WHERE id IN (?) AND seq >= ?",
	qReviveLock:        "SELECT created_at, state FROM {jobs} WHERE id = ? AND state <> 'pending' FOR UPDATE",
	qDeleteJob:         "DELETE FROM {jobs} WHERE id = ?",
	qReplaceWaiting:    "DELETE FROM {jobs} WHERE queue = ? AND unique_key = ? AND state = 'pending' AND lease_token IS NULL AND id <> ?",

	// Dead letters, cancels, bulk actions and pruning.
	qRetryDead:       mysqlRetryDead + " WHERE id = ? AND state = 'dead'",
	qRetryDeadIn:     mysqlRetryDead + " WHERE id IN (?) AND state = 'dead'",
	qForgetDead:      "DELETE FROM {jobs} WHERE id = ? AND state = 'dead'",
	qForgetDeadIn:    "DELETE FROM {jobs} WHERE id IN (?) AND state = 'dead'",
	qCancelJob:       mysqlCancel + " WHERE id = ? AND state = 'pending'",
	qCancelJobsIn:    mysqlCancel + " WHERE id IN (?) AND state = 'pending'",
	qDeleteWaitingIn: "DELETE FROM {jobs} WHERE id IN (?) AND state = 'pending' AND lease_token IS NULL",
	qDeleteInState:   "DELETE FROM {jobs} WHERE id IN (?) AND state = ?",
	qDeadIDs:         "SELECT id FROM {jobs} WHERE state = 'dead' LIMIT " + pruneBatchLit,
	qDeadIDsOf:       "SELECT id FROM {jobs} WHERE state = 'dead' AND queue = ? LIMIT " + pruneBatchLit,
	qWaitingIDs:      "SELECT id FROM {jobs} WHERE state = 'pending' AND lease_token IS NULL LIMIT " + pruneBatchLit,
	qWaitingIDsOf:    "SELECT id FROM {jobs} WHERE state = 'pending' AND lease_token IS NULL AND queue = ? LIMIT " + pruneBatchLit,

	qLeaseEpoch:       "SELECT epoch FROM {meta} WHERE name = ?",
	qLeaseEpochLocked: "SELECT epoch FROM {meta} WHERE name = ? FOR UPDATE",
	qInsertMembers:    "INSERT IGNORE INTO {batch_jobs} (batch_id, job_id, state) VALUES {list (?, ?, 'pending')}",
	qChangedRowsProbe: "UPDATE {meta} SET value = value WHERE name = 'schema_version'",
	qFoldDelete:       "DELETE FROM {counts} WHERE (queue, state, shard) IN ({list (?, ?, ?)})",
}

var (
	// mysqlLeased is the condition of a lease-guarded change of one job:
	// the lease (id, token, now).
	mysqlLeased = "id = ? AND lease_token = ? AND state = 'pending' AND lease_expires_at > ?"

	// mysqlHistory is the history column with the attempt under way
	// appended as it ends (the end time, then the error), the oldest entry
	// dropped (JSON_REMOVE of $[0]) once it holds queue.MaxHistory: a JSON
	// array of historyEntry. It reads attempts, started_at and worker as
	// the row has them, so it comes first in its SET list (MySQL assigns
	// left to right, each assignment seeing the ones before).
	mysqlHistory = `JSON_ARRAY_APPEND(CASE WHEN history IS NULL OR history = '' THEN '[]' WHEN JSON_LENGTH(history) >= ` + maxHistoryLit +
		` THEN JSON_REMOVE(history, '$[0]') ELSE history END, '$', JSON_OBJECT('a', attempts, 's', started_at, 'f', ?, 'e', ?, 'w', worker))`

	// The heads of the changes of many jobs under their leases: a start
	// mark (now, now), an ack that deletes (none), one that keeps the job
	// as done (now, now), an extension (expiry, now). updated_at always
	// changes in a start mark and an extension, so MySQL's count of
	// changed rows is the count of leases that held.
	mysqlStartHead  = "UPDATE {jobs} SET attempts = attempts + 1, updated_at = GREATEST(updated_at + 1, ?), started_at = ?"
	mysqlAckHead    = "DELETE FROM {jobs}"
	mysqlDoneHead   = "UPDATE {jobs} SET state = 'done', finished_at = ?, updated_at = ?"
	mysqlExtendHead = "UPDATE {jobs} SET lease_expires_at = ?, updated_at = GREATEST(updated_at + 1, ?)"
	// mysqlLeasesWhere finds the rows by primary key (the ID list leads)
	// and requires each one's (id, token) pair and an unexpired lease.
	mysqlLeasesWhere = " WHERE id IN ({list ?}) AND (id, lease_token) IN ({list (?, ?)}) AND state = 'pending' AND lease_expires_at > ?"

	// mysqlRetryDead makes dead letters pending again, available now (now,
	// now, now), attempts reset; mysqlCancel cancels jobs (now, now, the
	// error recorded).
	mysqlRetryDead = "UPDATE {jobs} SET state = 'pending', attempts = 0, available_at = ?, run_at = ?, updated_at = ?, finished_at = 0, lease_token = NULL, lease_expires_at = 0"
	mysqlCancel    = "UPDATE {jobs} SET state = 'cancelled', finished_at = ?, updated_at = ?, last_error = ?"
)
