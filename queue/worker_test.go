package queue_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/meridianjobs/meridian/internal/testutil"
	"github.com/meridianjobs/meridian/memqueue"
	"github.com/meridianjobs/meridian/queue"
)

type Greet struct {
	Name string `json:"name"`
}

// quiet is a logger that discards, so test output stays readable.
var quiet = slog.New(slog.DiscardHandler)

// startWorker runs w in the background and returns a function that stops it
// and waits for Run to return.
func startWorker(t *testing.T, w *queue.Worker) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- w.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-errc:
				if err != nil {
					t.Errorf("Run: %v", err)
				}
			case <-time.After(20 * time.Second):
				t.Fatal("worker did not stop")
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	waitWithin(t, 10*time.Second, what, cond)
}

// waitWithin is waitFor with its own limit, for waits on a synctest clock
// that span scheduled retries.
func waitWithin(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	testutil.Eventually(t, limit, cond, "timed out waiting for %s", what)
}

func deadLetters(t *testing.T, q queue.Queue) []queue.Job {
	t.Helper()
	dl, err := q.DeadLetters(context.Background(), "", 100)
	if err != nil {
		t.Fatalf("DeadLetters: %v", err)
	}
	return dl
}

func length(t *testing.T, q queue.Queue) int {
	t.Helper()
	n, err := q.Len(context.Background(), "")
	if err != nil {
		t.Fatalf("Len: %v", err)
	}
	return n
}

func TestWorkerHandlesDispatchedJob(t *testing.T) {
	t.Parallel()
	q := memqueue.New()
	w := queue.NewWorker(q).Slog(quiet)
	got := make(chan Greet, 1)
	queue.Handle(w, func(ctx context.Context, g Greet) error {
		j, ok := queue.JobFromContext(ctx)
		if !ok || j.Name != "Greet" || j.Attempts != 1 {
			t.Errorf("JobFromContext = %+v, %v", j, ok)
		}
		got <- g
		return nil
	})
	startWorker(t, w)
	if err := queue.Dispatch(context.Background(), q, Greet{Name: "ada"}); err != nil {
		t.Fatal(err)
	}
	select {
	case g := <-got:
		if g.Name != "ada" {
			t.Fatalf("handled %+v", g)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("job not handled")
	}
	waitFor(t, "ack", func() bool { return length(t, q) == 0 })
}

func TestWorkerRetriesThenSucceeds(t *testing.T) {
	t.Parallel()
	q := memqueue.New()
	var calls atomic.Int32
	var failed atomic.Int32
	w := queue.NewWorker(q).Slog(quiet).MaxRetry(3).Backoff(10 * time.Millisecond).
		OnFailed(func(queue.Job, error) { failed.Add(1) })
	queue.Handle(w, func(ctx context.Context, g Greet) error {
		if calls.Add(1) < 3 {
			return errors.New("flaky")
		}
		return nil
	})
	startWorker(t, w)
	if err := queue.Dispatch(context.Background(), q, Greet{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "three attempts and an ack", func() bool { return calls.Load() == 3 && length(t, q) == 0 })
	if failed.Load() != 0 || len(deadLetters(t, q)) != 0 {
		t.Fatal("a job that succeeded on its last attempt was dead-lettered")
	}
}

func TestWorkerDeadLettersAfterMaxAttempts(t *testing.T) {
	t.Parallel()
	errBoom := errors.New("boom")
	tests := []struct {
		name      string
		maxRetry  int
		opts      []queue.Option
		wantCalls int32
	}{
		{"worker MaxRetry", 2, nil, 2},
		{"job MaxAttempts overrides", 5, []queue.Option{queue.MaxAttempts(1)}, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				q := memqueue.New()
				var calls atomic.Int32
				var mu sync.Mutex
				var failedErrs []error
				w := queue.NewWorker(q).Slog(quiet).MaxRetry(tc.maxRetry).Backoff(time.Millisecond).
					OnFailed(func(j queue.Job, err error) {
						mu.Lock()
						failedErrs = append(failedErrs, err)
						mu.Unlock()
					})
				queue.Handle(w, func(ctx context.Context, g Greet) error {
					calls.Add(1)
					return fmt.Errorf("sending: %w", errBoom)
				})
				startWorker(t, w)
				if err := queue.Dispatch(context.Background(), q, Greet{}, tc.opts...); err != nil {
					t.Fatal(err)
				}
				waitFor(t, "dead letter", func() bool { return len(deadLetters(t, q)) == 1 })
				synctest.Wait() // any further attempt would have started by now
				if calls.Load() != tc.wantCalls {
					t.Errorf("handler ran %d times, want %d", calls.Load(), tc.wantCalls)
				}
				mu.Lock()
				defer mu.Unlock()
				if len(failedErrs) != 1 || !errors.Is(failedErrs[0], errBoom) {
					t.Fatalf("OnFailed got %v, want one error matching errBoom", failedErrs)
				}
				dl := deadLetters(t, q)[0]
				if !strings.Contains(dl.LastError, "boom") {
					t.Errorf("dead letter LastError = %q", dl.LastError)
				}
			})
		})
	}
}

