package queue

import (
	"context"
	"errors"
	"fmt"
	"maps"

	"github.com/meridianjobs/meridian/queue/driver"
)

// Hooks for instrumentation packages (metrics, tracing, alerts) that live
// outside queue so that a program that uses none of them links none of
// their dependencies.

// DispatchInterceptor sees every job an intercepted Pusher (see Intercept)
// pushes, just before the push. It may change j (its Meta, for example, to
// carry trace context to the consumer) and returns the context the push
// runs under and a function that is called once with the push's outcome:
// nil when the job was stored, an error matching ErrDuplicate when it was
// skipped as a duplicate, any other error when the push failed. done may
// be nil.
//
// j.Meta is the interceptor's own copy: writing to it does not change the
// caller's Job.
type DispatchInterceptor func(ctx context.Context, j *Job) (_ context.Context, done func(error))

// Intercept returns a Pusher that runs the interceptors, in order, on every
// job before pushing it to p. Dispatch, Enqueue, DispatchMany and PushMany
// through the result are intercepted; the result is a BatchPusher whether
// or not p is one (without p's batch insert it pushes one job at a time).
//
// Use the intercepted Pusher for producing; give the Worker the Queue
// itself.
func Intercept(p Pusher, interceptors ...DispatchInterceptor) *InterceptedPusher {
	return &InterceptedPusher{p: p, ics: interceptors}
}

// InterceptedPusher is the Pusher Intercept returns.
type InterceptedPusher struct {
	p   Pusher
	ics []DispatchInterceptor
}

// Unwrap returns the Pusher that the jobs are pushed to.
func (ip *InterceptedPusher) Unwrap() Pusher { return ip.p }

// before runs the interceptors on j and returns the push's context and the
// outcome callbacks, in reverse order.
func (ip *InterceptedPusher) before(ctx context.Context, j *Job) (context.Context, []func(error)) {
	if j.ID == "" {
		j.ID = driver.NewID()
	}
	if j.Meta != nil {
		j.Meta = maps.Clone(j.Meta)
	} else {
		j.Meta = make(map[string]string)
	}
	var dones []func(error)
	for _, ic := range ip.ics {
		var done func(error)
		ctx, done = ic(ctx, j)
		if done != nil {
			dones = append(dones, done)
		}
	}
	return ctx, dones
}

func after(dones []func(error), err error) {
	for i := len(dones) - 1; i >= 0; i-- {
		dones[i](err)
	}
}

// Push runs the interceptors on j and pushes it.
func (ip *InterceptedPusher) Push(ctx context.Context, j Job) error {
	pctx, dones := ip.before(ctx, &j)
	err := ip.p.Push(pctx, j)
	after(dones, err)
	return err
}

// PushMany runs the interceptors on every job and pushes them with p's
// batch insert when p is a BatchPusher, else one at a time. The outcome
// callbacks see ErrDuplicate for a job that was skipped. The batch runs
// under ctx, not under the contexts the interceptors return.
func (ip *InterceptedPusher) PushMany(ctx context.Context, jobs []Job) ([]bool, error) {
	dones := make([][]func(error), len(jobs))
	for i := range jobs {
		_, dones[i] = ip.before(ctx, &jobs[i])
	}
	bp, ok := ip.p.(driver.BatchPusher)
	if !ok {
		stored := make([]bool, len(jobs))
		for i, j := range jobs {
			err := ip.p.Push(ctx, j)
			after(dones[i], err)
			switch {
			case errors.Is(err, ErrDuplicate):
			case err != nil:
				for k := i + 1; k < len(jobs); k++ {
					after(dones[k], err)
				}
				return nil, err
			default:
				stored[i] = true
			}
		}
		return stored, nil
	}
	stored, err := bp.PushMany(ctx, jobs)
	for i := range jobs {
		switch {
		case err != nil:
			after(dones[i], err)
		case i < len(stored) && stored[i]:
			after(dones[i], nil)
		default:
			after(dones[i], ErrDuplicate)
		}
	}
	return stored, err
}

var _ driver.BatchPusher = (*InterceptedPusher)(nil)

// Observers returns an Observer that passes every event to each of obs in
// order, so that a Worker (which takes one Observer) can feed several.
func Observers(obs ...Observer) Observer {
	return ObserverFunc(func(e Event) {
		for _, o := range obs {
			o.Observe(e)
		}
	})
}

// Middlewares composes middleware into one, outermost first, as
// Worker.Use applies them.
func Middlewares(mw ...Middleware) Middleware {
	return func(h Handler) Handler {
		for i := len(mw) - 1; i >= 0; i-- {
			h = mw[i](h)
		}
		return h
	}
}

// RunJob runs one attempt of j synchronously, as the Worker would run it,
// and returns the handler's error: the handler registered for j.Name,
// wrapped in the worker's middleware, under a context that carries j
// (JobFromContext) and j's timeout (or the worker's). A panic is returned
// as an error matching ErrPanic; an unregistered name as one matching
// ErrUnknownJob. Nothing is reserved, acked, retried or observed: it is for
// tests (queuetest.Work) and tools that run a job outside Run.
func (w *Worker) RunJob(ctx context.Context, j Job) error {
	h := w.handler(j.Name)
	if h == nil {
		return fmt.Errorf("%w: %q (job %s); register one with Handle", ErrUnknownJob, j.Name, j.ID)
	}
	timeout := w.timeout
	if j.Timeout > 0 {
		timeout = j.Timeout
	}
	ctx = context.WithValue(context.WithValue(ctx, jobKey{}, &j), resultKey{}, new(resultSlot))
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, timeout, ErrTimeout)
		defer cancel()
	}
	return safeCall(ctx, w.chain(h), &j)
}
