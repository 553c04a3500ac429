package sqlqueue

import (
	"cmp"
	"context"
	"slices"
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
