package sqlqueue

import (
	"context"
	"strconv"
	"time"
)

// SetVacuumThresholds makes q check for a vacuum after every acked jobs
// and vacuum from deadRows dead rows (tests: the defaults take 100,000
// acks and 10,000 dead rows).
func SetVacuumThresholds(q *Queue, acked, deadRows int64) {
	q.vac.after, q.vac.deadRows = acked, deadRows
}

// SetSearchBudget sets the time a payload search spends per call before
// it starts no new window (0: it examines its first window only).
func SetSearchBudget(q *Queue, d time.Duration) { q.searchBudget = d }

// Recount counts the rows of q's jobs table into its counts table again,
// as the counts and scheduled migrations do, for tests that insert rows
// by SQL: no trigger counts an inserted row on MySQL (migration 0015) or
// SQLite (0010), the pushes count their own. PostgreSQL's triggers still
// count inserts: nothing to do there. Run it while nothing else writes
// the tables.
func Recount(ctx context.Context, q *Queue) error {
	bucket := map[Dialect]string{
		MySQL:  "CONCAT('" + schedPrefix + "', run_at DIV " + strconv.Itoa(schedBucket) + ")",
		SQLite: "'" + schedPrefix + "' || (run_at / " + strconv.Itoa(schedBucket) + ")",
	}[q.d.name()]
	if bucket == "" {
		return nil
	}
	for _, stmt := range []string{
		"DELETE FROM {counts}",
		"INSERT INTO {counts} (queue, state, shard, n) SELECT queue, state, 0, COUNT(*) FROM {jobs} GROUP BY queue, state",
		"INSERT INTO {counts} (queue, state, shard, n) SELECT queue, " + bucket + ", 0, COUNT(*) FROM {jobs} WHERE state = 'pending' AND run_at > updated_at GROUP BY 1, 2",
	} {
		if _, err := q.db.ExecContext(ctx, q.sqlOnce(stmt)); err != nil {
			return err
		}
	}
	return nil
}

// Waiting reports whether a Wait of q is subscribed to its in-process
// wake-ups: from then on the next signal reaches it.
func Waiting(q *Queue) bool {
	q.wake.mu.Lock()
	defer q.wake.mu.Unlock()
	return q.wake.ch != nil
}
