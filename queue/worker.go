package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/meridianjobs/meridian/queue/balance"
	"github.com/meridianjobs/meridian/queue/driver"
	"github.com/meridianjobs/meridian/queue/internal/retry"
)

// Defaults and limits of the Worker, Leader and Batch.
const (
	DefaultMaxAttempts     = 5                  // total attempts, the first included
	DefaultMaxRetry        = DefaultMaxAttempts // the older name of DefaultMaxAttempts
	DefaultConcurrency     = 10
	DefaultPoll            = time.Second
	DefaultShutdownTimeout = 30 * time.Second
	DefaultLease           = time.Minute
	DefaultPrefetch        = 1000
	DefaultMaxSnoozes      = 25 // snoozes per job before a snooze counts as an attempt
	DefaultCancelPoll      = 500 * time.Millisecond
	// DefaultLeaseMargin is the least margin (see Worker.LeaseMargin): a
	// lease counts as lost, and its handler's context is cancelled, the
	// larger of this and a tenth of the lease before the lease's stored
	// expiry, unless renewed first; never more than half the lease.
	DefaultLeaseMargin = 500 * time.Millisecond
	// DefaultLeaderTTL is a Leader's lease length (LeaderTTL).
	DefaultLeaderTTL = 15 * time.Second
	// MaxBatchName is the most bytes a Batch's Name may have.
	MaxBatchName = 255
)

// DefaultBackoff is the retry policy of a Worker with no Backoff or
// BackoffPolicy set: exponential from one second, with jitter, capped at
// five minutes.
var DefaultBackoff = Exponential(time.Second, 5*time.Minute)

// Worker reserves jobs from a Queue and runs their handlers.
//
// Configure it with the fluent setters before Run; they are not safe to call
// once Run has started. Handlers run on up to Concurrency goroutines at once.
// The worker retries: a handler error nacks the job for a later attempt after
// the backoff, until the job's attempts are used up, when it is failed into
// the dead letters and OnFailed is called. Decoding errors, unknown job
// names and Permanent errors are dead-lettered at once.
//
// Over a Queue with a Reporter the worker lists itself: it sends a
// heartbeat every ten seconds carrying the jobs it holds per queue
// (WorkerInfo.Running and Reserved), and an early one, at most once a
// second, when those changed since its last heartbeat (going idle
// included), so that the store's running counts are at most about a second
// old while jobs come and go and exact within a second or two of quiet. It
// costs at most one small write per second per worker, whatever the
// number of jobs.
type Worker struct {
	q        Queue
	handlers map[string]Handler

	maxRetry        int
	backoff         BackoffPolicy
	poll            time.Duration
	log             *slog.Logger
	onFailed        func(Job, error)
	concurrency     int
	queues          []string
	queuesSet       bool // Queues was called
	balance         balance.Options
	timeout         time.Duration
	grace           time.Duration
	shutdownTimeout time.Duration
	lease           time.Duration
	leaseMargin     time.Duration // 0: the default (leaseMargin)
	middleware      []Middleware
	observer        Observer
	heartbeat       time.Duration
	prefetch        int
	maxAbandoned    int // 0: Concurrency
	abandoned       *abandoned
	maxSnoozes      int
	resultKeep      time.Duration
	cancelPoll      time.Duration
	typeBackoff     map[string]BackoffPolicy
	periodics       []*periodic
	groups          map[string]GroupRule // the rules of HandleGroup, by job name

	stopOnce sync.Once
	stopCh   chan struct{}
	running  sync.Mutex
}

// NewWorker returns a Worker over q with the defaults: MaxAttempts 5, the
// DefaultBackoff policy, Poll one second, Concurrency 10, the DefaultQueue,
// no timeout, ShutdownTimeout 30 seconds, logging to slog.Default.
func NewWorker(q Queue) *Worker {
	return &Worker{
		q:               q,
		handlers:        make(map[string]Handler),
		maxRetry:        DefaultMaxRetry,
		backoff:         DefaultBackoff,
		poll:            DefaultPoll,
		log:             slog.Default(),
		concurrency:     DefaultConcurrency,
		queues:          []string{DefaultQueue},
		grace:           5 * time.Second,
		shutdownTimeout: DefaultShutdownTimeout,
		heartbeat:       10 * time.Second,
		prefetch:        DefaultPrefetch,
		abandoned:       newAbandoned(0),
		maxSnoozes:      DefaultMaxSnoozes,
		resultKeep:      driver.DefaultResultRetention,
		cancelPoll:      DefaultCancelPoll,
		typeBackoff:     make(map[string]BackoffPolicy),
		groups:          make(map[string]GroupRule),
		stopCh:          make(chan struct{}),
	}
}

// handler returns the handler registered for name, or the built-in one
// of batch steps (Batch.Step), which every Worker runs on the queues it
// serves, or nil.
func (w *Worker) handler(name string) Handler {
	if h := w.handlers[name]; h != nil || name != (batchStep{}).JobName() {
		return h
	}
	return func(ctx context.Context, j Job) error {
		var p batchStep
		if err := json.Unmarshal(j.Payload, &p); err != nil {
			return Permanent(fmt.Errorf("%w: batch step %s: %v", ErrDecode, j.ID, err))
		}
		return runBatchStep(ctx, w.q, p)
	}
}

