package sqlqueue

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"

	queue "github.com/meridianjobs/meridian/queue/driver"
)

// Concurrent single pushes are coalesced (group push). A web service
// dispatches one job per request from many goroutines at once; each Push
// alone is an INSERT statement and, on PostgreSQL and MySQL, a commit
// whose cost on the server is mostly the round trip, the parse and the
// WAL flush, not the row. So at most a few Pushes of a Queue run on
// their own at once (its push lanes, WithPushLanes); a Push arriving while
// every lane is busy waits, and when a lane frees, every Push waiting
// then goes to the store as one PushMany: one statement and one commit
// for all of them. At a low rate no Push waits (a lane is free) and
// nothing changes; at a high one the batches grow with the rate, so the
// store's work per job falls as the load rises instead of the queue of
// connections growing.
//
// Each coalesced Push gets its own answer, as if it had run alone: nil
// when its job was stored, a *queue.DuplicateError naming the holder
// when PushMany skipped it. If the batch fails, its jobs are pushed one
// by one, so one job the store refuses cannot fail the others.

// maxGroupPush is the most waiting Pushes one batch takes.
const maxGroupPush = 1000

// pushGroup is the group push state of a Queue.
type pushGroup struct {
	mu      sync.Mutex
	running int           // lanes in use: Pushes alone plus batches
	waiting []*pushWaiter // Pushes waiting for a lane, oldest first
	wg      sync.WaitGroup
}

// pushWaiter is one Push waiting to join a batch.
type pushWaiter struct {
	ctx context.Context
	j   queue.Job
	// ownID: the Push gave j its ID (the caller left it empty), so a
	// duplicate of that ID found after a failed batch can only be j
	// itself, stored by the batch before its error was reported.
	ownID bool
	taken bool          // a batch holds it (under pushGroup.mu)
	done  chan struct{} // closed when err is set
	err   error
}

// lanes reports how many Pushes of q run on their own at once; 0 turns
// grouping off.
func (q *Queue) lanes() int {
	if q.cfg.pushLanes != nil {
		return *q.cfg.pushLanes
	}
	return q.d.pushLanes()
}

// pushGrouped stores j, which Push validated and gave an ID, alone when a
// lane is free and otherwise in the next batch. ownID reports whether
// Push made the ID.
func (q *Queue) pushGrouped(ctx context.Context, j queue.Job, ownID bool) error {
	g := &q.group
	g.mu.Lock()
	if g.running < q.lanes() {
		g.running++
		g.mu.Unlock()
		err := q.pushAlone(ctx, j)
		q.freeLane()
		return err
	}
	w := &pushWaiter{ctx: ctx, j: j, ownID: ownID, done: make(chan struct{})}
	g.waiting = append(g.waiting, w)
	g.mu.Unlock()
	select {
	case <-w.done:
		return w.err
	case <-ctx.Done():
	}
	g.mu.Lock()
	if !w.taken {
		// Not in a batch yet: leave without storing anything.
		if i := slices.Index(g.waiting, w); i >= 0 {
			g.waiting = slices.Delete(g.waiting, i, i+1)
		}
		g.mu.Unlock()
		return ctx.Err()
	}
	g.mu.Unlock()
	// The batch holding j runs on: its answer may come just after.
	select {
	case <-w.done:
		return w.err
	default:
		return q.wrap(ctx, ctx.Err(), "pushing job %s (in a group push still running: it may be stored)", j.ID)
	}
}

// pushAlone is the push of one job, as Push made it before grouping.
func (q *Queue) pushAlone(ctx context.Context, j queue.Job) error {
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

// freeLane hands a lane that finished its push to the Pushes waiting, as
// one batch run by a goroutine of its own, or frees it.
func (q *Queue) freeLane() {
	g := &q.group
	g.mu.Lock()
	ws := q.takeWaiting()
	if len(ws) == 0 {
		g.running--
		g.mu.Unlock()
		return
	}
	g.wg.Add(1)
	g.mu.Unlock()
	go func() {
		defer g.wg.Done()
		for len(ws) > 0 {
			q.pushBatchOf(ws)
			g.mu.Lock()
			ws = q.takeWaiting()
			if len(ws) == 0 {
				g.running--
			}
			g.mu.Unlock()
		}
	}()
}

// takeWaiting takes up to maxGroupPush waiting Pushes whose callers still
// wait, under g.mu.
func (q *Queue) takeWaiting() []*pushWaiter {
	g := &q.group
	n := min(len(g.waiting), maxGroupPush)
	if n == 0 {
		return nil
	}
	ws := slices.Clone(g.waiting[:n])
	g.waiting = slices.Delete(g.waiting, 0, n)
	for _, w := range ws {
		w.taken = true
	}
	return ws
}

// pushBatchOf pushes the jobs of ws as one PushMany and answers each. The
// batch runs until it ends or every caller in it has given up.
func (q *Queue) pushBatchOf(ws []*pushWaiter) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(ws[0].ctx))
	defer cancel()
	var live atomic.Int64
	live.Store(int64(len(ws)))
	for _, w := range ws {
		stop := context.AfterFunc(w.ctx, func() {
			if live.Add(-1) == 0 {
				cancel()
			}
		})
		defer stop()
	}
	jobs := make([]queue.Job, len(ws))
	for i, w := range ws {
		jobs[i] = w.j
	}
	// Each job stands alone, as if pushed by itself: the insertion
	// commits on its own, outside a transaction, and a revival of a
	// finished job's ID follows it as a Push's does (poolPush runs a
	// PushMany of several in a transaction, the batch stored whole or not
	// at all, which a group push does not need and which costs it a
	// round trip or two).
	var stored []bool
	err := q.againOnConflict(ctx, func() error {
		var err error
		stored, err = q.pushMany(ctx, q.reads(), false, jobs)
		return err
	})
	if err == nil {
		q.wakeFor(jobs, stored)
		q.announce(jobs, stored)
	}
	if err != nil {
		// Push each alone, under its caller's context: the store may
		// have refused one job, and the others must not fail with it.
		for _, w := range ws {
			w.answer(q.retryAlone(w))
		}
		return
	}
	for i, w := range ws {
		if stored[i] {
			w.answer(nil)
			continue
		}
		dup, err := q.duplicateOf(w.ctx, q.reads(), w.j)
		if err != nil {
			w.answer(q.wrap(w.ctx, err, "looking up the holder of job %s", w.j.ID))
			continue
		}
		w.answer(dup)
	}
}

// retryAlone pushes w's job alone after its batch failed.
func (q *Queue) retryAlone(w *pushWaiter) error {
	if err := w.ctx.Err(); err != nil {
		return q.wrap(w.ctx, err, "pushing job %s (its group push failed: it may be stored)", w.j.ID)
	}
	err := q.pushAlone(w.ctx, w.j)
	if dup, ok := errors.AsType[*queue.DuplicateError](err); ok && w.ownID && dup.ExistingID == w.j.ID {
		return nil // the failed batch stored it: its ID is ours alone
	}
	return err
}

// answer gives w's caller its result.
func (w *pushWaiter) answer(err error) {
	w.err = err
	close(w.done)
}

// waitGrouped waits until the batches of coalesced Pushes have ended.
func (q *Queue) waitGrouped() { q.group.wg.Wait() }
