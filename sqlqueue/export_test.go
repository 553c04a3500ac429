package sqlqueue

import (
	"context"
	"time"
)

// SetVacuumThresholds makes q check for a vacuum after every acked jobs
// and vacuum from deadRows dead rows (tests: the defaults take 100,000
// acks and 10,000 dead rows).
func SetVacuumThresholds(q *Queue, acked, deadRows int64) {
	q.vac.after, q.vac.deadRows = acked, deadRows
}

// SetVacuumWalk makes q check for a vacuum once its claims' estimated
// walk over dead index entries reaches walk (tests: the default is
// 4,000,000).
func SetVacuumWalk(q *Queue, walk int64) { q.vac.afterWalk = walk }

// SetSearchBudget sets the time a payload search spends per call before
// it starts no new window (0: it examines its first window only).
func SetSearchBudget(q *Queue, d time.Duration) { q.searchBudget = d }

// Waiting reports whether a Wait of q is subscribed to its in-process
// wake-ups: from then on the next signal reaches it.
func Waiting(q *Queue) bool {
	q.wake.mu.Lock()
	defer q.wake.mu.Unlock()
	return q.wake.ch != nil
}

// MetricsFlushes is how many flushes of q's buffered run metrics wrote
// rows.
func MetricsFlushes(q *Queue) int {
	q.metrics.mu.Lock()
	defer q.metrics.mu.Unlock()
	return q.metrics.flushes
}

// TableSuffixes are what a queue's table names append to its jobs
// table's name: "" (the jobs table itself) and "_" and each kind.
func TableSuffixes() []string {
	s := []string{""}
	for _, k := range tableKinds {
		s = append(s, "_"+k)
	}
	return s
}

// IndexHolds reports whether the search index's condition for search
// holds of the job id (asked alone, without the exact byte test), and
// whether the index answers that search at all (indexed false: it is a
// scan, and held is false).
func IndexHolds(ctx context.Context, q *Queue, id, search string) (held, indexed bool, err error) {
	cond, args, indexed := q.d.indexedMatch(q.t, search)
	if !indexed {
		return false, false, nil
	}
	var n int
	err = q.db.QueryRowContext(ctx, q.rebind("SELECT COUNT(*) FROM "+q.t.jobs+" WHERE id = ? AND "+cond), append([]any{id}, args...)...).Scan(&n)
	return n == 1, true, err
}

// PushesWaiting is how many Pushes of q wait for a push lane.
func PushesWaiting(q *Queue) int {
	return q.group.Waiting()
}
