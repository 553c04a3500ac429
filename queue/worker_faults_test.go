package queue_test

import (
	"bytes"
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

// faultyQueue is a memory queue whose Reserve fails as the test says.
type faultyQueue struct {
	*memqueue.Queue
	mu   sync.Mutex
	errs []error // returned by the next Reserve calls, in order
}

func (f *faultyQueue) Reserve(ctx context.Context, queues []string, n int, lease time.Duration) ([]queue.Job, error) {
	f.mu.Lock()
	if len(f.errs) > 0 {
		err := f.errs[0]
		f.errs = f.errs[1:]
		f.mu.Unlock()
		return nil, err
	}
	f.mu.Unlock()
	return f.Queue.Reserve(ctx, queues, n, lease)
}

// ReserveUnstarted fails as Reserve does: the Worker prefetches through it.
func (f *faultyQueue) ReserveUnstarted(ctx context.Context, queues []string, n int, lease time.Duration) ([]queue.Job, error) {
	if err := f.next(); err != nil {
		return nil, err
	}
	return f.Queue.ReserveUnstarted(ctx, queues, n, lease)
}

// ReserveStarting fails as Reserve does: the Worker reserves its idle
// handlers' jobs through it.
func (f *faultyQueue) ReserveStarting(ctx context.Context, queues []string, n int, lease time.Duration) ([]queue.Job, error) {
	if err := f.next(); err != nil {
		return nil, err
	}
	return f.Queue.ReserveStarting(ctx, queues, n, lease)
}

// next takes the next error to return, if any.
func (f *faultyQueue) next() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.errs) == 0 {
		return nil
	}
	err := f.errs[0]
	f.errs = f.errs[1:]
	return err
}

// syncBuffer is a log destination safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestWorkerRunReturnsAConfigurationError(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		missing := fmt.Errorf("sqlqueue: reserving jobs: table \"jobs\" does not exist: %w", queue.ErrConfig)
		q := &faultyQueue{Queue: memqueue.New(), errs: []error{errors.New("connection reset"), missing}}
		w := queue.NewWorker(q).Slog(quiet)
		queue.Handle(w, func(ctx context.Context, g Greet) error { return nil })
		err := w.Run(t.Context())
		if !errors.Is(err, queue.ErrConfig) || !errors.Is(err, missing) {
			t.Fatalf("Run = %v, want the configuration error", err)
		}
		if !strings.Contains(err.Error(), "reserving jobs") {
			t.Errorf("Run's error %q does not say what the worker was doing", err)
		}
	})
}

func TestWorkerLogsATransientFailureOncePerStreak(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var errs []error
		for range 6 {
			errs = append(errs, errors.New("connection refused"))
		}
		q := &faultyQueue{Queue: memqueue.New(), errs: errs}
		var logs syncBuffer
		var done atomic.Int32
		w := queue.NewWorker(q).Slog(slog.New(slog.NewTextHandler(&logs, nil)))
		queue.Handle(w, func(ctx context.Context, g Greet) error { done.Add(1); return nil })
		if err := queue.Dispatch(t.Context(), q, Greet{}); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		errc := make(chan error, 1)
		go func() { errc <- w.Run(ctx) }()
		testutil.Eventually(t, 10*time.Second, func() bool { return done.Load() == 1 }, "the job after six failed reserves")
		synctest.Wait()
		cancel()
		if err := <-errc; err != nil {
			t.Fatalf("Run = %v, want nil after transient errors", err)
		}
		if done.Load() != 1 {
			t.Fatalf("%d jobs done, want 1 once the queue recovered", done.Load())
		}
		out := logs.String()
		if n := strings.Count(out, "reserving jobs failed"); n != 1 {
			t.Errorf("%d failure lines for one streak of 6 failures, want 1:\n%s", n, out)
		}
		if !strings.Contains(out, "reserving jobs recovered") || !strings.Contains(out, "failures=6") {
			t.Errorf("no recovery line counting 6 failures:\n%s", out)
		}
	})
}

// A handler abandoned after its timeout and grace may still run; its job's
// retry must not run beside it in the same process.
func TestWorkerNeverRunsTwoCopiesOfAJob(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		q := memqueue.New()
		release := make(chan struct{})
		var running, most atomic.Int32
		var failed atomic.Value
		var logs syncBuffer
		w := queue.NewWorker(q).Slog(slog.New(slog.NewTextHandler(&logs, nil))).Concurrency(4).MaxAttempts(3).
			Timeout(time.Second).Grace(time.Second).Backoff(time.Second).
			OnFailed(func(j queue.Job, err error) { failed.Store(err) })
		queue.Handle(w, func(ctx context.Context, g Greet) error {
			n := running.Add(1)
			defer running.Add(-1)
			if n > most.Load() {
				most.Store(n)
			}
			<-release // ignores its context
			return nil
		})
		id, _, err := queue.Enqueue(t.Context(), q, Greet{})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		errc := make(chan error, 1)
		go func() { errc <- w.Run(ctx) }()
		// Past the timeout, grace, and every retry's backoff.
		testutil.Eventually(t, time.Minute, func() bool {
			return strings.Contains(logs.String(), "abandoned attempt still runs here; releasing it")
		}, "the job was not released while its abandoned attempt runs")
		synctest.Wait()
		if got := most.Load(); got != 1 {
			t.Errorf("%d copies of one job ran at once in one process, want 1", got)
		}
		if w.Abandoned() != 1 {
			t.Errorf("Abandoned = %d, want the one stuck handler", w.Abandoned())
		}
		// Released for later while its abandoned attempt runs, each time
		// without an attempt counted: one real run, one attempt.
		if err, _ := failed.Load().(error); err != nil {
			t.Errorf("job dead-lettered with %v; want it released uncounted while its abandoned attempt runs", err)
		}
		if dead, err := q.DeadLetters(t.Context(), "", 10); err != nil || len(dead) != 0 {
			t.Errorf("dead letters %d, %v; want none", len(dead), err)
		}
		if info, err := q.GetJob(t.Context(), id); err != nil || info.Attempts != 1 {
			t.Errorf("GetJob = %d attempts, %v; want 1 (its one real run)", info.Attempts, err)
		}
		close(release)
		synctest.Wait()
		if w.Abandoned() != 0 {
			t.Errorf("Abandoned = %d after the handler returned, want 0", w.Abandoned())
		}
		cancel()
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	})
}

// At shutdown, a handler that ignores its context leaves its job released
// for another worker (docs/semantics.md), not leased until the lease runs
// out.
func TestWorkerShutdownReleasesTheJobOfAHandlerIgnoringCancellation(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		q := memqueue.New()
		release := make(chan struct{})
		started := make(chan struct{})
		w := queue.NewWorker(q).Slog(quiet).ShutdownTimeout(time.Second).Grace(time.Second).Lease(time.Hour)
		queue.Handle(w, func(ctx context.Context, g Greet) error {
			close(started)
			<-release // ignores its context
			return nil
		})
		if err := queue.Dispatch(t.Context(), q, Greet{}); err != nil {
			t.Fatal(err)
		}
		errc := make(chan error, 1)
		go func() { errc <- w.Run(t.Context()) }()
		<-started
		w.Stop()
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
		jobs, err := q.Reserve(t.Context(), nil, 1, time.Minute)
		if err != nil || len(jobs) != 1 {
			t.Errorf("Reserve after shutdown = %d jobs, %v; want the released job at once", len(jobs), err)
		}
		close(release)
		synctest.Wait()
	})
}
