package sqlqueue

// mysqlBatches are MySQL's statements of batches and their members: see
// query.
var mysqlBatches = queryTemplates{
	qBatchInsert: "INSERT INTO {batches} (id, name, allow_failures, callbacks, total, done, failed, cancelled, created_at, updated_at, cancelled_at, then_at, catch_at, finished_at)" +
		" VALUES (?, ?, ?, ?, 0, 0, 0, 0, ?, ?, 0, 0, 0, 0)",
	qBatchAddTotal:    "UPDATE {batches} SET total = total + ?, updated_at = ? WHERE id = ?",
	qBatchTouch:       "UPDATE {batches} SET updated_at = ? WHERE id = ?",
	qBatchEnds:        "SELECT cancelled_at, finished_at FROM {batches} WHERE id = ?",
	qBatchRules:       "SELECT allow_failures, cancelled_at, finished_at FROM {batches} WHERE id = ?",
	qBatchAddCounters: "UPDATE {batches} SET done = done + ?, failed = failed + ?, cancelled = cancelled + ?, updated_at = ? WHERE id = ?",
	qBatchCancel:      "UPDATE {batches} SET cancelled_at = ?, updated_at = ? WHERE id = ? AND cancelled_at = 0 AND finished_at = 0",
	qBatchCatch:       "UPDATE {batches} SET catch_at = ? WHERE id = ? AND catch_at = 0 AND failed > 0",
	qBatchThen:        "UPDATE {batches} SET then_at = ? WHERE id = ? AND then_at = 0 AND total > 0 AND done = total",
	qBatchFinally:     "UPDATE {batches} SET finished_at = ? WHERE id = ? AND finished_at = 0 AND total > 0 AND done + failed + cancelled = total",
	qBatchCallbacks:   "SELECT callbacks FROM {batches} WHERE id = ?",
	qBatchByID:        "SELECT " + batchCols + " FROM {batches} WHERE id = ?",
	qBatches:          "SELECT " + batchCols + " FROM {batches} ORDER BY seq DESC LIMIT ?",
	qBatchesAfter:     "SELECT " + batchCols + " FROM {batches} WHERE seq < (SELECT seq FROM {batches} WHERE id = ?) ORDER BY seq DESC LIMIT ?",
	qMemberSetState:   "UPDATE {batch_jobs} SET state = ? WHERE batch_id = ? AND job_id = ? AND state = ?",
	qMembersCancel:    "UPDATE {batch_jobs} SET state = 'cancelled' WHERE batch_id = ? AND state = 'pending'",
	qMemberCancel:     "UPDATE {batch_jobs} SET state = 'cancelled' WHERE batch_id = ? AND job_id = ? AND state = 'pending'",
	qMembersCancelled: "SELECT job_id FROM {batch_jobs} WHERE batch_id = ? AND state = 'cancelled'",
	qMembers:          "SELECT job_id, state FROM {batch_jobs} WHERE batch_id = ? AND job_id > ? ORDER BY job_id LIMIT ?",
	qMembersInState:   "SELECT job_id, state FROM {batch_jobs} WHERE batch_id = ? AND job_id > ? AND state = ? ORDER BY job_id LIMIT ?",
}
