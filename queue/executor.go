package queue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/meridianjobs/meridian/queue/driver"
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
	// (BackoffPolicy), by job name.
	typeBackoff map[string]BackoffPolicy
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

// release gives j back, available at at, without running it here, its
// attempts as they were before its reservation: a job reserved unstarted
// is nacked (nothing counted it); one whose claim counted its attempt
// (ReserveStarting, for a handler idle then) is snoozed with that attempt
// given back, so that an attempt still counts only when a handler starts.
func (e *executor) release(j *Job, unstarted bool, cause error, at time.Time) {
	if unstarted {
		e.completer.nack(j, cause, at, time.Now(), 0)
		return
	}
	e.completer.giveBack(j, cause, at)
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
		e.release(j, unstarted, errShutdown, time.Now())
		return
	}
	h := e.handlers[j.Name]
	if h == nil {
		err := fmt.Errorf("%w: %q (job %s); register one with Handle", ErrUnknownJob, j.Name, j.ID)
		e.completer.fail(j, err, time.Now(), 0)
		return
	}
	if e.abandoned.runs(j.ID) {
		// Never two copies of one job in one process: it goes back,
		// after a backoff, with its attempts as they were.
		e.log.Warn("queue: job's abandoned attempt still runs here; releasing it", "job", j.ID, "name", j.Name)
		e.release(j, unstarted, errStillRunning, time.Now().Add(e.backoffFor(j)))
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
			e.release(j, unstarted, errShutdown, time.Now())
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
	start := time.Now()
	hd, jc := e.leases.run(j, hj, e.base, start)
	defer jc.release()
	if jc.Err() != nil && errors.Is(context.Cause(jc), ErrLeaseLost) {
		// Its lease ran out to its margin while it waited to start:
		// another process may be given the job at any moment.
		e.leases.stop(hd, 0)
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
	var err error
	if timeout > 0 {
		err = e.callAbandonable(jctx, h, j, timeout)
	} else {
		err = safeCall(jctx, h, j)
	}
	rt := time.Since(start)
	lost, cancelled, released := e.leases.stop(hd, rt)

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
		e.completer.ack(j, start, rt, jc.takeResult())
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

// heldLeases is the set of leases one run holds: jobs reserved and not yet
// settled, whether buffered, running or waiting for an ack flush. The
// fetcher adds to it, the executor marks handlers running in it, the
// completer removes from it and the extender keeps it alive. It also
// counts, per queue, the leases held and the handlers running, which the
// heartbeat reports (WorkerInfo.Running and Reserved).
type heldLeases struct {
	// marked counts the held entries whose cancelled flag is set (at
	// least: an entry replaced by add is not uncounted), so that
	// isCancelled, which every job asks, takes no lock while none is.
	marked atomic.Int64

	mu sync.Mutex
	m  map[string]*held
	// byQueue counts the entries of m by queue; an entry is counted as
	// running while it is in m with running set.
	byQueue map[string]*heldCount
	// epoch is the origin of the handlers' start times (heldCount.started).
	epoch time.Time
	// margin is how long before its stored expiry a lease counts as lost
	// unless renewed (Worker.LeaseMargin); 0 in tests that set none.
	margin time.Duration
}

// heldCount is what one queue's entries of heldLeases hold, and how long
// its handlers ran.
type heldCount struct {
	leases  int // every lease held
	running int // of which a handler runs
	// started is the sum of the running handlers' start times, in
	// nanoseconds since heldLeases.epoch, so that their time so far is
	// running*now - started; ran is the run time of those that returned
	// (see worked).
	started int64
	ran     time.Duration
}

// worked returns how long c's handlers have run up to now: those that
// returned, and those running, so far.
func (c *heldCount) worked(now, epoch time.Time) time.Duration {
	return c.ran + time.Duration(int64(c.running)*int64(now.Sub(epoch))-c.started)
}

// held is one lease the run holds.
type held struct {
	job   *Job       // the job reserved under lease
	count *heldCount // its queue's, in heldLeases.byQueue
	gone  bool       // no longer in heldLeases.m: uncounted
	lease driver.Lease
	// startedAt is when its handler started, in nanoseconds since
	// heldLeases.epoch, while it runs.
	startedAt int64
	expires   time.Time // the stored expiry, as last stored
	// deadline is expires minus the margin, in Unix nanoseconds: when the
	// lease counts as lost unless renewed first. Written under the lock,
	// read without it by the handler's context (jobContext.check).
	deadline atomic.Int64
	// running is the handler's context while it runs (jc), which a lost
	// lease or a cancel of the job cancels; nil otherwise.
	running *jobContext
	lost    bool // the queue no longer honours the lease
	// released is set when shutdown gave the job back while its handler
	// still ran: the handler's outcome is no longer the run's to record.
	released bool
	// cancelled is set when the job was cancelled in the store while held.
	cancelled bool
	// unstarted marks a job the fetcher prefetched through
	// Starter.ReserveUnstarted: its attempt is counted (Starter.Start) just
	// before its handler starts. Only the fetcher, before it hands the
	// entry on, and then the executor write it.
	unstarted bool
	// jc is the job's handler context, made by run. It lives here, not in
	// an allocation of its own per job, because addAll allocates a claim's
	// entries together.
	jc jobContext
}

func newHeldLeases() *heldLeases {
	return &heldLeases{m: make(map[string]*held), byQueue: make(map[string]*heldCount), epoch: time.Now()}
}

// queueCount returns the count of queue name's leases. Callers hold s.mu.
func (s *heldLeases) queueCount(name string) *heldCount {
	c := s.byQueue[name]
	if c == nil {
		c = &heldCount{}
		s.byQueue[name] = c
	}
	return c
}

// counts returns the jobs held by queue: running, those whose handler
// runs, and reserved, the others (see WorkerInfo). A map is nil when it
// would be empty.
func (s *heldLeases) counts() (running, reserved map[string]int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for name, c := range s.byQueue {
		if c.running > 0 {
			if running == nil {
				running = make(map[string]int)
			}
			running[name] = c.running
		}
		if r := c.leases - c.running; r > 0 {
			if reserved == nil {
				reserved = make(map[string]int)
			}
			reserved[name] = r
		}
	}
	return running, reserved
}

// add holds j's lease, expiring at j.LeaseExpiresAt or, when the driver
// left it unset, lease from now.
func (s *heldLeases) add(j *Job, lease time.Duration) { s.addAll([]*Job{j}, lease) }

// addAll holds the leases of jobs as add does, under one lock and in one
// allocation for the batch (a claim's hundreds of jobs), and returns their
// entries, in the order of jobs, for the executors (see run).
func (s *heldLeases) addAll(jobs []*Job, lease time.Duration) []held {
	hs := make([]held, len(jobs))
	var now time.Time
	for i, j := range jobs {
		exp := j.LeaseExpiresAt
		if exp.IsZero() {
			if now.IsZero() {
				now = time.Now()
			}
			exp = now.Add(lease)
		}
		hs[i].job, hs[i].lease, hs[i].expires = j, j.Lease(), exp
		hs[i].deadline.Store(exp.Add(-s.margin).UnixNano())
	}
	s.mu.Lock()
	var c *heldCount
	for i, j := range jobs {
		if old := s.m[j.ID]; old != nil {
			// The store leased the job again: the lease held before is
			// over, and so is any handler still running under it.
			s.lapseLocked(old)
			s.removeLocked(j.ID)
		}
		if c == nil || (i > 0 && j.Queue != jobs[i-1].Queue) {
			c = s.queueCount(j.Queue)
		}
		hs[i].count = c
		c.leases++
		s.m[j.ID] = &hs[i]
	}
	s.mu.Unlock()
	return hs
}

// remove forgets lease l: its job's entry, if it is still that lease's. A
// newer lease of the same job (the store leased it again to this process
// while an older attempt ran) keeps its entry.
func (s *heldLeases) remove(l driver.Lease) {
	s.mu.Lock()
	s.removeLeaseLocked(l)
	s.mu.Unlock()
}

// removeJobs forgets the leases of the jobs of items, as remove does,
// under one lock (an ack flush's hundreds).
func (s *heldLeases) removeJobs(items []ackItem) {
	s.mu.Lock()
	for _, it := range items {
		s.removeLeaseLocked(it.j.Lease())
	}
	s.mu.Unlock()
}

func (s *heldLeases) removeLeaseLocked(l driver.Lease) {
	if h := s.m[l.JobID]; h != nil && h.lease == l {
		s.removeLocked(l.JobID)
	}
}

func (s *heldLeases) removeLocked(id string) {
	if h := s.m[id]; h != nil {
		if h.cancelled {
			s.marked.Add(-1)
		}
		h.count.leases--
		if h.running != nil {
			h.count.running--
			h.count.started -= h.startedAt
		}
		h.gone = true
		delete(s.m, id)
	}
}

// worked returns how long the handlers have run up to now, in all: those
// that returned, and those running, so far (pacer.spare). A handler whose
// lease was taken off while it ran no longer counts.
func (s *heldLeases) worked(now time.Time) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	var d time.Duration
	for _, c := range s.byQueue {
		d += c.worked(now, s.epoch)
	}
	return d
}

// workedIn returns how long the handlers of queue name's jobs have run up
// to now, as worked does for all of them (a budget's pace per queue).
func (s *heldLeases) workedIn(name string, now time.Time) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.byQueue[name]; c != nil {
		return c.worked(now, s.epoch)
	}
	return 0
}

