package queue

import (
	"context"
	"sync"
	"time"
)

// leaseMargin returns the margin of a lease of length lease: set when
// positive, else the default (the larger of DefaultLeaseMargin and a
// tenth of the lease), capped at half the lease either way.
func leaseMargin(lease, set time.Duration) time.Duration {
	m := set
	if m <= 0 {
		m = max(DefaultLeaseMargin, lease/10)
	}
	return min(m, lease/2)
}

// Holding returns nil while everything the handler context ctx (or a
// context derived from it) runs under still holds: the job's lease, and
// the slot of each Concurrency limit around the handler. Otherwise it
// returns why not: ErrLeaseLost once a lease or slot could not be renewed
// by its stored expiry minus the margin (Worker.LeaseMargin), or was
// taken by another holder; ErrCancelled, ErrTimeout or the context's own
// error for the other ends of an attempt.
//
// Unlike ctx.Err() on a derived context, it reads the clock itself: a
// process that was paused (SIGSTOP, a stalled VM) past a margin sees the
// lease over at its first call after it resumes, before any timer has
// run. Call it just before each write the job makes to a system that must
// not see two attempts of the job at once, and carry the lease token
// (Job.LeaseToken) along where that system can check it: a paused process
// can still be between this check and its write.
func Holding(ctx context.Context) error {
	for c := ctx; c != nil; {
		h, _ := c.Value(holdKey{}).(holder)
		if h == nil {
			break
		}
		h.check()
		c = h.outer()
	}
	if err := ctx.Err(); err != nil {
		if cause := context.Cause(ctx); cause != nil {
			return cause
		}
		return err
	}
	return nil
}

// holdKey is the context key under which a context that holds something
// until a deadline (a job's lease, a concurrency slot) finds the innermost
// such holder.
type holdKey struct{}

// holder is something a context holds until a deadline: check ends it
// once the deadline has passed, and outer is the context it is a child of,
// where holders further out are found.
type holder interface {
	check()
	outer() context.Context
}

// hold is a context that is cancelled with cause at a deadline unless
// extend moves the deadline on first: the handler's context while it
// holds a concurrency slot. Err, and Holding, read the clock themselves.
type hold struct {
	context.Context
	parent context.Context
	cancel context.CancelCauseFunc
	cause  error

	mu    sync.Mutex
	end   time.Time
	timer *time.Timer
}

// newHold returns a hold under parent that ends with cause at end unless
// extended. Call stop when done with it.
func newHold(parent context.Context, end time.Time, cause error) *hold {
	ctx, cancel := context.WithCancelCause(parent)
	h := &hold{Context: ctx, parent: parent, cancel: cancel, cause: cause, end: end}
	h.timer = time.AfterFunc(time.Until(end), h.check)
	return h
}

// Value returns the hold itself for holdKey, and otherwise what the
// context it wraps holds.
func (h *hold) Value(key any) any {
	if key == (holdKey{}) {
		return h
	}
	return h.Context.Value(key)
}

// Err ends the hold if its deadline has passed and returns the context's
// error.
func (h *hold) Err() error {
	h.check()
	return h.Context.Err()
}

func (h *hold) outer() context.Context { return h.parent }

// check ends the hold when its deadline has passed, and otherwise sets
// its timer for the deadline.
func (h *hold) check() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.Context.Err() != nil {
		return
	}
	if left := time.Until(h.end); left > 0 {
		h.timer.Reset(left)
		return
	}
	h.cancel(h.cause)
}

// endTime returns the deadline.
func (h *hold) endTime() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.end
}

// extend moves the deadline on to end and reports true, or reports false
// when the hold has ended: an ended hold never resumes.
func (h *hold) extend(end time.Time) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.Context.Err() != nil || !time.Now().Before(h.end) {
		h.cancel(h.cause)
		return false
	}
	h.end = end
	return true
}

// stop ends the hold with cause and frees its timer.
func (h *hold) stop(cause error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.timer.Stop()
	h.cancel(cause)
}

func (h *hold) String() string { return "queue.hold" }
