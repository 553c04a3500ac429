package queue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// errShutdown is the cause a job's context is cancelled with when the
// worker's shutdown grace runs out.
var errShutdown = errors.New("queue: worker shut down before the job finished")

// errStillRunning is the reason a job is given back when this process still
// runs an abandoned attempt of it.
var errStillRunning = errors.New("queue: an abandoned attempt of this job still runs in this process; released for another worker")

// executor is the part of a run that runs one attempt of a job (River's job
// executor): it checks the job can run, calls its handler under the job's
// timeout, abandons a handler that ignores cancellation, and hands the
// outcome to the completer.
type executor struct {
	// handlers are the worker's, each wrapped in the middleware once per run.
	handlers    map[string]Handler
	maxAttempts func(*Job) int
	timeout     time.Duration
	grace       time.Duration
	backoff     BackoffPolicy
	// typeBackoff holds the backoff of job types that set their own
	// (BackoffSetter), by job name.
	typeBackoff map[string]BackoffSetter
	maxSnoozes  int
	// base is the parent of handler contexts, cancelled at the end of the
	// shutdown grace.
	base      context.Context
	leases    *heldLeases
	completer *completer
	abandoned *abandoned
	// starts counts the attempts of prefetched jobs as they start when the
	// completer does not (acks not batched, or after it closed); nil when
	// the queue is no Starter (every reservation counted one).
	starts *starts
	// apart holds a token while a recovered job (Job.Recovered) runs, so
	// that such jobs run one at a time; nil: no such limit.
	apart   chan struct{}
	observe func(EventKind, *Job, error, time.Duration)
	log     *slog.Logger
}

// start counts the attempt of the prefetched job j before its handler
// runs (in the next ack flush when acks are batched, else in a start call
// of its own), and reports whether it may run. A lost lease drops the job (another
// consumer has it, or will); a failed call releases it uncounted for a
// later attempt.
func (e *executor) start(j *Job) bool {
	lost, err, queued := e.completer.markStart(j)
	if !queued {
		lost, err = e.starts.start(j.Lease())
	}
	switch {
	case err != nil:
		e.log.Warn("queue: recording that a prefetched job starts failed; releasing it", "job", j.ID, "name", j.Name, "err", err)
		e.completer.nack(j, fmt.Errorf("recording the start of its attempt: %w", err), time.Now(), time.Now(), 0)
		return false
	case lost:
		e.leases.remove(j.Lease())
		e.observe(EventLeaseLost, j, nil, 0)
		e.log.Warn("queue: a prefetched job's lease was lost before it started", "job", j.ID, "name", j.Name)
		return false
	}
	j.Attempts++
	return true
}