// len reports how many leases are held.
func (s *heldLeases) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m)
}

// run makes j's handler context, a child of base, and records that j's
// handler runs under it from start. h is j's entry as addAll returned it,
// or nil to look it up (the fetcher hands executors the entries, so that a
// job costs no lookup here). It returns the held entry to pass to stop,
// nil (with a context of its own) when j is not held.
func (s *heldLeases) run(j *Job, h *held, base context.Context, start time.Time) (*held, *jobContext) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if h == nil {
		h = s.m[j.ID]
	}
	if h == nil {
		return nil, newJobContext(base, j)
	}
	if h.running == nil {
		if !h.gone {
			h.count.running++
			h.startedAt = int64(start.Sub(s.epoch))
			h.count.started += h.startedAt
		}
	}
	h.jc = jobContext{base: base, job: j, hold: h, set: s}
	h.running = &h.jc
	if h.lost && !h.cancelled {
		// Its lease ran out (to its margin) while it waited to start.
		h.jc.cancel(ErrLeaseLost)
	}
	return h, &h.jc
}

// stop records that h's handler returned after running for ran and
// reports whether its lease was lost (cancelled: by a cancel of the job),
// or given back by shutdown, meanwhile.
func (s *heldLeases) stop(h *held, ran time.Duration) (lost, cancelled, released bool) {
	if h == nil {
		return false, false, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if h.running != nil {
		if !h.gone {
			h.count.running--
			h.count.started -= h.startedAt
			h.count.ran += ran
		}
	}
	h.running = nil
	return h.lost, h.cancelled, h.released
}

// cancelled records that the jobs under leases were cancelled in the
// store: those this run holds lose their lease, and their running handlers
// are cancelled with ErrCancelled. It reports how many it held.
func (s *heldLeases) cancelled(leases []driver.Lease) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, l := range leases {
		h := s.m[l.JobID]
		if h == nil || h.lease != l || h.cancelled {
			continue
		}
		n++
		h.lost, h.cancelled = true, true
		s.marked.Add(1)
		if h.running != nil {
			h.running.cancel(ErrCancelled)
		}
	}
	return n
}