func TestWorkerPoisonJobs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		job     queue.Job
		wantErr error
		wantMsg string
	}{
		{"payload does not decode", queue.Job{Name: "Greet", Payload: []byte("{not json")}, queue.ErrDecode, "does not decode"},
		{"payload of the wrong shape", queue.Job{Name: "Greet", Payload: []byte(`{"name": 42}`)}, queue.ErrDecode, "Greet"},
		{"no handler for the name", queue.Job{Name: "Nobody", Payload: []byte(`{}`)}, queue.ErrUnknownJob, "Nobody"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			q := memqueue.New()
			var onFailed []error
			var mu sync.Mutex
			handled := make(chan struct{}, 1)
			w := queue.NewWorker(q).Slog(quiet).MaxRetry(5).Backoff(time.Millisecond).
				OnFailed(func(j queue.Job, err error) {
					mu.Lock()
					onFailed = append(onFailed, err)
					mu.Unlock()
				})
			queue.Handle(w, func(ctx context.Context, g Greet) error {
				if g.Name == "good" {
					handled <- struct{}{}
				}
				return nil
			})
			startWorker(t, w)
			ctx := context.Background()
			if err := q.Push(ctx, tc.job); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "dead letter", func() bool { return len(deadLetters(t, q)) == 1 })
			dl := deadLetters(t, q)[0]
			// Each was reserved for an idle handler, so its claim counted
			// its attempt (ReserveStarting): a job with no handler too,
			// dead-lettered at once with that one attempt.
			if dl.Attempts != 1 {
				t.Errorf("poison job had %d attempts, want 1 (dead-lettered at once)", dl.Attempts)
			}
			if !strings.Contains(dl.LastError, tc.wantMsg) {
				t.Errorf("LastError %q does not mention %q", dl.LastError, tc.wantMsg)
			}
			mu.Lock()
			if len(onFailed) != 1 || !errors.Is(onFailed[0], tc.wantErr) {
				t.Errorf("OnFailed got %v, want one error matching %v", onFailed, tc.wantErr)
			}
			mu.Unlock()
			// The worker keeps running.
			if err := queue.Dispatch(ctx, q, Greet{Name: "good"}); err != nil {
				t.Fatal(err)
			}
			select {
			case <-handled:
			case <-time.After(5 * time.Second):
				t.Fatal("worker stopped handling jobs after a poison job")
			}
		})
	}
}

func TestWorkerRecoversPanic(t *testing.T) {
	t.Parallel()
	q := memqueue.New()
	var got error
	var mu sync.Mutex
	w := queue.NewWorker(q).Slog(quiet).MaxRetry(1).OnFailed(func(j queue.Job, err error) {
		mu.Lock()
		got = err
		mu.Unlock()
	})
	queue.Handle(w, func(ctx context.Context, g Greet) error { panic("kaboom") })
	startWorker(t, w)
	if err := queue.Dispatch(context.Background(), q, Greet{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "dead letter", func() bool { return len(deadLetters(t, q)) == 1 })
	mu.Lock()
	defer mu.Unlock()
	if !errors.Is(got, queue.ErrPanic) || !strings.Contains(got.Error(), "kaboom") {
		t.Fatalf("OnFailed error = %v, want ErrPanic with the panic value", got)
	}
	if dl := deadLetters(t, q)[0]; !strings.Contains(dl.LastError, "worker_test.go") {
		t.Errorf("LastError has no stack: %q", dl.LastError)
	}
}

func TestWorkerTimeout(t *testing.T) {
	t.Parallel()
	t.Run("handler honours its context", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			q := memqueue.New()
			var got error
			var mu sync.Mutex
			w := queue.NewWorker(q).Slog(quiet).MaxRetry(1).Timeout(30 * time.Millisecond).
				OnFailed(func(j queue.Job, err error) { mu.Lock(); got = err; mu.Unlock() })
			queue.Handle(w, func(ctx context.Context, g Greet) error {
				<-ctx.Done()
				return ctx.Err()
			})
			startWorker(t, w)
			if err := queue.Dispatch(context.Background(), q, Greet{}); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "dead letter", func() bool { return len(deadLetters(t, q)) == 1 })
			mu.Lock()
			defer mu.Unlock()
			if !errors.Is(got, queue.ErrTimeout) {
				t.Fatalf("error = %v, want ErrTimeout", got)
			}
		})
	})
	t.Run("job timeout overrides and stuck handler is abandoned", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			q := memqueue.New()
			release := make(chan struct{})
			defer close(release)
			var handled atomic.Int32
			w := queue.NewWorker(q).Slog(quiet).MaxRetry(1).Timeout(time.Hour).Grace(20 * time.Millisecond).Concurrency(1)
			queue.Handle(w, func(ctx context.Context, g Greet) error {
				if g.Name == "stuck" {
					<-release // ignores its context
				}
				handled.Add(1)
				return nil
			})
			startWorker(t, w)
			ctx := context.Background()
			if err := queue.Dispatch(ctx, q, Greet{Name: "stuck"}, queue.Timeout(20*time.Millisecond)); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "stuck job recorded as timed out", func() bool {
				dl := deadLetters(t, q)
				return len(dl) == 1 && strings.Contains(dl[0].LastError, "timed out")
			})
			// The one slot was freed: the next job runs.
			if err := queue.Dispatch(ctx, q, Greet{Name: "next"}); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "next job", func() bool { return handled.Load() == 1 })
		})
	})
}

