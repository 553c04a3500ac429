package sqlqueue

import (
	"context"

	queue "github.com/meridianjobs/meridian/queue/driver"
)

// Concurrent single pushes are coalesced (package internal/pushgroup): a
// web service dispatches one job per request from many goroutines, and
// each Push alone is an INSERT and, on PostgreSQL and MySQL, a commit
// whose cost on the server is mostly the round trip, the parse and the
// log flush, not the row. So at most a few Pushes of a Queue run on their
// own at once (its push lanes, WithPushLanes); the Pushes arriving while
// they are busy go to the store together as one multi-row insertion
// (groupPusher.PushGroup), each answered as if alone.

// lanes reports how many Pushes of q run on their own at once; 0 turns
// grouping off.
func (q *Queue) lanes() int {
	if q.cfg.pushLanes != nil {
		return *q.cfg.pushLanes
	}
	return q.d.pushLanes()
}

// groupPusher is q as the pushgroup.Store of its Pushes.
type groupPusher struct{ q *Queue }

// PushAlone is the push of one job, as Push made it before grouping.
func (g groupPusher) PushAlone(ctx context.Context, j queue.Job) error {
	q := g.q
	err := q.againOnConflict(ctx, func() error {
		if holdsInTx([]queue.Job{j}) {
			return q.d.writeTx(ctx, q, func(ex execer) error { return q.pushOne(ctx, stmts(ex), true, j) })
		}
		return q.pushOne(ctx, q.reads(), false, j)
	})
	if err != nil {
		return err
	}
	q.wake.at(j.AvailableAt)
	q.announce([]queue.Job{j}, nil)
	return nil
}

// PushGroup inserts jobs as if each were pushed by itself: the insertion
// commits on its own, outside a transaction, and a revival of a finished
// job's ID follows it as a Push's does. (PushMany runs a push of several
// in a transaction, stored whole or not at all, which a group does not
// need and which costs it a round trip or two.) A job not stored gets
// the *queue.DuplicateError naming its holder.
func (g groupPusher) PushGroup(ctx context.Context, jobs []queue.Job) ([]error, error) {
	q := g.q
	var stored []bool
	err := q.againOnConflict(ctx, func() error {
		var err error
		stored, err = q.pushMany(ctx, q.reads(), false, jobs)
		return err
	})
	if err != nil {
		return nil, q.wrap(ctx, err, "pushing a group of %d jobs", len(jobs))
	}
	q.wakeFor(jobs, stored)
	q.announce(jobs, stored)
	answers := make([]error, len(jobs))
	for i, j := range jobs {
		if stored[i] {
			continue
		}
		dup, err := q.duplicateOf(ctx, q.reads(), j)
		if err != nil {
			answers[i] = q.wrap(ctx, err, "looking up the holder of job %s", j.ID)
			continue
		}
		answers[i] = dup
	}
	return answers, nil
}

// waitGrouped waits until the groups of coalesced Pushes have ended.
func (q *Queue) waitGrouped() { q.group.Wait() }
