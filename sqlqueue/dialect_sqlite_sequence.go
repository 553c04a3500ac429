package sqlqueue

// sqliteSequences are SQLite statements of sequences (see sequence.go): see
// query. The write transaction's lock on the database orders every change,
// so nothing is locked row by row.
var sqliteSequences = queryTemplates{
	qSeqTake:      "INSERT INTO {sequences} (queue, seq_key, head_id) VALUES (?, ?, ?) ON CONFLICT (queue, seq_key) DO NOTHING",
	qSeqHead:      "SELECT head_id FROM {sequences} WHERE queue = ? AND seq_key = ?",
	qSeqWait:      "UPDATE {jobs} SET state = 'sequenced' WHERE id = ? AND state = 'pending'",
	qSeqJoin:      "INSERT INTO {sequence_jobs} (queue, seq_key, job_id) VALUES (?, ?, ?)",
	qSeqNext:      "SELECT pos, job_id FROM {sequence_jobs} WHERE queue = ? AND seq_key = ? ORDER BY pos LIMIT 1",
	qSeqDropPos:   "DELETE FROM {sequence_jobs} WHERE pos = ?",
	qSeqWake:      "UPDATE {jobs} SET state = 'pending' WHERE id = ? AND state = 'sequenced'",
	qSeqSetHead:   "UPDATE {sequences} SET head_id = ? WHERE queue = ? AND seq_key = ?",
	qSeqDelete:    "DELETE FROM {sequences} WHERE queue = ? AND seq_key = ?",
	qSeqHeadsOf:   "SELECT queue, seq_key, head_id FROM {sequences} WHERE head_id IN (?)",
	qSeqHeadsGone: "SELECT s.queue, s.seq_key, s.head_id FROM {sequences} s WHERE s.head_id IN (?) AND NOT EXISTS (SELECT 1 FROM {jobs} j WHERE j.id = s.head_id AND j.state IN ('pending', 'dead'))",
	qSeqDropGone:  "DELETE FROM {sequence_jobs} WHERE job_id IN (?) AND NOT EXISTS (SELECT 1 FROM {jobs} j WHERE j.id = {sequence_jobs}.job_id AND j.state = 'sequenced')",
	qSeqHeld:      "SELECT s.queue, s.seq_key, s.head_id, (SELECT COUNT(*) FROM {sequence_jobs} w WHERE w.queue = s.queue AND w.seq_key = s.seq_key) FROM {sequences} s JOIN {jobs} j ON j.id = s.head_id WHERE j.state = 'dead' ORDER BY j.finished_at DESC, j.seq DESC LIMIT ?",
	qSeqHeldOf:    "SELECT s.queue, s.seq_key, s.head_id, (SELECT COUNT(*) FROM {sequence_jobs} w WHERE w.queue = s.queue AND w.seq_key = s.seq_key) FROM {sequences} s JOIN {jobs} j ON j.id = s.head_id WHERE j.state = 'dead' AND s.queue = ? ORDER BY j.finished_at DESC, j.seq DESC LIMIT ?",
}
