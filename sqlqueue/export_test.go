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

// RecountMySQL counts the rows of q's jobs table into its counts table
// again, as MySQL migrations 0005 and 0006 do, for tests that insert rows
// by SQL: no trigger counts an inserted row since migration 0015 (the
// pushes count their own). Run it while nothing else writes the tables.
func RecountMySQL(ctx context.Context, q *Queue) error {
	for _, stmt := range []string{
		"DELETE FROM {counts}",
		"INSERT INTO {counts} (queue, state, shard, n) SELECT queue, state, 0, COUNT(*) FROM {jobs} GROUP BY queue, state",
		"INSERT INTO {counts} (queue, state, shard, n) SELECT queue, CONCAT('" + schedPrefix + "', run_at DIV " + strconv.Itoa(schedBucket) + "), 0, COUNT(*) FROM {jobs} WHERE state = 'pending' AND run_at > updated_at GROUP BY 1, 2",
	} {
		if _, err := q.db.ExecContext(ctx, q.sqlOnce(stmt)); err != nil {
			return err
		}
	}
	return nil
}