// execute runs one attempt of j and records its outcome. hj is j's held
// entry, or nil to look it up.
func (e *executor) execute(j *Job, hj *held) {
	maxA := e.maxAttempts(j)
	attempt := j.Attempts // this attempt's number
	unstarted := hj != nil && hj.unstarted
	if unstarted {
		attempt++
	}
	if attempt > maxA && unstarted {
		// Its attempts all started and none ended with an outcome.
		err := fmt.Errorf("%w: job %s was started %d times and allows %d attempts; those attempts' leases expired before they finished (a worker crashed, was killed, or lost its lease)",
			ErrAttemptsExhausted, j.ID, j.Attempts, maxA)
		e.completer.fail(j, err, time.Now(), 0)
		return
	}
	if attempt > maxA {
		err := fmt.Errorf("%w: job %s was started %d times but allows %d attempts; the earlier attempts' leases expired before they finished (a worker crashed, was killed, or lost its lease)",
			ErrAttemptsExhausted, j.ID, attempt, maxA)
		e.completer.fail(j, err, time.Now(), 0)
		return
	}
	if e.leases.isCancelled(j.ID) {
		// Cancelled in the store while it waited here: it never runs.
		e.completer.cancelled(j, ErrCancelled, time.Now(), 0)
		return
	}
	if e.base.Err() != nil {
		// The shutdown grace ran out before this prefetched job started:
		// release it for another worker without running it.
		e.completer.nack(j, errShutdown, time.Now(), time.Now(), 0)
		return
	}
	h := e.handlers[j.Name]
	if h == nil {
		err := fmt.Errorf("%w: %q (job %s); register one with Handle", ErrUnknownJob, j.Name, j.ID)
		e.completer.fail(j, err, time.Now(), 0)
		return
	}
	if e.abandoned.runs(j.ID) {
		// Never two copies of one job in one process. A job reserved
		// without its attempt counted goes back as it was; one whose
		// reservation counted it spends that attempt.
		e.log.Warn("queue: job's abandoned attempt still runs here; releasing it", "job", j.ID, "name", j.Name)
		if !unstarted && attempt >= maxA {
			e.completer.fail(j, errStillRunning, time.Now(), 0)
			return
		}
		e.completer.nack(j, errStillRunning, time.Now().Add(e.backoffFor(j)), time.Now(), 0)
		return
	}
	if j.Recovered && e.apart != nil {
		// Its last delivery ended in an expired lease: its process may
		// have died of it. It runs apart from the other such jobs of this
		// process, one at a time, so that a job that kills its process
		// kills no other job's attempt that also came back this way, and
		// a crash loop narrows onto the job that causes it.
		select {
		case e.apart <- struct{}{}:
			defer func() { <-e.apart }()
		case <-e.base.Done():
			e.completer.nack(j, errShutdown, time.Now(), time.Now(), 0)
			return
		}
	}

	if unstarted && !e.start(j) {
		return
	}

	timeout := e.timeout
	if j.Timeout > 0 {
		timeout = j.Timeout
	}
	hd, jc := e.leases.run(j, hj, e.base)
	defer jc.release()
	if jc.Err() != nil && errors.Is(context.Cause(jc), ErrLeaseLost) {
		// Its lease ran out to its margin while it waited to start:
		// another process may be given the job at any moment.
		e.leases.stop(hd)
		e.leases.remove(j.Lease())
		e.observe(EventLeaseLost, j, nil, 0)
		e.log.Warn("queue: a job's lease ran out before its handler started; it is not run", "job", j.ID, "name", j.Name)
		return
	}
	var jctx context.Context = jc
	if timeout > 0 {
		var cancelT context.CancelFunc
		jctx, cancelT = context.WithTimeoutCause(jctx, timeout, ErrTimeout)
		defer cancelT()
	}

	e.observe(EventStarted, j, nil, 0)
	start := time.Now()
	var err error
	if timeout > 0 {
		err = e.callAbandonable(jctx, h, j, timeout)
	} else {
		err = safeCall(jctx, h, j)
	}
	rt := time.Since(start)
	lost, cancelled, released := e.leases.stop(hd)

	if err != nil && errors.Is(context.Cause(jctx), ErrTimeout) && !errors.Is(err, ErrTimeout) {
		err = fmt.Errorf("%w after %s: %w", ErrTimeout, timeout, err)
	}
	switch {
	case released:
		e.log.Warn("queue: handler returned after shutdown released its job; its result is discarded", "job", j.ID, "name", j.Name, "err", err)
	case cancelled:
		e.completer.cancelled(j, ErrCancelled, start, rt)
	case lost:
		e.leases.remove(j.Lease())
		e.observe(EventLeaseLost, j, err, rt)
		e.log.Warn("queue: job's lease was lost while it ran; its result is discarded", "job", j.ID, "name", j.Name)
	case err == nil:
		e.completer.ack(j, start, rt)
	case errors.Is(context.Cause(jctx), errShutdown):
		e.completer.nack(j, fmt.Errorf("%w: %w", errShutdown, err), time.Now(), start, rt)
	case IsCancel(err):
		e.completer.cancel(j, err, start, rt)
	case IsSnooze(err) && e.snoozeOK(err, j):
		e.completer.snooze(j, err, start, rt)
	case IsPermanent(err) || j.Attempts >= maxA:
		e.completer.fail(j, err, start, rt)
	case !j.RetryUntil.IsZero() && time.Now().After(j.RetryUntil):
		e.completer.fail(j, fmt.Errorf("%w: retries stopped at %s: %w", ErrAttemptsExhausted, j.RetryUntil.Format(time.RFC3339), err), start, rt)
	default:
		at := time.Now().Add(e.backoffFor(j))
		var se *snoozeError
		if errors.As(err, &se) {
			// A snooze beyond the cap counts as an attempt, at its time.
			at = time.Now().Add(se.d)
			err = fmt.Errorf("%w: snoozed more than %d times; this snooze counts as an attempt", err, e.maxSnoozes)
		}
		e.completer.nack(j, err, at, start, rt)
	}
}

// snoozeOK reports whether the handler's snooze result err may snooze j:
// j has snoozes left (uncounted snoozes always may).
func (e *executor) snoozeOK(err error, j *Job) bool {
	var se *snoozeError
	if !errors.As(err, &se) {
		return false
	}
	return !se.counted || j.Snoozes < e.maxSnoozes
}