// Register binds h to jobs named name. Handle is the typed way to call it.
// Registering a name twice panics.
func (w *Worker) Register(name string, h Handler) {
	if name == "" || h == nil {
		panic("queue: Register needs a name and a handler")
	}
	if _, dup := w.handlers[name]; dup {
		panic("queue: a handler is already registered for " + name)
	}
	w.handlers[name] = h
}

// MaxSnoozes sets how many times a job's handler may snooze it (see
// Snooze) before a snooze counts as an attempt (default
// DefaultMaxSnoozes; n < 0 means 0).
func (w *Worker) MaxSnoozes(n int) *Worker {
	w.maxSnoozes = max(n, 0)
	return w
}

// CancelPoll sets how often the worker asks the store which of the jobs it
// holds were cancelled (see driver.Controller), which bounds how long a cancelled
// job's handler runs on (default DefaultCancelPoll). It asks only while it
// holds jobs.
func (w *Worker) CancelPoll(d time.Duration) *Worker {
	if d > 0 {
		w.cancelPoll = d
	}
	return w
}

// MaxAttempts sets the total attempts a job gets, the first included,
// before it is dead-lettered (n < 1 means 1; default 5). A job's own
// MaxAttempts overrides it.
func (w *Worker) MaxAttempts(n int) *Worker {
	w.maxRetry = max(n, 1)
	return w
}

// MaxRetry is MaxAttempts under its older name. Despite the name, n counts
// every attempt, the first included, not only the retries: MaxRetry(3) runs
// a failing job three times.
func (w *Worker) MaxRetry(n int) *Worker { return w.MaxAttempts(n) }

// Backoff sets a fixed delay before each retry.
func (w *Worker) Backoff(d time.Duration) *Worker {
	w.backoff = Fixed(d)
	return w
}

// BackoffPolicy sets the retry delay policy: Fixed, Exponential, Delays or
// your own.
func (w *Worker) BackoffPolicy(p BackoffPolicy) *Worker {
	if p != nil {
		w.backoff = p
	}
	return w
}

// Poll sets how long the worker waits for work when the queue is idle before
// it reserves again. With a driver that can wake it (Waiter), Poll is only the
// safety net against a missed wake-up.
func (w *Worker) Poll(d time.Duration) *Worker {
	if d > 0 {
		w.poll = d
	}
	return w
}

