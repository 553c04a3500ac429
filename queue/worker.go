package queue

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/debug"
	"strings"
	"sync"
	"time"
)

// Worker defaults.
const (
	DefaultMaxRetry        = 5
	DefaultConcurrency     = 10
	DefaultPoll            = time.Second
	DefaultShutdownTimeout = 30 * time.Second
	DefaultLease           = time.Minute
	DefaultPrefetch        = 1000
)

// DefaultBackoff is the retry policy of a Worker with no Backoff or
// BackoffPolicy set: exponential from one second, with jitter, capped at
// five minutes.
var DefaultBackoff = Exponential(time.Second, 5*time.Minute)

// LeaseDefaulter is a Queue that has a configured lease length (sqlqueue's
// WithVisibilityTimeout). A Worker with no Lease setting reserves for that
// long.
type LeaseDefaulter interface {
	DefaultLease() time.Duration
}

// Worker reserves jobs from a Queue and runs their handlers.
//
// Configure it with the fluent setters before Run; they are not safe to call
// once Run has started. Handlers run on up to Concurrency goroutines at once.
// The worker retries: a handler error nacks the job for a later attempt after
// the backoff, until the job's attempts are used up, when it is failed into
// the dead letters and OnFailed is called. Decoding errors, unknown job
// names and Permanent errors are dead-lettered at once.
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
	timeout         time.Duration
	grace           time.Duration
	shutdownTimeout time.Duration
	lease           time.Duration
	middleware      []Middleware
	observer        Observer
	heartbeat       time.Duration
	prefetch        int

	stopOnce sync.Once
	stopCh   chan struct{}
	running  sync.Mutex
}

// NewWorker returns a Worker over q with the defaults: MaxRetry 5, the
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
		stopCh:          make(chan struct{}),
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

// MaxRetry sets the total attempts a job gets before it is dead-lettered
// (n < 1 means 1). A job's own MaxAttempts overrides it.
func (w *Worker) MaxRetry(n int) *Worker {
	w.maxRetry = max(n, 1)
	return w
}

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
	}
	return w
}

// Timeout bounds each attempt (0, the default, means no bound). A job's own
// Timeout overrides it. At the timeout the handler's context is cancelled;
// a handler that still has not returned a grace period later is abandoned:
// the attempt is recorded as failed with ErrTimeout, its slot is freed and
// the stuck goroutine is logged.
func (w *Worker) Timeout(d time.Duration) *Worker {
	w.timeout = max(d, 0)
	return w
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

// Prefetch caps how many jobs the worker reserves ahead of its free
// handlers (default 1000; 0 turns prefetch off). The worker reserves ahead
// only as many jobs as it finishes in about 50ms at its recent rate, so
// slow jobs are never hoarded by one process; fast jobs are reserved in
// large batches, one round trip each. Prefetched jobs are leased (and their
// leases extended) while they wait; at shutdown they run like the others
// within ShutdownTimeout.
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
	if ld, ok := w.q.(LeaseDefaulter); ok && ld.DefaultLease() > 0 {
		return ld.DefaultLease()
	}
	return DefaultLease
}

// Run works jobs until ctx is cancelled or Stop is called, then shuts down
// gracefully: it stops reserving, lets running jobs finish within
// ShutdownTimeout, then cancels their contexts, flushes pending acks under a
// context of its own and returns nil. Handler contexts do not derive from
// ctx. Errors from the queue are logged and retried, not returned. Run
// returns an error only if the worker cannot start (no handlers, or it is
// already running).
func (w *Worker) Run(ctx context.Context) error {
	if len(w.handlers) == 0 {
		return errors.New("queue: worker has no handlers; register them with Handle before Run")
	}
	if !w.running.TryLock() {
		return errors.New("queue: worker is already running")
	}
	defer w.running.Unlock()

	r := newRun(w)
	return r.run(ctx)
}

// handlerFor returns the handler for name wrapped in the middleware, or nil.
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

// hostname for the worker registry.
func hostname() string {
	h, err := os.Hostname()
	if err != nil {
		return "unknown"
	}
	return h
}

var _ io.Writer = printfWriter(nil)
