package pushgroup

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/meridianjobs/meridian/queue/driver"
)

// MaxGroup is the most waiting pushes one group takes.
const MaxGroup = 1000

// MaxLanes is the most push lanes a driver accepts (sqlqueue and
// redisqueue's WithPushLanes, the URL parameter push_lanes).
const MaxLanes = 1024

// CheckLanes returns an error unless n is a number of push lanes a
// driver accepts: 0 (every push alone) to MaxLanes.
func CheckLanes(n int) error {
	if n < 0 || n > MaxLanes {
		return fmt.Errorf("push lanes %d: want 0 to %d", n, MaxLanes)
	}
	return nil
}

// ParseLanes reads the value of a queue URL's push_lanes parameter.
func ParseLanes(v string) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, fmt.Errorf("URL parameter push_lanes must be a whole number from 0 to %d, not %q", MaxLanes, v)
	}
	return n, CheckLanes(n)
}

// Store is what a Group pushes through.
type Store interface {
	// PushAlone stores one job, validated and with an ID, by itself.
	PushAlone(ctx context.Context, j driver.Job) error
	// PushGroup stores jobs (validated, with IDs), each standing alone:
	// answers[i] is jobs[i]'s, nil when stored. An error means the group
	// as a whole failed, and nothing is known to be stored.
	PushGroup(ctx context.Context, jobs []driver.Job) (answers []error, err error)
}

// Group is the group push state of one queue. The zero Group is ready;
// it must not be copied after first use.
type Group struct {
	// Name prefixes the errors the Group makes (the driver's package).
	Name string

	mu      sync.Mutex
	running int       // lanes in use: pushes alone plus groups
	waiting []*waiter // pushes waiting for a lane, oldest first
	wg      sync.WaitGroup
}

// waiter is one push waiting to join a group.
type waiter struct {
	ctx   context.Context
	j     driver.Job
	ownID bool
	taken bool          // a group holds it (under Group.mu)
	done  chan struct{} // closed when err is set
	err   error
}

// Push stores j (validated, with an ID) through s: alone when fewer than
// lanes pushes run, else in the next group. ownID reports that the caller
// made j's ID. lanes 0 pushes every job alone.
func (g *Group) Push(ctx context.Context, s Store, lanes int, j driver.Job, ownID bool) error {
	if lanes <= 0 {
		return s.PushAlone(ctx, j)
	}
	g.mu.Lock()
	if g.running < lanes {
		g.running++
		g.mu.Unlock()
		err := s.PushAlone(ctx, j)
		g.free(s)
		return err
	}
	w := &waiter{ctx: ctx, j: j, ownID: ownID, done: make(chan struct{})}
	g.waiting = append(g.waiting, w)
	g.mu.Unlock()
	select {
	case <-w.done:
		return w.err
	case <-ctx.Done():
	}
	g.mu.Lock()
	if !w.taken {
		// Not in a group yet: leave without storing anything.
		if i := slices.Index(g.waiting, w); i >= 0 {
			g.waiting = slices.Delete(g.waiting, i, i+1)
		}
		g.mu.Unlock()
		return ctx.Err()
	}
	g.mu.Unlock()
	select {
	case <-w.done: // the group's answer came meanwhile
		return w.err
	default:
		return fmt.Errorf("%s: pushing job %s (its group is still being written: it may be stored): %w", g.Name, j.ID, ctx.Err())
	}
}

// Waiting reports how many pushes wait for a lane.
func (g *Group) Waiting() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.waiting)
}

// Wait waits until the groups being written have ended.
func (g *Group) Wait() { g.wg.Wait() }

// free hands a lane whose push ended to the pushes waiting, as one group
// written by a goroutine of its own, or frees it.
func (g *Group) free(s Store) {
	g.mu.Lock()
	ws := g.take()
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
			g.write(s, ws)
			g.mu.Lock()
			ws = g.take()
			if len(ws) == 0 {
				g.running--
			}
			g.mu.Unlock()
		}
	}()
}

// take takes up to MaxGroup waiting pushes, under g.mu.
func (g *Group) take() []*waiter {
	n := min(len(g.waiting), MaxGroup)
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

// write pushes the jobs of ws as one group and answers each.
func (g *Group) write(s Store, ws []*waiter) {
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
	jobs := make([]driver.Job, len(ws))
	for i, w := range ws {
		jobs[i] = w.j
	}
	answers, err := s.PushGroup(ctx, jobs)
	for i, w := range ws {
		if err != nil {
			w.answer(g.alone(s, w))
		} else {
			w.answer(answers[i])
		}
	}
}

// alone pushes w's job by itself after its group failed.
func (g *Group) alone(s Store, w *waiter) error {
	if err := w.ctx.Err(); err != nil {
		return fmt.Errorf("%s: pushing job %s (its group failed: it may be stored): %w", g.Name, w.j.ID, err)
	}
	err := s.PushAlone(w.ctx, w.j)
	if dup, ok := errors.AsType[*driver.DuplicateError](err); ok && w.ownID && dup.ExistingID == w.j.ID {
		return nil // the failed group stored it: its ID is this push's alone
	}
	return err
}

// answer gives w's caller its result.
func (w *waiter) answer(err error) {
	w.err = err
	close(w.done)
}