func TestWorkerGracefulShutdown(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		q := memqueue.New()
		started := make(chan struct{})
		var ctxErr atomic.Value
		runCtx, cancel := context.WithCancel(context.Background())
		w := queue.NewWorker(q).Slog(quiet).ShutdownTimeout(5 * time.Second)
		queue.Handle(w, func(ctx context.Context, g Greet) error {
			close(started)
			<-runCtx.Done() // the job still runs when Run's context is cancelled
			ctxErr.Store(fmt.Sprint(ctx.Err()))
			return nil
		})
		errc := make(chan error, 1)
		go func() { errc <- w.Run(runCtx) }()
		if err := queue.Dispatch(context.Background(), q, Greet{}); err != nil {
			t.Fatal(err)
		}
		<-started
		cancel()
		if err := <-errc; err != nil {
			t.Fatalf("Run: %v", err)
		}
		if got := ctxErr.Load(); got != "<nil>" {
			t.Fatalf("handler context was cancelled by Run's context: %v", got)
		}
		if n := length(t, q); n != 0 {
			t.Fatalf("after shutdown Len = %d, want 0: the running job should finish and be acked", n)
		}
	})
}

func TestWorkerShutdownTimeoutCancelsAndReleases(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		q := memqueue.New()
		started := make(chan struct{})
		w := queue.NewWorker(q).Slog(quiet).ShutdownTimeout(30 * time.Millisecond).MaxRetry(1)
		queue.Handle(w, func(ctx context.Context, g Greet) error {
			close(started)
			<-ctx.Done()
			return ctx.Err()
		})
		stop := startWorker(t, w)
		if err := queue.Dispatch(context.Background(), q, Greet{}); err != nil {
			t.Fatal(err)
		}
		<-started
		w.Stop()
		stop()
		// The cut-off job is released for another attempt, not dead-lettered.
		if len(deadLetters(t, q)) != 0 {
			t.Fatal("a job cut off by shutdown was dead-lettered")
		}
		if n := length(t, q); n != 1 {
			t.Fatalf("Len = %d, want the job back in the queue", n)
		}
		jobs, err := q.Reserve(context.Background(), nil, 1, time.Minute)
		if err != nil || len(jobs) != 1 {
			t.Fatalf("Reserve after shutdown = %v, %v; want the released job", jobs, err)
		}
	})
}

// plainQueue hides every optional ability of the queue it wraps.
type plainQueue struct{ queue.Queue }

func TestWorkerExtendsLeaseOfLongJob(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		q    func() queue.Queue
	}{
		{"ExtendMany", func() queue.Queue { return memqueue.New() }},
		{"Extend", func() queue.Queue { return plainQueue{memqueue.New()} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				q := tc.q()
				var calls atomic.Int32
				// The job runs 2.5 leases. The worker extends a lease with half
				// of it left, checking every quarter lease, so a lease of a
				// second leaves 250 ms of slack for a loaded machine (-race,
				// CI) to schedule it.
				w := queue.NewWorker(q).Slog(quiet).Lease(time.Second).Concurrency(2)
				queue.Handle(w, func(ctx context.Context, g Greet) error {
					calls.Add(1)
					time.Sleep(2500 * time.Millisecond)
					return nil
				})
				startWorker(t, w)
				if err := queue.Dispatch(context.Background(), q, Greet{}); err != nil {
					t.Fatal(err)
				}
				waitFor(t, "ack", func() bool { return calls.Load() >= 1 && length(t, q) == 0 })
				if n := calls.Load(); n != 1 {
					t.Fatalf("a job running past its lease was delivered %d times; the lease should have been extended", n)
				}
			})
		})
	}
}

