package sqlqueue

import (
	"context"
	"strconv"
	"time"

	"github.com/meridianjobs/meridian/queue"
)

// Counts returns each queue's jobs by state (queue.Counter), sorted by
// queue name. Pending, Dead, Done and Cancelled are read from the counts
// table that the database's triggers keep as jobs are inserted, change
// state or are deleted (see the counts migration of each dialect), so
// they are exact and cost one row per queue and state. Pending is split
// into Scheduled and Running by counts up to 10,000 over the claim index
// (scheduled and running jobs only; ready ones are never read); past that
// cap they carry More and Ready, the rest of Pending, carries Estimate.
func (q *Queue) Counts(ctx context.Context) ([]queue.QueueCounts, error) {
	if err := q.use(ctx); err != nil {
		return nil, err
	}
	now := time.Now()
	var out []queue.QueueCounts
	err := q.inspectRead(ctx, 0, false, func(st statements) error {
		cs, err := q.readCounts(ctx, st)
		if err != nil {
			return err
		}
		for i := range cs {
			if err := q.splitPending(ctx, st, &cs[i], micros(now)); err != nil {
				return err
			}
		}
		out = cs
		return nil
	})
	return out, err
}

// readCounts reads the counts table: one entry per queue with a non-zero
// count, sorted by name, Ready to Running not yet split.
func (q *Queue) readCounts(ctx context.Context, st statements) ([]queue.QueueCounts, error) {
	rows, err := st.Query(ctx, q.sql("SELECT queue, state, n FROM {counts} WHERE n <> 0 ORDER BY queue, state"))
	if err != nil {
		return nil, q.wrap(ctx, err, "reading job counts")
	}
	defer rows.Close()
	var out []queue.QueueCounts
	for rows.Next() {
		var name, state string
		var n int64
		if err := rows.Scan(&name, &state, &n); err != nil {
			return nil, q.wrap(ctx, err, "reading job counts")
		}
		if len(out) == 0 || out[len(out)-1].Queue != name {
			if len(out) == maxStatsQueues {
				break
			}
			out = append(out, queue.QueueCounts{Queue: name})
		}
		c := &out[len(out)-1]
		switch state {
		case statePending:
			c.Pending = n
		case stateDone:
			c.Done = n
		case stateDead:
			c.Dead = n
		case stateCancelled:
			c.Cancelled = n
		}
	}
	if err := rows.Err(); err != nil {
		return nil, q.wrap(ctx, err, "reading job counts")
	}
	return out, nil
}

// splitPending fills c's Ready, Scheduled and Running from c.Pending: it
// counts the queue's scheduled and running jobs, each up to countCap, by
// ranges of the claim index, and gives Ready the rest.
func (q *Queue) splitPending(ctx context.Context, st statements, c *queue.QueueCounts, now int64) error {
	if c.Pending <= 0 {
		return nil
	}
	prios, err := q.priorities(ctx, st, c.Queue)
	if err != nil {
		return q.wrap(ctx, err, "counting jobs of queue %s", c.Queue)
	}
	lim := " LIMIT " + strconv.Itoa(countCap+1) + ") "
	cond, args := q.d.pendingCond(queue.StateScheduled, now)
	args = append(append([]any{c.Queue}, prios...), args...)
	runningCount, rargs := q.d.runningCount(c.Queue, prios, now, lim)
	args = append(args, rargs...)
	query := q.sqlOnce(`SELECT
 (SELECT COUNT(*) FROM (SELECT 1 AS x FROM {jobs} WHERE queue = ? AND state = 'pending'` + byPriority(prios) + ` AND ` + cond + lim + `b),
 ` + runningCount)
	var scheduled, running int64
	if err := queryRow(ctx, st, query, args, &scheduled, &running); err != nil {
		return q.wrap(ctx, err, "counting jobs of queue %s", c.Queue)
	}
	c.Scheduled, c.Running = capped(scheduled), capped(running)
	ready := c.Pending - c.Scheduled.N - c.Running.N
	c.Ready = queue.Count{N: max(ready, 0), Estimate: c.Scheduled.More || c.Running.More}
	return nil
}

var _ queue.Counter = (*Queue)(nil)