// isCancelled reports whether the held job id was cancelled before it
// started.
func (s *heldLeases) isCancelled(id string) bool {
	if s.marked.Load() == 0 {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.m[id]
	return h != nil && h.cancelled
}

// due returns the leases with less than half of their usable part (lease
// minus the margin) left before their deadline at now.
func (s *heldLeases) due(now time.Time, lease time.Duration) []driver.Lease {
	out, _ := s.dueBy(now, lease)
	return out
}

// dueBy returns what due does and the earliest deadline among those
// leases: the time by which a call extending them must have returned.
func (s *heldLeases) dueBy(now time.Time, lease time.Duration) ([]driver.Lease, time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []driver.Lease
	var first time.Time
	half := (lease - s.margin) / 2
	for _, h := range s.m {
		if h.lost || h.cancelled {
			continue
		}
		// A lease past its deadline is not extended: expire ends it.
		if dl := h.expires.Add(-s.margin); dl.After(now) && dl.Sub(now) < half {
			out = append(out, h.lease)
			if first.IsZero() || dl.Before(first) {
				first = dl
			}
		}
	}
	return out, first
}

// expire ends, at now, the leases whose deadline (the stored expiry minus
// the margin) has passed: they count as lost and their running handlers
// are cancelled with ErrLeaseLost, whatever a call extending them is
// doing. It returns how many it ended and the earliest deadline still
// ahead (zero if none).
func (s *heldLeases) expire(now time.Time) (n int, next time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, h := range s.m {
		if h.lost || h.cancelled {
			continue
		}
		dl := time.Unix(0, h.deadline.Load())
		if !now.Before(dl) {
			s.lapseLocked(h)
			n++
		} else if next.IsZero() || dl.Before(next) {
			next = dl
		}
	}
	return n, next
}

// lapse ends h's lease if its deadline has passed: the clock check of the
// handler's context (jobContext.check), which runs in the handler's own
// goroutine, so that a process that was paused past the deadline finds
// the lease over at its first look, before any timer has run.
func (s *heldLeases) lapse(h *held) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if time.Now().UnixNano() >= h.deadline.Load() {
		s.lapseLocked(h)
	}
}

