package sqlqueue

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/meridianjobs/meridian/queue"
)

// OldestReady returns, for each queue with ready jobs, the earliest time
// one of them became available (queue.OldestReadyReader). Per queue it
// reads the head of each priority's ready range on the claim index (queue,
// priority, run_at, seq), so its cost follows the number of queues and
// priorities, not of jobs; on PostgreSQL, where a running job keeps its
// run_at, the read also steps over the queue's running jobs at that head.
// A queue with more than 32 priorities is read by one MIN over its ready
// jobs. At most 1,000 queues are read, as by QueueStats.
func (q *Queue) OldestReady(ctx context.Context) (map[string]time.Time, error) {
	if err := q.use(ctx); err != nil {
		return nil, err
	}
	now := micros(time.Now())
	out := make(map[string]time.Time)
	err := q.inspectRead(ctx, 0, false, func(st statements) error {
		names, err := q.knownQueues(ctx, st, statePending)
		if err != nil {
			return fmt.Errorf("listing queues: %w", err)
		}
		prios, err := q.priorities(ctx, st, names...)
		if err != nil {
			return fmt.Errorf("reading the queues' priorities: %w", err)
		}
		cond, cargs := q.d.pendingCond(queue.StateReady, now)
		for _, name := range names {
			query, args := q.oldestQuery(name, prios[name], cond, cargs)
			var at sql.NullInt64
			if err := queryRow(ctx, st, query, args, &at); err != nil {
				return fmt.Errorf("queue %s: %w", name, err)
			}
			if at.Valid {
				out[name] = fromMicros(at.Int64)
			}
		}
		return nil
	})
	if err != nil {
		return nil, q.wrap(ctx, err, "reading the oldest ready jobs")
	}
	return out, nil
}

// oldestQuery is OldestReady's query for one queue: the least run_at of
// the first ready job of each priority, or of all its ready jobs when it
// has too many priorities to list.
func (q *Queue) oldestQuery(name string, prios []any, cond string, cargs []any) (string, []any) {
	const ready = "FROM {jobs} WHERE queue = ? AND state = 'pending'"
	if prios == nil {
		return q.sql("SELECT MIN(run_at) " + ready + " AND " + cond), append([]any{name}, cargs...)
	}
	parts := make([]string, len(prios))
	var args []any
	for i, p := range prios {
		parts[i] = fmt.Sprintf("SELECT * FROM (SELECT run_at AS t %s AND priority = ? AND %s ORDER BY run_at LIMIT 1) p%d", ready, cond, i)
		args = append(append(args, name, p), cargs...)
	}
	return q.sql("SELECT MIN(t) FROM (" + strings.Join(parts, " UNION ALL ") + ") o"), args
}