func TestWorkerDeadLettersJobWhoseAttemptsCrashesUsedUp(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		q := memqueue.New()
		ctx := context.Background()
		if err := queue.Dispatch(ctx, q, Greet{}, queue.MaxAttempts(1)); err != nil {
			t.Fatal(err)
		}
		// A worker that reserves the job and dies: its lease expires
		// while the next worker waits.
		if jobs, err := q.Reserve(ctx, nil, 1, 20*time.Millisecond); err != nil || len(jobs) != 1 {
			t.Fatalf("Reserve = %v, %v", jobs, err)
		}

		var called atomic.Bool
		var got error
		var mu sync.Mutex
		w := queue.NewWorker(q).Slog(quiet).OnFailed(func(j queue.Job, err error) { mu.Lock(); got = err; mu.Unlock() })
		queue.Handle(w, func(ctx context.Context, g Greet) error { called.Store(true); return nil })
		startWorker(t, w)
		waitFor(t, "dead letter", func() bool { return len(deadLetters(t, q)) == 1 })
		if called.Load() {
			t.Error("handler ran a job whose attempts were used up")
		}
		mu.Lock()
		defer mu.Unlock()
		if !errors.Is(got, queue.ErrAttemptsExhausted) || !strings.Contains(got.Error(), "leases expired") {
			t.Fatalf("OnFailed error = %v", got)
		}
	})
}

func TestWorkerRunsConcurrently(t *testing.T) {
	t.Parallel()
	const n = 4
	q := memqueue.New()
	var wg sync.WaitGroup
	wg.Add(n)
	allStarted := make(chan struct{})
	go func() { wg.Wait(); close(allStarted) }()
	w := queue.NewWorker(q).Slog(quiet).Concurrency(n)
	queue.Handle(w, func(ctx context.Context, g Greet) error {
		wg.Done()
		select {
		case <-allStarted:
			return nil
		case <-time.After(5 * time.Second):
			return errors.New("handlers did not run at the same time")
		}
	})
	for range n {
		if err := queue.Dispatch(context.Background(), q, Greet{}); err != nil {
			t.Fatal(err)
		}
	}
	startWorker(t, w)
	select {
	case <-allStarted:
	case <-time.After(5 * time.Second):
		t.Fatalf("%d handlers did not run at once", n)
	}
}