// lapseLocked marks h lost and cancels its running handler with
// ErrLeaseLost, unless it is lost or cancelled already. Callers hold s.mu.
func (s *heldLeases) lapseLocked(h *held) {
	if h.lost || h.cancelled {
		return
	}
	h.lost = true
	if h.running != nil {
		h.running.cancel(ErrLeaseLost)
	}
}

// extended records the outcome of extending l by d at now: a new expiry, or
// a lost lease whose running handler is cancelled. Other errors change
// nothing, and so does any outcome for a job known cancelled (its handler
// was cancelled with ErrCancelled). It reports whether the lease was found
// lost.
func (s *heldLeases) extended(l driver.Lease, now time.Time, d time.Duration, err error) (lost bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.m[l.JobID]
	switch {
	case h == nil || h.lease != l || h.cancelled:
	case h.lost:
		// A lease that counted as lost never counts as held again, even
		// if the call renewed it after its deadline.
	case err == nil:
		if time.Now().UnixNano() >= h.deadline.Load() {
			s.lapseLocked(h) // renewed too late: the handler was due to stop
			return false
		}
		h.expires = now.Add(d)
		h.deadline.Store(h.expires.Add(-s.margin).UnixNano())
	case errors.Is(err, ErrLeaseLost):
		s.lapseLocked(h)
		return true
	}
	return false
}

// anyHold reports whether any of leases is still held and unexpired at now.
func (s *heldLeases) anyHold(leases []driver.Lease, now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, l := range leases {
		if h := s.m[l.JobID]; h != nil && !h.lost && h.expires.After(now) {
			return true
		}
	}
	return false
}

// releaseRunning removes the leases whose handlers still run, marking them
// released, and returns them: shutdown gives those jobs back to the queue.
func (s *heldLeases) releaseRunning() []driver.Lease {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []driver.Lease
	for id, h := range s.m {
		if h.running != nil && !h.lost {
			h.released = true
			out = append(out, h.lease)
			s.removeLocked(id)
		}
	}
	return out
}

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
	// result is what the handler set with SetResult; its slot is nil
	// until the first SetResult, so that a job without one costs nothing.
	result *resultSlot
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
	case resultKey{}:
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.result == nil {
			c.result = new(resultSlot)
		}
		return c.result
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

// takeResult is the result the handler set (SetResult), nil if none.
func (c *jobContext) takeResult() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.result.take()
}
