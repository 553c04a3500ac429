package sqlqueue

import (
	"context"
	"time"

	queue "github.com/meridianjobs/meridian/queue/driver"
)

// Counts returns each queue's jobs by state (queue.Counter), sorted by
// queue name. Pending, Dead, Done and Cancelled are read from the counts
// table that the database's triggers keep as jobs are inserted, change
// state or are deleted, whoever writes them (see the counts migration of
// each dialect), so they are exact and cost one row per queue and state. Scheduled is
// exact too: the counts also take the jobs written to run later by
// five-minute bucket of their run time (the scheduled migration), and the
// jobs due within the current bucket are counted on the claim index (up to
// 10,000; past it Scheduled carries More and Ready Estimate). Running is
// what the workers report they hold (queue.WorkerInfo Running plus
// Reserved, summed over the workers seen within the worker TTL, see
// WithMaintenance), O(workers) rows: at most about a second old while jobs
// come and go, exact once the workers are quiet. Jobs leased by a process
// that reports nothing (a bare Reserve, or a worker that died, until their
// leases expire and another worker takes them) count as Ready. Ready is
// the rest of Pending.
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
		later, err := q.readScheduled(ctx, st, micros(now))
		if err != nil {
			return err
		}
		held, err := q.heldByQueue(ctx, st, now)
		if err != nil {
			return q.wrap(ctx, err, "reading the workers' held jobs")
		}
		prios, err := q.priorities(ctx, st, pendingQueues(cs)...)
		if err != nil {
			return q.wrap(ctx, err, "reading the queues' priorities")
		}
		for i := range cs {
			if err := q.splitPending(ctx, st, &cs[i], prios[cs[i].Queue], micros(now), later[cs[i].Queue], held[cs[i].Queue]); err != nil {
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
	// A count is the sum of its shards (see foldCounts).
	rows, err := st.Query(ctx, q.stmt(qCounts))
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
		case stateGrouped:
			c.Grouped = n
		case stateSequenced:
			c.Sequenced = n
		}
	}
	if err := rows.Err(); err != nil {
		return nil, q.wrap(ctx, err, "reading job counts")
	}
	return out, nil
}

// pendingQueues names the queues of cs with pending jobs.
func pendingQueues(cs []queue.QueueCounts) []string {
	var names []string
	for _, c := range cs {
		if c.Pending > 0 {
			names = append(names, c.Queue)
		}
	}
	return names
}

// splitPending fills c's Ready, Scheduled and Running from c.Pending
// (prios: the queue's priorities, see priorities):
// Scheduled is later, the jobs of the queue's buckets after the current
// one (readScheduled), plus those due within the current bucket, counted
// up to countCap by ranges of the claim index; Running is held, the jobs
// the live workers hold (heldByQueue), at most what Pending leaves (a
// report may lag the counts by a moment); Ready is the rest.
func (q *Queue) splitPending(ctx context.Context, st statements, c *queue.QueueCounts, prios []any, now, later, held int64) error {
	if c.Pending <= 0 {
		return nil
	}
	query, args := q.scheduledCountQuery(c.Queue, prios, now)
	var scheduled int64
	if err := queryRow(ctx, st, query, args, &scheduled); err != nil {
		return q.wrap(ctx, err, "counting jobs of queue %s", c.Queue)
	}
	c.Scheduled = capped(scheduled)
	c.Scheduled.N += later
	c.Running = queue.Count{N: max(min(held, c.Pending-c.Scheduled.N), 0)}
	ready := c.Pending - c.Scheduled.N - c.Running.N
	c.Ready = queue.Count{N: max(ready, 0), Estimate: c.Scheduled.More}
	return nil
}

// foldCounts adds the counts of every shard that no transaction holds to
// shard 0 and deletes them (dialect.foldCounts), so the counts table keeps
// about one row per queue, state and connection in use however many
// connections have come and gone. The maintenance pass runs it.
func (q *Queue) foldCounts(ctx context.Context) error {
	return q.d.foldCounts(ctx, q)
}

var _ queue.Inspector = (*Queue)(nil)