// Logger sends the worker's logs, one formatted line each, to a printf-style
// function such as log.Printf.
func (w *Worker) Logger(fn func(format string, args ...any)) *Worker {
	if fn != nil {
		w.log = slog.New(slog.NewTextHandler(printfWriter(fn), &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	return w
}

type printfWriter func(format string, args ...any)

func (p printfWriter) Write(b []byte) (int, error) {
	p("%s", strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

// Slog sends the worker's logs to l.
func (w *Worker) Slog(l *slog.Logger) *Worker {
	if l != nil {
		w.log = l
	}
	return w
}

// OnFailed sets a function called once for every job this worker
// dead-letters, poison jobs included, with an error that errors.Is the
// handler's error (or ErrDecode, ErrUnknownJob, ErrAttemptsExhausted). It
// runs on the worker's goroutines and should return quickly.
func (w *Worker) OnFailed(fn func(Job, error)) *Worker {
	w.onFailed = fn
	return w
}

// Concurrency sets how many handlers run at once (n < 1 means 1).
func (w *Worker) Concurrency(n int) *Worker {
	w.concurrency = max(n, 1)
	return w
}

// Queues sets the queues to work, highest priority first: each reservation
// takes jobs from the first queue that has them ready, then the next. Jobs
// already prefetched (see Prefetch) run before a newer job of a higher
// queue; the prefetch holds at most about 50ms of work.
func (w *Worker) Queues(names ...string) *Worker {
	if len(names) > 0 {
		w.queues = append([]string(nil), names...)
		w.queuesSet = true
	}
	return w
}

// Timeout bounds each attempt (0, the default, means no bound). A job's own
// Timeout overrides it. At the timeout the handler's context is cancelled;
// a handler that still has not returned a grace period later is abandoned:
// the attempt is recorded as failed with ErrTimeout, its slot is freed, and
// the stuck handler is logged, reported as EventAbandoned and counted by
// Abandoned until it returns (at most MaxAbandoned at once).
func (w *Worker) Timeout(d time.Duration) *Worker {
	w.timeout = max(d, 0)
	return w
}

// MaxAbandoned caps how many abandoned handlers (see Timeout) may still be
// running at once (default: Concurrency). At the cap, a handler that outlives
// its grace keeps its slot until it returns instead of being abandoned, so
// stuck goroutines cannot pile up without bound.
func (w *Worker) MaxAbandoned(n int) *Worker {
	w.maxAbandoned = max(n, 0)
	return w
}

// Abandoned reports how many handlers this worker abandoned (after their
// timeout and grace) that have not yet returned. While one runs, the worker
// does not run another attempt of its job: it gives such a job back to the
// queue for another process.
func (w *Worker) Abandoned() int { return w.abandoned.count() }

// abandonLimit is the cap on abandoned handlers.
func (w *Worker) abandonLimit() int {
	if w.maxAbandoned > 0 {
		return w.maxAbandoned
	}
	return w.concurrency
}

// Grace sets how long the worker waits for a handler to return after its
// context was cancelled (at its timeout or at shutdown) before it abandons
// the handler's goroutine (default 5 seconds).
func (w *Worker) Grace(d time.Duration) *Worker {
	w.grace = max(d, 0)
	return w
}

// ShutdownTimeout sets how long Run lets running jobs finish after a stop
// before it cancels their contexts (default 30 seconds).
func (w *Worker) ShutdownTimeout(d time.Duration) *Worker {
	w.shutdownTimeout = max(d, 0)
	return w
}

// Lease sets how long each reservation lasts. Long jobs keep their lease by
// extension, so this only bounds how soon a crashed worker's jobs run again.
// By default the queue's own (LeaseDefaulter) or one minute.
func (w *Worker) Lease(d time.Duration) *Worker {
	w.lease = max(d, 0)
	return w
}

// LeaseMargin sets how long before the stored expiry of a job's lease the
// worker takes the lease as lost unless it has renewed it by then: at that
// point the handler's context is cancelled with cause ErrLeaseLost,
// whatever the call renewing the lease is doing (each such call has that
// point as its deadline), and the job's outcome is discarded. The margin
// is what a handler has to notice the cancel and stop before another
// process can be given the job; it also absorbs clock skew between this
// process and the store. By default it is the larger of DefaultLeaseMargin
// (500 ms) and a tenth of the lease; it is never more than half the lease.
// See docs/semantics.md, "Partitions and pauses".
func (w *Worker) LeaseMargin(d time.Duration) *Worker {
	w.leaseMargin = max(d, 0)
	return w
}

// Prefetch caps how many jobs the worker reserves ahead of its free
// handlers (default 1000; 0 turns prefetch off). The worker reserves ahead
// only as many jobs as it finishes in about 50ms at its recent rate, so
// slow jobs are never hoarded by one process; fast jobs are reserved in
// large batches, one round trip each. It prefetches only while its handlers
// are busy running jobs: a prefetched job's attempt is counted (a start
// mark) just before its handler runs, a write and a round trip of its own,
// so when at least half of what it would prefetch is handlers idle anyway
// (the jobs finish faster than reservations bring them), it reserves for
// the idle handlers alone, each job's attempt counted by its claim.
// Prefetched jobs are leased (and their leases extended) while they wait;
// at shutdown they run like the others within ShutdownTimeout. Under a budget (balance.Simple, Auto) each queue
// reserves ahead so, up to Prefetch of its own (see docs/semantics.md,
// "Sharing handlers among queues").
func (w *Worker) Prefetch(n int) *Worker {
	w.prefetch = max(n, 0)
	return w
}

// Use appends middleware around every handler.
func (w *Worker) Use(mw ...Middleware) *Worker {
	w.middleware = append(w.middleware, mw...)
	return w
}

// Observer sets a hook that receives every job event, for counters.
func (w *Worker) Observer(o Observer) *Worker {
	w.observer = o
	return w
}

// Stop asks a running Run to shut down and returns at once; Run's return
// says when it has. It is safe to call more than once and from any
// goroutine, handlers included.
func (w *Worker) Stop() {
	w.stopOnce.Do(func() { close(w.stopCh) })
}

// leaseFor returns the lease length to reserve with.
func (w *Worker) leaseFor() time.Duration {
	if w.lease > 0 {
		return w.lease
	}
	if d := driver.CapabilitiesOf(w.q).DefaultLease; d > 0 {
		return d
	}
	return DefaultLease
}

// Run works jobs until ctx is cancelled or Stop is called, then shuts down
// gracefully: it stops reserving, lets running jobs finish within
// ShutdownTimeout, then cancels their contexts, flushes pending acks under a
// context of its own and returns nil. Handler contexts do not derive from
// ctx.
//
// Over a store with the Fleet ability (driver.Fleet) the worker obeys
// fleet commands, read about once a second: while paused it reserves no
// jobs (those it holds run), and a terminate shuts it down as a stop does,
// after which Run returns ErrTerminated.
//
// Transient queue errors are retried with backoff and logged once per
// streak of failures (and once when the queue recovers). A queue error
// matching ErrConfig (a missing table, an unknown schema version, bad
// credentials: nothing a retry fixes) stops the worker as Stop does, and
// Run returns it, wrapped with what the worker was doing. Run also returns
// an error if the worker cannot start (no handlers, or it is already
// running).
func (w *Worker) Run(ctx context.Context) error {
	if len(w.handlers) == 0 {
		return errors.New("queue: worker has no handlers; register them with Handle before Run")
	}
	if !w.running.TryLock() {
		return errors.New("queue: worker is already running")
	}
	defer w.running.Unlock()
	opts := w.balance.WithDefaults(w.concurrency)
	if err := opts.Check(opts.Queues(w.queues, w.queuesSet)); err != nil {
		return fmt.Errorf("queue: worker cannot start: %w", err)
	}
	return newRun(w).run(ctx)
}

// chain wraps h in the worker's middleware, the first registered outermost.
func (w *Worker) chain(h Handler) Handler {
	for i := len(w.middleware) - 1; i >= 0; i-- {
		h = w.middleware[i](h)
	}
	return h
}

// maxAttempts returns the total attempts j gets.
func (w *Worker) maxAttempts(j *Job) int {
	if j.MaxAttempts > 0 {
		return j.MaxAttempts
	}
	return w.maxRetry
}

func (w *Worker) observe(kind EventKind, j *Job, err error, rt time.Duration) {
	if w.observer != nil {
		w.observer.Observe(Event{Kind: kind, Job: *j, Err: err, Runtime: rt})
	}
}

// panicError turns a recovered panic into an error carrying the stack.
func panicError(r any) error {
	if err, ok := r.(error); ok {
		return fmt.Errorf("%w: %w\n%s", ErrPanic, err, debug.Stack())
	}
	return fmt.Errorf("%w: %v\n%s", ErrPanic, r, debug.Stack())
}

var _ io.Writer = printfWriter(nil)

// run is one execution of Worker.Run: its parts, wired together, and the
// leases they share. A reserved job flows fetcher -> jobs -> executor ->
// completer; the extender keeps the held leases alive meanwhile and the
// heartbeat keeps the worker listed.
type run struct {
	w    *Worker
	q    Queue
	caps driver.Capabilities // what the store can do beyond the core
	log  *slog.Logger
	id   string
	halt *halt

	held      *heldLeases
	fetcher   *fetcher
	executor  *executor
	completer *completer
	extender  *extender
	heartbeat *heartbeat  // nil when the queue keeps no worker registry
	fleet     *fleetWatch // nil when the store has no Fleet ability
	gate      *gate       // closed while a fleet command pauses the worker
	budget    *budget     // nil unless the worker shares a budget (balance.Simple, Auto)
	balancer  *balancer   // nil unless balance.Auto

	// opts are the worker's balance options with their defaults;
	// concurrency and queues are the handlers and queues of the run
	// (Balance may change both).
	opts        balance.Options
	concurrency int
	queues      []string

	jobs      *handoff // reserved jobs' held entries, to the executors
	buf       int      // the jobs reserved and not finished, at most: the bound of the completer's ack queue
	freed     *freed   // the jobs the executors finished
	executors sync.WaitGroup

	baseCtx    context.Context // parent of handler contexts
	cancelBase context.CancelCauseFunc
	bgCtx      context.Context // for queue calls; cancelled last
	cancelBg   context.CancelFunc
}

func newRun(w *Worker) *run {
	opts := w.balance.WithDefaults(w.concurrency)
	queues := opts.Queues(w.queues, w.queuesSet)
	concurrency, prefetch := w.concurrency, w.prefetch
	buf := concurrency + prefetch
	if opts.Budgeted() {
		// Handed on, at most Max; waiting, at most each queue's room
		// (all of them at most Max) and Prefetch per queue (see budget).
		concurrency, buf = opts.Max, 2*opts.Max+len(queues)*prefetch
	}
	lease := w.leaseFor()
	r := &run{
		w:           w,
		opts:        opts,
		concurrency: concurrency,
		queues:      queues,
		q:           w.q,
		log:         w.log,
		id:          driver.NewID(),
		halt:        &halt{},
		held:        newHeldLeases(),
		jobs:        &handoff{},
		buf:         buf,
		freed:       newFreed(),
	}
	r.held.margin = leaseMargin(lease, w.leaseMargin)
	r.baseCtx, r.cancelBase = context.WithCancelCause(context.Background())
	r.bgCtx, r.cancelBg = context.WithCancel(context.Background())

	r.caps = driver.CapabilitiesOf(w.q)
	r.completer = &completer{q: w.q, runObs: r.caps.Reporter, ctx: r.bgCtx, leases: r.held, halt: r.halt, observe: w.observe, onFailed: w.onFailed, log: w.log, maxAttempts: w.maxAttempts, resultKeep: w.resultKeep}
	if tm := r.caps.Tags; tm != nil {
		r.completer.tags = &tagWatch{store: tm, ctx: r.bgCtx, log: w.log}
	}

	handlers := make(map[string]Handler, len(w.handlers)+1)
	for name, h := range w.handlers {
		handlers[name] = w.chain(h)
	}
	if name := (batchStep{}).JobName(); handlers[name] == nil {
		handlers[name] = w.chain(w.handler(name))
	}
	w.abandoned.setLimit(w.abandonLimit())
	r.executor = &executor{
		handlers: handlers, maxAttempts: w.maxAttempts, timeout: w.timeout, grace: w.grace, backoff: w.backoff,
		typeBackoff: w.typeBackoff, maxSnoozes: w.maxSnoozes,
		base: r.baseCtx, leases: r.held, completer: r.completer, abandoned: w.abandoned, observe: w.observe, log: w.log,
		apart: make(chan struct{}, 1), starts: &starts{q: w.q, ctx: r.bgCtx},
	}

	r.fetcher = &fetcher{
		q: w.q, queues: queues, lease: lease, concurrency: concurrency, poll: w.poll, log: w.log,
		ctx: driver.WithWorker(r.bgCtx, r.id), leases: r.held, halt: r.halt, out: r.jobs, freed: r.freed,
		pace: pacer{horizon: prefetchHorizon, max: prefetch},
	}
	r.fetcher.waiter = r.caps.Waiter
	r.gate = newGate()
	r.fetcher.gate = r.gate
	if f := r.caps.Fleet; f != nil {
		r.fleet = newFleetWatch(f, r)
	}
	switch {
	case opts.Budgeted():
		r.budget = newBudget(queues, opts.Max, prefetch)
		r.fetcher.budget = r.budget
		if opts.Strategy == balance.Auto {
			r.balancer = &balancer{opts: opts, budget: r.budget, q: w.q, insp: r.caps.Inspector, ctx: r.bgCtx, wake: r.freed.poke, log: w.log}
		}
	case opts.Strategy == balance.Weighted:
		weights := make([]int, len(queues))
		for i, qn := range queues {
			weights[i] = max(opts.Weights[qn], 1)
		}
		r.fetcher.pick = balance.NewPicker(weights)
	}

	r.extender = &extender{q: w.q, canceller: r.caps.Controller, lease: lease, ctx: r.bgCtx, held: r.held, halt: r.halt, log: w.log}

	if reg := r.caps.Reporter; reg != nil {
		r.heartbeat = &heartbeat{
			reg: reg,
			info: driver.WorkerInfo{ID: r.id, Host: hostname(), PID: os.Getpid(), Queues: queues, Concurrency: concurrency, StartedAt: time.Now(),
				MaxAttempts: w.maxRetry},
			every: w.heartbeat, held: r.held.counts, ctx: r.bgCtx, halt: r.halt, log: w.log,
		}
	}
	return r
}

func (r *run) run(ctx context.Context) error {
	stopCtx, cancelStop := context.WithCancel(ctx)
	defer cancelStop()
	r.halt.stop = cancelStop
	go func() {
		select {
		case <-r.w.stopCh:
			cancelStop()
		case <-stopCtx.Done():
		}
	}()

	if t := r.completer.tags; t != nil {
		t.refresh()
	}
	for range r.concurrency {
		r.executors.Go(func() {
			in := make(chan *held, 1)
			for worked := false; ; worked = true {
				h, ok := r.jobs.take(in, worked)
				if !ok {
					return
				}
				qn := h.job.Queue
				r.executor.execute(h.job, h)
				if r.budget != nil {
					r.budget.done(qn)
				}
				r.freed.add()
			}
		})
	}
	r.completer.start(r.buf)
	bgDone := make(chan struct{})
	var bg sync.WaitGroup
	bg.Go(func() { r.extender.run(bgDone) })
	if r.heartbeat != nil {
		bg.Go(func() { r.heartbeat.run(bgDone) })
	}
	if t := r.completer.tags; t != nil {
		bg.Go(func() { t.run(bgDone) })
	}
	if c := r.caps.Controller; c != nil {
		bg.Go(func() { r.watchCancels(c, bgDone) })
	}
	if r.balancer != nil {
		bg.Go(func() { r.balancer.run(bgDone) })
	}
	if r.fleet != nil && r.fleet.check() {
		bg.Go(func() { r.fleet.run(bgDone) })
	}
	if len(r.w.groups) > 0 {
		if g := r.caps.Groups; g != nil {
			for name, rule := range r.w.groups {
				bg.Go(func() { r.gather(g, name, rule, bgDone) })
			}
		} else {
			r.log.Warn("queue: the store has no group aggregation; group handlers get only jobs dispatched without Group", "worker", r.id)
		}
	}
	if store := r.caps.Scheduler; store != nil {
		for _, p := range r.w.periodics {
			bg.Go(func() { p.schedule(stopCtx, store, r.log.Warn) })
		}
	}
	r.log.Info("queue: worker started", "worker", r.id, "queues", r.queues, "concurrency", r.concurrency, "balance", r.opts.Strategy)
	if missing := r.caps.Missing(); len(missing) > 0 {
		r.log.Info("queue: the store lacks abilities; the worker goes without them", "worker", r.id, "missing", missing)
	}

	r.fetcher.run(stopCtx)

	r.shutdown()
	close(bgDone)
	bg.Wait()
	r.cancelBg()
	if err := r.halt.Err(); err != nil {
		r.log.Error("queue: worker stopped by an error retrying cannot fix", "worker", r.id, "err", err)
		return err
	}
	if r.halt.isTerminated() {
		r.log.Info("queue: worker terminated", "worker", r.id)
		return ErrTerminated
	}
	r.log.Info("queue: worker stopped", "worker", r.id)
	return nil
}

// shutdown lets running jobs finish within ShutdownTimeout, cancels the
// rest, gives back the jobs of handlers that ignore cancellation past the
// grace, and flushes pending acks.
func (r *run) shutdown() {
	r.jobs.close()
	execDone := make(chan struct{})
	go func() { r.executors.Wait(); close(execDone) }()
	t := time.NewTimer(r.w.shutdownTimeout)
	select {
	case <-execDone:
	case <-t.C:
		r.log.Warn("queue: shutdown timeout reached; cancelling running jobs", "timeout", r.w.shutdownTimeout)
		r.cancelBase(errShutdown)
		g := time.NewTimer(r.w.grace)
		select {
		case <-execDone:
		case <-g.C:
			r.releaseStuck()
		}
		g.Stop()
	}
	t.Stop()
	r.cancelBase(errShutdown)

	flushT := time.AfterFunc(10*time.Second, r.cancelBg)
	r.completer.close()
	flushT.Stop()
}

// releaseStuck gives back to the queue, for another attempt, the jobs whose
// handlers ignored cancellation past the grace and the prefetched jobs no
// executor is free to take, so that none stays leased to a process that
// is going away.
func (r *run) releaseStuck() {
	n := 0
	for _, h := range r.jobs.drain() { // closed: takes what the executors left
		r.completer.nack(h.job, errShutdown, time.Now(), time.Now(), 0)
		n++
	}
	stuck := r.held.releaseRunning()
	for _, l := range stuck {
		out := driver.Completion{Lease: l, Outcome: driver.OutcomeRetried, At: time.Now(), Reason: reason(fmt.Errorf("%w: its handler ignored cancellation", errShutdown))}
		_, errs, err := r.q.Complete(r.bgCtx, nil, []driver.Completion{out})
		if err == nil && len(errs) == 1 {
			err = errs[0]
		}
		if err != nil {
			r.log.Error("queue: releasing the job of a handler that ignored cancellation; it runs again when its lease expires", "job", l.JobID, "err", err)
		}
	}
	r.log.Error("queue: handlers ignored cancellation; abandoning them and releasing their jobs", "grace", r.w.grace, "handlers", len(stuck), "prefetched", n)
}

// Handler runs one attempt of a job. It returns nil when the job is done; an
// error makes the Worker retry the job after its backoff, or dead-letter it
// when the error is Permanent or the job's attempts are used up.
//
// The context is the job's own: it is cancelled at the job's timeout, when
// the worker's shutdown grace runs out, or when the job's lease is lost. It
// is not cancelled by the context passed to Run.
type Handler func(ctx context.Context, j Job) error

// Middleware wraps a Handler, for logging, tracing, metrics or recovery.
// Middleware registered with Worker.Use runs outermost first, around the
// payload decoding and the typed handler.
type Middleware func(Handler) Handler

type jobKey struct{}

// JobFromContext returns the job that a handler's context belongs to.
func JobFromContext(ctx context.Context) (Job, bool) {
	j, ok := ctx.Value(jobKey{}).(*Job)
	if !ok {
		return Job{}, false
	}
	return *j, true
}

// Handle registers fn as the handler for jobs named for T (see NameOf). The
// worker decodes each job's JSON payload into a T and calls fn. A payload
// that does not decode is dead-lettered at once with an error matching
// ErrDecode. Registering a name twice panics, as http.ServeMux does. When T
// sets its own backoff (BackoffPolicy, on the zero value), it overrides the
// worker's policy for these jobs.
func Handle[T any](w *Worker, fn func(ctx context.Context, v T) error) {
	name := NameOf[T]()
	var zero T
	if b, ok := any(zero).(BackoffPolicy); ok {
		w.typeBackoff[name] = b
	}
	delete(w.groups, name)
	w.Register(name, func(ctx context.Context, j Job) error {
		var v T
		if err := json.Unmarshal(j.Payload, &v); err != nil {
			return Permanent(fmt.Errorf("%w: job %s (%s) into %T: %v", ErrDecode, j.ID, name, v, err))
		}
		return fn(ctx, v)
	})
}

// prefetchHorizon is how much work, in time at the recent completion rate,
// the fetcher reserves ahead of free handlers.
const prefetchHorizon = 50 * time.Millisecond

// fetcher is the part of a run that reserves jobs and hands them to the
// executors (River's producer). It keeps every handler busy and, when jobs
// finish quickly, a short buffer beyond them: up to the jobs the worker
// completes in prefetchHorizon at its recent rate, capped by Prefetch. Slow
// jobs therefore get no prefetch (no job waits long leased to a busy
// process), while fast ones are reserved hundreds per round trip. The
// buffer is for busy handlers: a buffered job waits for its start mark
// (batched with the outcomes) before it runs, so when the handlers idle
// anyway, half a buffer's worth of them or more (pacer.spare), the fetcher
// reserves for the idle handlers alone and their claims count the
// attempts.
type fetcher struct {
	q           Queue
	waiter      driver.Waiter // nil: poll
	queues      []string
	lease       time.Duration
	concurrency int
	poll        time.Duration
	log         *slog.Logger
	// ctx is for queue calls: a reservation cut off half way would leave
	// jobs leased to nobody until their leases expire.
	ctx    context.Context
	leases *heldLeases
	halt   *halt

	out   *handoff // reserved jobs' held entries, to the executors
	freed *freed   // the jobs the executors finished
	pace  pacer

	// pick splits each reservation among the queues by their weights
	// (balance.Weighted); nil: strict order.
	pick *balance.Picker
	// naps, with pick, keeps queues that had nothing ready from being
	// asked again until woken (set by run).
	naps *naps
	// budget, when set, is the budget the queues share (balance.Simple,
	// Auto): the fetcher runs runBudget instead.
	budget *budget
	// gate holds the fetcher while a fleet command pauses the worker.
	gate *gate
	// rests leaves a failing queue out while the others answer (set by
	// reserve).
	rests *rests
}

// freed counts the jobs the executors finished, for the fetcher: a counter
// rather than a channel send per job, and a wake-up only once as many jobs
// have finished as the fetcher waits for, rather than one per job (each a
// goroutine switch to re-check its condition).
type freed struct {
	n atomic.Int64
	// want is the count at which the waiting fetcher is to be woken;
	// math.MaxInt64 while it does not wait.
	want atomic.Int64
	wake chan struct{} // holds a token while the fetcher may have missed its count
}

func newFreed() *freed {
	f := &freed{wake: make(chan struct{}, 1)}
	f.want.Store(math.MaxInt64)
	return f
}

// add counts one finished job and wakes the fetcher if it waits for that
// count.
func (f *freed) add() {
	if f.n.Add(1) >= f.want.Load() {
		select {
		case f.wake <- struct{}{}:
		default: // a wake-up is pending already
		}
	}
}

// poke wakes the fetcher whatever it waits for (it looks again).
func (f *freed) poke() {
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// since returns how many jobs finished since the count was last seen,
// updating seen.
func (f *freed) since(seen *int64) int {
	n := f.n.Load()
	d := n - *seen
	*seen = n
	return int(d)
}

// wait blocks until the count reaches target (or may have: a wake-up can
// be spurious) and reports true, or until done is closed and reports
// false.
func (f *freed) wait(target int64, done <-chan struct{}) bool {
	return f.waitOr(target, done, nil)
}

// waitOr is wait that also returns true once also is closed (nil: never).
func (f *freed) waitOr(target int64, done, also <-chan struct{}) bool {
	f.want.Store(target)
	defer f.want.Store(math.MaxInt64)
	if f.n.Load() >= target {
		return true
	}
	select {
	case <-f.wake:
		return true
	case <-also:
		return true
	case <-done:
		return false
	}
}

// toReserve returns how many of the outstanding jobs must finish before
// the fetcher reserves again (see run): until a handler is idle, or the
// buffer has room for half of ahead.
func toReserve(outstanding, concurrency, ahead int) int {
	idle := outstanding - concurrency + 1
	room := max(1, ahead/2) - (concurrency + ahead - outstanding)
	return max(1, min(idle, room))
}

// run reserves jobs until stopCtx is done.
func (f *fetcher) run(stopCtx context.Context) {
	if f.budget != nil {
		f.runBudget(stopCtx)
		return
	}
	if f.pick != nil {
		f.naps = newNaps(f, stopCtx)
		defer f.naps.stop()
	}
	outstanding := 0 // reserved and not finished: buffered or running
	var seen int64   // finished jobs counted in outstanding
	bo := retry.Backoff{Initial: 50 * time.Millisecond, Max: max(f.poll, 5*time.Second)}
	fails := streak{log: f.log, doing: "reserving jobs", level: slog.LevelError}
	for {
		if n := f.freed.since(&seen); n > 0 {
			outstanding -= n
			f.pace.done(n)
		}
		if stopCtx.Err() != nil || !f.gate.wait(stopCtx.Done()) {
			return
		}
		// Ahead of the handlers, about prefetchHorizon of work at the
		// recent rate, while the handlers are busy: when they idle because
		// the reservations are slower than the jobs, a reservation for the
		// idle handlers alone would cap the run at Concurrency jobs per
		// round trip. But when half that prefetch or more is handlers
		// idle anyway (the jobs finish faster than a claim brings them),
		// a prefetched job would only wait for its start mark, a round
		// trip like a claim's, and cost a write: the idle handlers alone
		// then make a claim worth its round trip, and their claim counts
		// their attempts (see reserve).
		ahead := f.pace.ahead(time.Now(), f.leases.worked)
		if f.pace.spare(f.concurrency) >= float64(max(1, ahead/2)) {
			ahead = 0
		}
		want := f.concurrency + ahead - outstanding
		// Reserve when a handler is idle, or when the buffer has room for a
		// batch worth a round trip; else wait for a handler to finish.
		if outstanding >= f.concurrency && (want <= 0 || want < ahead/2) {
			if !f.freed.wait(seen+int64(toReserve(outstanding, f.concurrency, ahead)), stopCtx.Done()) {
				return
			}
			continue
		}
		jobs, unstarted, err := f.reserve(want, f.concurrency-outstanding)
		hs := f.leases.addAll(jobs, f.lease)
		for i := range hs {
			hs[i].unstarted = unstarted[i]
			outstanding++
			f.out.send(&hs[i])
		}
		if f.naps != nil {
			f.naps.watch()
		}
		switch {
		case err != nil:
			if f.halt.check("reserving jobs", err) {
				return
			}
			d := bo.Next()
			fails.failed(err, "retry_in", d)
			if retry.Sleep(stopCtx, d) != nil {
				return
			}
		case len(jobs) == 0 && f.naps != nil:
			// Every queue is asleep (see naps): wait for one to wake, or
			// for a handler to finish.
			fails.ok()
			bo.Reset()
			if !f.freed.wait(seen+1, stopCtx.Done()) {
				return
			}
		case len(jobs) == 0:
			// Nothing ready: wait for a wake-up or the poll, whether or not
			// handlers are still busy, rather than asking again at once.
			fails.ok()
			bo.Reset()
			f.idle(stopCtx, f.rests.awake(time.Now())) // set by reserve
		default:
			fails.ok()
			bo.Reset()
		}
	}
}

// reserve takes up to n jobs, from the worker's queues in priority order,
// idle of them for the handlers idle now. Those are reserved through
// ReserveStarting, which counts their attempts in the claim itself (they
// start at once), so each saves a start mark, a round trip before its
// handler: at a low rate that is most jobs. The rest, the prefetch, are
// reserved without counting an attempt (ReserveUnstarted), and the
// executor counts it (a start mark) just before the handler runs: an
// attempt counts only when its handler starts, so jobs that were leased
// beside one that crashed the process keep their attempts. A job taken
// back from an expired lease is never counted by its claim (it waits to
// run apart from the others of its kind; see executor.apart).
//
// unstarted[i] reports whether the job out[i] still needs its start mark.
func (f *fetcher) reserve(n, idle int) (out []*Job, unstarted []bool, err error) {
	if f.rests == nil {
		f.rests = newRests(f.log, f.queues, f.poll, f.freed.poke)
	}
	if f.pick != nil {
		return f.reserveWeighted(n, idle)
	}
	now := time.Now()
	for i, qn := range f.queues {
		if n <= 0 {
			break
		}
		if f.rests.resting(i, now) {
			continue
		}
		var err error
		if k := min(n, idle); k > 0 {
			var jobs []Job
			jobs, err = f.q.ReserveStarting(f.ctx, []string{qn}, k, f.lease)
			for i := range jobs {
				out = append(out, &jobs[i])
				unstarted = append(unstarted, jobs[i].Recovered)
			}
			n, idle = n-len(jobs), idle-len(jobs)
			if err != nil || len(jobs) < k || n <= 0 {
				// Short: nothing more is ready in this queue now.
				f.rests.done(i, err)
				continue
			}
		}
		jobs, err := f.q.ReserveUnstarted(f.ctx, []string{qn}, n, f.lease)
		for i := range jobs {
			out = append(out, &jobs[i])
			unstarted = append(unstarted, true)
		}
		n -= len(jobs)
		f.rests.done(i, err)
	}
	return out, unstarted, f.rests.end(now)
}

// reserveWeighted takes up to n jobs split among the queues by their
// weights (balance.Picker); what a queue lacks goes to the others, so no
// handler idles while a queue has work. The queues are asked from the
// smallest share to the largest, each for its share and what the queues
// asked before it lacked, so a queue that just woke with nothing ready
// (the poll) hands its share to the busy queue in the same round trip,
// not in a second one for a few jobs; what is still lacking then goes to
// the queues that returned all they were asked, in the worker's order.
// A queue asleep (see naps) is not asked: its share goes to the others;
// one that returns fewer than asked falls asleep. A queue's ask that the
// handlers idle now can all take is reserved through ReserveStarting, as
// in reserve; a larger one, the prefetch, through ReserveUnstarted (one
// round trip per queue either way).
func (f *fetcher) reserveWeighted(n, idle int) (out []*Job, unstarted []bool, err error) {
	counts := f.pick.Split(n)
	short := 0
	now := time.Now()
	came := make([]bool, len(f.queues)) // asked, and returned fewer than asked; or asleep or resting
	var ask []int                       // the queues awake with a share
	for i, k := range counts {
		switch {
		case f.naps.asleep[i] || f.rests.resting(i, now):
			came[i] = true
			short += k
		case k > 0:
			ask = append(ask, i)
		}
	}
	slices.SortStableFunc(ask, func(a, b int) int { return counts[a] - counts[b] })
	// take asks queue i for k jobs; what it does not return, failing
	// included, goes to the queues asked after it.
	take := func(i, k int) {
		var jobs []Job
		var err error
		if k <= idle {
			jobs, err = f.q.ReserveStarting(f.ctx, []string{f.queues[i]}, k, f.lease)
			idle -= len(jobs)
			for j := range jobs {
				out = append(out, &jobs[j])
				unstarted = append(unstarted, jobs[j].Recovered)
			}
		} else {
			jobs, err = f.q.ReserveUnstarted(f.ctx, []string{f.queues[i]}, k, f.lease)
			for j := range jobs {
				out = append(out, &jobs[j])
				unstarted = append(unstarted, true)
			}
		}
		if len(jobs) < k {
			came[i] = true
			if err == nil {
				f.naps.sleep(i)
			}
		}
		short = k - len(jobs)
		f.rests.done(i, err)
	}
	for _, i := range ask {
		take(i, counts[i]+short)
	}
	for i := range f.queues {
		if short <= 0 {
			break
		}
		if !came[i] {
			take(i, short)
		}
	}
	return out, unstarted, f.rests.end(now)
}

// idle waits for work on queues: woken by the queue when it can, else
// after the poll.
func (f *fetcher) idle(ctx context.Context, queues []string) {
	if f.waiter == nil || len(queues) == 0 {
		_ = retry.Sleep(ctx, f.poll)
		return
	}
	err := f.waiter.Wait(ctx, queues, f.poll)
	if err != nil && ctx.Err() == nil {
		if f.halt.check("waiting for jobs", err) {
			return
		}
		f.log.Warn("queue: waiting for jobs", "err", err)
		_ = retry.Sleep(ctx, f.poll)
	}
}

// pacer measures the rate at which a run completes jobs and turns it into
// how many jobs to reserve ahead of the handlers.
type pacer struct {
	horizon time.Duration // how much work, in time, to hold ahead
	max     int           // the most jobs to hold ahead (Prefetch)

	rate      float64 // completions per second, smoothed
	completed int     // since sampled
	// busy is how many handlers ran jobs, on average, smoothed: the
	// handlers' time worked per second; worked is that time in all when
	// sampled.
	busy    float64
	worked  time.Duration
	sampled time.Time
}

// done counts n completed jobs.
func (p *pacer) done(n int) { p.completed += n }

// spare returns how many of the run's handlers idled, on average, as last
// sampled: handlers less those busy running jobs. The time a job waits
// for its start mark is not running: a prefetch whose jobs wait on their
// marks leaves its handlers as spare as none would.
func (p *pacer) spare(handlers int) float64 {
	return float64(handlers) - p.busy
}

// ahead returns how many jobs to hold ahead at now, sampling the rate at
// most every 10ms. worked, when not nil, returns how long the handlers
// have run in all, up to its argument, for spare; nil leaves busy at 0.
func (p *pacer) ahead(now time.Time, worked func(time.Time) time.Duration) int {
	if p.sampled.IsZero() {
		p.sampled = now
		if worked != nil {
			p.worked = worked(now)
		}
	}
	if el := now.Sub(p.sampled); el >= 10*time.Millisecond {
		p.rate = (p.rate + float64(p.completed)/el.Seconds()) / 2
		if worked != nil {
			w := worked(now)
			p.busy = (p.busy + (w-p.worked).Seconds()/el.Seconds()) / 2
			p.worked = w
		}
		p.completed, p.sampled = 0, now
	}
	return min(p.max, int(p.rate*p.horizon.Seconds()))
}