func TestWorkerQueuePriority(t *testing.T) {
	t.Parallel()
	q := memqueue.New()
	ctx := context.Background()
	for i := range 3 {
		if err := queue.Dispatch(ctx, q, Greet{Name: fmt.Sprint("low", i)}, queue.OnQueue("low")); err != nil {
			t.Fatal(err)
		}
		if err := queue.Dispatch(ctx, q, Greet{Name: fmt.Sprint("critical", i)}, queue.OnQueue("critical")); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	var order []string
	w := queue.NewWorker(q).Slog(quiet).Concurrency(1).Queues("critical", "low")
	queue.Handle(w, func(ctx context.Context, g Greet) error {
		mu.Lock()
		order = append(order, g.Name)
		mu.Unlock()
		return nil
	})
	startWorker(t, w)
	waitFor(t, "all jobs", func() bool { mu.Lock(); defer mu.Unlock(); return len(order) == 6 })
	want := "critical0 critical1 critical2 low0 low1 low2"
	if got := strings.Join(order, " "); got != want {
		t.Fatalf("order = %s, want %s", got, want)
	}
}

func TestWorkerMiddlewareAndObserver(t *testing.T) {
	t.Parallel()
	q := memqueue.New()
	var mu sync.Mutex
	var trail []string
	note := func(s string) { mu.Lock(); trail = append(trail, s); mu.Unlock() }
	mw := func(name string) queue.Middleware {
		return func(next queue.Handler) queue.Handler {
			return func(ctx context.Context, j queue.Job) error {
				note(name + ">")
				err := next(ctx, j)
				note("<" + name)
				return err
			}
		}
	}
	var events sync.Map
	w := queue.NewWorker(q).Slog(quiet).Use(mw("outer"), mw("inner")).
		Observer(queue.ObserverFunc(func(e queue.Event) {
			v, _ := events.LoadOrStore(e.Kind, new(atomic.Int32))
			v.(*atomic.Int32).Add(1)
		}))
	queue.Handle(w, func(ctx context.Context, g Greet) error { note("handler"); return nil })
	startWorker(t, w)
	if err := queue.Dispatch(context.Background(), q, Greet{}); err != nil {
		t.Fatal(err)
	}
	count := func(k queue.EventKind) int32 {
		v, ok := events.Load(k)
		if !ok {
			return 0
		}
		return v.(*atomic.Int32).Load()
	}
	waitFor(t, "done event", func() bool { return count(queue.EventDone) == 1 })
	mu.Lock()
	defer mu.Unlock()
	if got := strings.Join(trail, " "); got != "outer> inner> handler <inner <outer" {
		t.Fatalf("middleware order: %s", got)
	}
	if count(queue.EventStarted) != 1 {
		t.Fatalf("started events = %d", count(queue.EventStarted))
	}
}

func TestWorkerRunErrors(t *testing.T) {
	t.Parallel()
	w := queue.NewWorker(memqueue.New())
	if err := w.Run(context.Background()); err == nil {
		t.Fatal("Run with no handlers returned nil")
	}
	defer func() {
		if recover() == nil {
			t.Fatal("registering a name twice did not panic")
		}
	}()
	queue.Handle(w, func(context.Context, Greet) error { return nil })
	queue.Handle(w, func(context.Context, Greet) error { return nil })
}

func TestWorkerStopBeforeJobsLeavesThemQueued(t *testing.T) {
	t.Parallel()
	q := memqueue.New()
	w := queue.NewWorker(q).Slog(quiet)
	queue.Handle(w, func(context.Context, Greet) error { return nil })
	w.Stop()
	done := make(chan error, 1)
	go func() { done <- w.Run(context.Background()) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after Stop")
	}
}

func TestWorkerLoggerPrintf(t *testing.T) {
	t.Parallel()
	q := memqueue.New()
	var mu sync.Mutex
	var lines []string
	w := queue.NewWorker(q).Logger(func(format string, args ...any) {
		mu.Lock()
		lines = append(lines, fmt.Sprintf(format, args...))
		mu.Unlock()
	}).MaxRetry(1)
	queue.Handle(w, func(context.Context, Greet) error { return errors.New("nope") })
	startWorker(t, w)
	if err := queue.Dispatch(context.Background(), q, Greet{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "dead-letter log line", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, l := range lines {
			if strings.Contains(l, "dead-lettered") && strings.Contains(l, "nope") {
				return true
			}
		}
		return false
	})
}

// countingQueue counts Reserve calls.
type countingQueue struct {
	*memqueue.Queue
	reserves atomic.Int64
}

func (c *countingQueue) Reserve(ctx context.Context, queues []string, max int, lease time.Duration) ([]queue.Job, error) {
	c.reserves.Add(1)
	return c.Queue.Reserve(ctx, queues, max, lease)
}

// A worker whose handlers are all busy and whose queue is empty waits for a
// wake-up or the poll instead of asking the queue again and again.
func TestWorkerDoesNotSpinOnAnEmptyQueue(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		q := &countingQueue{Queue: memqueue.New()}
		release := make(chan struct{})
		w := queue.NewWorker(q).Slog(quiet).Concurrency(1).Poll(time.Second)
		started := make(chan struct{}, 10)
		var fast atomic.Int64
		queue.Handle(w, func(ctx context.Context, g Greet) error {
			if g.Name != "block" {
				fast.Add(1)
				return nil
			}
			started <- struct{}{}
			<-release
			return nil
		})
		// Many fast jobs first, so the worker measures a high rate and
		// prefetches, then one that blocks its only handler.
		ctx := context.Background()
		if _, err := queue.DispatchMany(ctx, q, make([]Greet, 5000)); err != nil {
			t.Fatal(err)
		}
		startWorker(t, w)
		waitFor(t, "the fast jobs", func() bool { return fast.Load() == 5000 })
		if err := queue.Dispatch(ctx, q, Greet{Name: "block"}); err != nil {
			t.Fatal(err)
		}
		<-started
		before := q.reserves.Load()
		time.Sleep(300 * time.Millisecond)
		if n := q.reserves.Load() - before; n > 3 {
			t.Errorf("%d Reserve calls in 300ms with an empty queue and a 1s poll", n)
		}
		close(release)
	})
}