// backoffFor returns the delay before j's next attempt: its type's own
// backoff when it sets one, else the worker's policy.
func (e *executor) backoffFor(j *Job) time.Duration {
	if b := e.typeBackoff[j.Name]; b != nil {
		return b.Backoff(j.Attempts)
	}
	return e.backoff.Backoff(j.Attempts)
}

// safeCall runs h, turning a panic into an error with its stack.
func safeCall(ctx context.Context, h Handler, j *Job) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = panicError(p)
		}
	}()
	return h(ctx, *j)
}

// callAbandonable runs h on its own goroutine so that a handler that ignores
// its context past the timeout can be abandoned after the grace period. The
// goroutine is the handler's own: it ends when the handler returns, and
// nothing else is left waiting for it.
func (e *executor) callAbandonable(ctx context.Context, h Handler, j *Job, timeout time.Duration) error {
	c := &abandonableCall{done: make(chan error, 1)}
	go func() {
		err := safeCall(ctx, h, j)
		if c.returned(err) {
			e.abandoned.remove(j.ID)
			e.log.Warn("queue: abandoned handler finally returned; its result is discarded", "job", j.ID, "name", j.Name, "err", err)
		}
	}()
	select {
	case err := <-c.done:
		return err
	case <-ctx.Done():
	}
	t := time.NewTimer(e.grace)
	defer t.Stop()
	select {
	case err := <-c.done:
		return err
	case <-t.C:
	}
	if !e.abandoned.add(j.ID) {
		// At the cap: keep the slot until the handler returns rather than
		// let stuck goroutines pile up.
		e.log.Error("queue: handler did not return after its context was cancelled, and the worker already abandoned its limit of handlers; waiting for it",
			"job", j.ID, "name", j.Name, "abandoned", e.abandoned.count())
		return <-c.done
	}
	if returned, err := c.abandon(); returned {
		e.abandoned.remove(j.ID)
		return err // it returned just now
	}
	e.observe(EventAbandoned, j, context.Cause(ctx), 0)
	e.log.Error("queue: handler did not return after its context was cancelled; abandoning its goroutine",
		"job", j.ID, "name", j.Name, "timeout", timeout, "grace", e.grace, "cause", context.Cause(ctx), "abandoned", e.abandoned.count())
	if errors.Is(context.Cause(ctx), ErrTimeout) {
		return fmt.Errorf("%w after %s: handler did not return within %s of cancellation", ErrTimeout, timeout, e.grace)
	}
	return fmt.Errorf("handler did not return within %s of cancellation: %w", e.grace, context.Cause(ctx))
}

// abandonableCall is the hand-off between a handler's goroutine and the
// executor that may abandon it: exactly one of them sees the other's step
// first.
type abandonableCall struct {
	done chan error // buffered: the handler's result, if not abandoned

	mu            sync.Mutex
	isAbandoned   bool
	handlerReturn bool
}

// returned records the handler's return and reports whether it had been
// abandoned (and its result must be discarded).
func (c *abandonableCall) returned(err error) (abandoned bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.handlerReturn = true
	if c.isAbandoned {
		return true
	}
	c.done <- err
	return false
}

// abandon marks the call abandoned, unless the handler has returned, in
// which case it reports true and the handler's result.
func (c *abandonableCall) abandon() (returned bool, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.handlerReturn {
		return true, <-c.done
	}
	c.isAbandoned = true
	return false, nil
}

// abandoned counts the handlers a worker abandoned that still run, by job,
// up to a cap.
type abandoned struct {
	// running mirrors n for the lock-free check every job makes.
	running atomic.Int64

	mu    sync.Mutex
	limit int
	byJob map[string]int
	n     int
}

func newAbandoned(limit int) *abandoned {
	return &abandoned{limit: limit, byJob: make(map[string]int)}
}

// setLimit sets the cap.
func (a *abandoned) setLimit(n int) {
	a.mu.Lock()
	a.limit = n
	a.mu.Unlock()
}

// add counts an abandoned handler of job id, unless the cap is reached.
func (a *abandoned) add(id string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.n >= a.limit {
		return false
	}
	a.n++
	a.running.Store(int64(a.n))
	a.byJob[id]++
	return true
}

// remove uncounts an abandoned handler of job id that returned.
func (a *abandoned) remove(id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.n--
	a.running.Store(int64(a.n))
	if a.byJob[id]--; a.byJob[id] <= 0 {
		delete(a.byJob, id)
	}
}

// runs reports whether an abandoned handler of job id still runs.
func (a *abandoned) runs(id string) bool {
	if a.running.Load() == 0 {
		return false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.byJob[id] > 0
}

// count reports how many abandoned handlers still run.
func (a *abandoned) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.n
}
