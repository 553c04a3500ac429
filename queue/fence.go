package queue

import (
	"context"
	"sync"
	"time"

	"github.com/meridianjobs/meridian/queue/driver"
)

// LeaderEpoch returns the epoch of the leader term that ctx (the context
// OnElected gives, or one derived from it) belongs to. User code that
// writes to systems of its own while leading passes the epoch along, and
// those systems refuse a write with a lower epoch than one they have seen:
// only the built-in leader writes are fenced by the store itself.
func LeaderEpoch(ctx context.Context) (int64, bool) {
	f, ok := driver.FenceFrom(ctx)
	return f.Epoch, ok
}

// Leading returns nil while the leader term of ctx (the context OnElected
// gives, or one derived from it) lasts, and otherwise the reason it ended
// (ErrLeadershipLost, or the context's own error). Unlike ctx.Err() on a
// derived context, it reads the clock itself: a process that was paused
// past the end of its term (SIGSTOP, a stalled VM) sees the term over at
// its first call after it resumes, before any timer has run. Call it just
// before each leader action.
func Leading(ctx context.Context) error {
	if t, ok := ctx.Value(termKey{}).(*term); ok {
		t.check()
	}
	if err := ctx.Err(); err != nil {
		if cause := context.Cause(ctx); cause != nil {
			return cause
		}
		return err
	}
	return nil
}

type termKey struct{}

// term is one leader term: the context OnElected runs under and the time
// it must end by unless a renewal moves that time on.
type term struct {
	context.Context
	cancel context.CancelCauseFunc
	fence  driver.Fence

	mu  sync.Mutex
	end time.Time // the stored expiry minus the margin
}

// newTerm starts a term under parent that ends at end unless extended.
func newTerm(parent context.Context, f driver.Fence, end time.Time) *term {
	ctx, cancel := context.WithCancelCause(driver.WithFence(parent, f))
	return &term{Context: ctx, cancel: cancel, fence: f, end: end}
}

// endTime returns the time the term ends unless extended.
func (t *term) endTime() time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.end
}

// Value returns the term itself for termKey, and otherwise what the
// context it wraps holds.
func (t *term) Value(key any) any {
	if key == (termKey{}) {
		return t
	}
	return t.Context.Value(key)
}

// Err ends the term if its end has passed (see Leading) and returns the
// context's error.
func (t *term) Err() error {
	t.check()
	return t.Context.Err()
}

// check ends the term when its end has passed.
func (t *term) check() {
	t.mu.Lock()
	over := !time.Now().Before(t.end)
	t.mu.Unlock()
	if over {
		t.cancel(ErrLeadershipLost)
	}
}

// extend moves the term's end to end (a renewal succeeded) and reports
// true, or reports false when the term is already over: a term that ended
// never resumes.
func (t *term) extend(end time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.Context.Err() != nil || !time.Now().Before(t.end) {
		return false
	}
	t.end = end
	return true
}

// stop ends the term with cause.
func (t *term) stop(cause error) { t.cancel(cause) }
