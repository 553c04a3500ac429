package queue

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// jobContext is a handler's context: a child of the run's base context
// that carries its job (JobFromContext) and can be cancelled on its own,
// with a cause (a lost lease, a cancel of the job in the store).
//
// Its cancellable part, a context.WithCancelCause child of base, is made
// only when first needed: when the handler (or a timeout derived from the
// context) asks for Done, or when the job is cancelled. Until then Err,
// Value and context.Cause answer for base, which is what the child would
// answer while not cancelled. A handler that never waits on its context,
// as a quick job does, so costs no allocation of its own (the jobContext
// lives in the job's held lease entry, see heldLeases.run) instead of three
// plus an entry added to and removed from base's set of children, under
// base's lock, which every executor shares.
type jobContext struct {
	base context.Context
	job  *Job
	// hold is the job's held lease entry and set the run's held leases,
	// through which Err and Holding end the lease once its deadline has
	// passed; nil for a job not held.
	hold *held
	set  *heldLeases

	mu    sync.Mutex // serialises making inner
	inner atomic.Pointer[cancellable]
}

// cancellable is a context with the function that cancels it.
type cancellable struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
}

var _ context.Context = (*jobContext)(nil)

// newJobContext returns j's handler context under base.
func newJobContext(base context.Context, j *Job) *jobContext {
	return &jobContext{base: base, job: j}
}

// cancellable returns the cancellable child of base, making it first if
// needed.
func (c *jobContext) cancellable() *cancellable {
	if in := c.inner.Load(); in != nil {
		return in
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if in := c.inner.Load(); in != nil {
		return in
	}
	ctx, cancel := context.WithCancelCause(c.base)
	in := &cancellable{ctx: ctx, cancel: cancel}
	c.inner.Store(in)
	return in
}

// current is the context that answers for c: the cancellable child once
// made, else base.
func (c *jobContext) current() context.Context {
	if in := c.inner.Load(); in != nil {
		return in.ctx
	}
	return c.base
}

func (c *jobContext) Deadline() (time.Time, bool) { return c.current().Deadline() }
func (c *jobContext) Done() <-chan struct{}       { return c.cancellable().ctx.Done() }

// Err ends the job's lease if its deadline has passed (see Holding) and
// returns the context's error.
func (c *jobContext) Err() error {
	c.check()
	return c.current().Err()
}

func (c *jobContext) Value(key any) any {
	switch key {
	case jobKey{}:
		return c.job
	case holdKey{}:
		if c.hold != nil {
			return c
		}
	}
	return c.current().Value(key)
}

// check ends the job's lease, cancelling the context with ErrLeaseLost,
// when the lease's deadline (its stored expiry minus the margin) has
// passed. It reads the clock itself.
func (c *jobContext) check() {
	if c.hold != nil && time.Now().UnixNano() >= c.hold.deadline.Load() {
		c.set.lapse(c.hold)
	}
}

// outer returns the context the job's context is a child of.
func (c *jobContext) outer() context.Context { return c.base }

// cancel cancels the context with cause (context.CancelCauseFunc).
func (c *jobContext) cancel(cause error) { c.cancellable().cancel(cause) }

// release frees what the context holds once its handler returned: the
// cancellable child's place among base's children.
func (c *jobContext) release() {
	if in := c.inner.Load(); in != nil {
		in.cancel(nil)
	}
}

func (c *jobContext) String() string { return "queue.jobContext" }
