package sqlqueue

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
)

// The reads of finished jobs by finish time (pruning, DeadSince,
// CancelledSince) step through the queues on the list index (state,
// queue, finished_at, seq), which every dialect has: one range of it per
// queue, a UNION ALL of such probes per statement. They need no
// (state, finished_at) index, which MySQL, lacking partial indexes, would
// write and delete an entry of for every job (see the mysql migration
// 0014_finished_index). The queues with jobs in a state come from the
// counts table.

// unionProbes is how many per-queue probes one statement of those reads
// holds at most.
const unionProbes = 100

// finishedQueues lists the queues with jobs in state, by name, and their
// numbers of such jobs: one read of the counts table (counts are summed
// over their shards, see foldCounts), all the queues, since the pruning
// and the counts built on it must miss none.
func (q *Queue) finishedQueues(ctx context.Context, st statements, state string) (names []string, totals []int64, err error) {
	rows, err := st.Query(ctx, q.stmt(qFinishedQueues), state)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var name string
		var n int64
		if err := rows.Scan(&name, &n); err != nil {
			return nil, nil, err
		}
		names, totals = append(names, name), append(totals, n)
	}
	return names, totals, rows.Err()
}

// finishedProbe is the probe of the list index for the jobs in state
// (a constant of this package, written into the SQL so that PostgreSQL's
// partial list index, WHERE state <> 'pending', serves a generic plan
// too) of one queue whose finished_at is op ("<" or ">=") a parameter.
func finishedProbe(state, op string) string {
	return "state = '" + state + "' AND queue = ? AND finished_at " + op + " ?"
}

// countFinishedQuery is the statement of countFinished for names, each
// probe limited to its entry of lims: one count per queue, in order. A
// probe reads its range in the list index's order (ORDER BY finished_at,
// free on that index), so that no planner takes a table scan that stops
// at the limit instead (PostgreSQL did, for a limit of one, when its
// statistics said matching rows were common).
func (q *Queue) countFinishedQuery(state, op string, at int64, names []string, lims []int64) (string, []any) {
	parts := make([]string, len(names))
	args := make([]any, 0, 2*len(names))
	for i, name := range names {
		parts[i] = fmt.Sprintf("SELECT COUNT(*) FROM (SELECT 1 AS x FROM {jobs} WHERE %s ORDER BY finished_at LIMIT %d) b%d", finishedProbe(state, op), lims[i], i)
		args = append(args, name, at)
	}
	return q.sqlOnce(strings.Join(parts, " UNION ALL ")), args
}

// countFinished counts the jobs in state of the named queues (totals:
// their numbers of such jobs, from finishedQueues) whose finished_at is op
// at, up to countCap+1, reading at most countCap+1 entries of the list
// index whatever the number of queues: each probe is limited to the
// smaller of its queue's total and what is left of that budget, and a
// statement holds probes (at most unionProbes) while their limits fit in
// what is left. So a probe that reaches its limit below its queue's total
// is alone in its statement and fills the budget: the count is then past
// countCap. The queues are taken from the smallest total up: in the usual
// case (fewer than countCap jobs in the state) one statement probes them
// all; a queue with more jobs than are left in the budget costs a
// statement of its own.
func (q *Queue) countFinished(ctx context.Context, st statements, state, op string, at int64, names []string, totals []int64) (int64, error) {
	idx := make([]int, len(names))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(totals[a], totals[b]) })
	left := int64(countCap + 1)
	var n int64
	for i := 0; i < len(idx) && left > 0; {
		var stmtNames []string
		var lims []int64
		room := left
		for ; i < len(idx) && len(stmtNames) < unionProbes; i++ {
			lim := min(max(totals[idx[i]], 1), left)
			if lim > room {
				break
			}
			stmtNames, lims, room = append(stmtNames, names[idx[i]]), append(lims, lim), room-lim
		}
		query, args := q.countFinishedQuery(state, op, at, stmtNames, lims)
		counts, err := queryInts(ctx, st, query, args...)
		if err != nil {
			return 0, err
		}
		for _, c := range counts {
			n, left = n+c, left-c
		}
	}
	return min(n, countCap+1), nil
}

// pruneQuery is the statement of one step of pruneJobs: for each named
// queue, the IDs of up to lim of its jobs in state that finished before
// cutoff, oldest first, with the queue's name.
func (q *Queue) pruneQuery(state string, cutoff int64, names []string, lim int) (string, []any) {
	parts := make([]string, len(names))
	args := make([]any, 0, 2*len(names))
	for i, name := range names {
		parts[i] = fmt.Sprintf("SELECT id, queue FROM (SELECT id, queue FROM {jobs} WHERE %s ORDER BY finished_at LIMIT %d) b%d", finishedProbe(state, "<"), lim, i)
		args = append(args, name, cutoff)
	}
	return q.sqlOnce(strings.Join(parts, " UNION ALL ")), args
}

// cancelledQuery is the statement of CancelledSince for names: the IDs
// and lease tokens of their jobs cancelled while they ran, at or after
// since.
func (q *Queue) cancelledQuery(since int64, names []string) (string, []any) {
	parts := make([]string, len(names))
	args := make([]any, 0, 2*len(names))
	for i, name := range names {
		parts[i] = "SELECT id, lease_token FROM {jobs} WHERE " + finishedProbe(stateCancelled, ">=") + " AND lease_token IS NOT NULL"
		args = append(args, name, since)
	}
	return q.sqlOnce(strings.Join(parts, " UNION ALL ")), args
}
