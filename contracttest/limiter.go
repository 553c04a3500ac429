package contracttest

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// limitedJob is the job of the limiter checks.
type limitedJob struct {
	N    int
	Fail bool
}

// processes returns n handles on q's store as n processes would open
// them: q and peers, or q n times for a driver without Peer (memory:
// several Workers in one process).
func (s *suite) processes(t *testing.T, q queue.Queue, n int) []queue.Queue {
	hs := []queue.Queue{q}
	for len(hs) < n {
		if s.h.Peer == nil {
			hs = append(hs, q)
		} else {
			hs = append(hs, s.h.Peer(t, q))
		}
	}
	return hs
}

// limited returns a Worker on h for queueName running handlers at once
// whose handler is fn behind
// the middleware mw(limiter).
func limited(t *testing.T, h queue.Queue, queueName string, handlers int, mw func(l *queue.Limiter) (queue.Middleware, error), fn func(ctx context.Context, j limitedJob) error) *queue.Worker {
	t.Helper()
	l, err := queue.NewLimiter(h, quiet)
	if err != nil {
		t.Fatal(err)
	}
	m, err := mw(l)
	if err != nil {
		t.Fatal(err)
	}
	w := queue.NewWorker(h).Slog(quiet).Queues(queueName).Poll(10 * time.Millisecond).Concurrency(handlers).Use(m)
	queue.Handle(w, fn)
	return w
}

func dispatchLimited(t *testing.T, q queue.Queue, queueName string, n int, fail bool) {
	t.Helper()
	vs := make([]limitedJob, n)
	for i := range vs {
		vs[i] = limitedJob{N: i, Fail: fail}
	}
	if got, err := queue.DispatchMany(t.Context(), q, vs, queue.OnQueue(queueName)); err != nil || got != n {
		t.Fatalf("DispatchMany = %d, %v; want %d", got, err, n)
	}
}

// testLimiters checks queue.Limiter's middleware across three processes
// on one store (its state is the store's Leaser): a rate limit, a
// concurrency limit per key and per queue, and the error throttle.
func (s *suite) testLimiters(t *testing.T) {
	s.testConcurrencyLimits(t)
	s.testThrottle(t)
}

// testRateLimit checks queue.Limiter.Rate across three processes. Run
// calls it in a group of its own, so the checks that run beside it load
// the machine no more than it does itself.
func (s *suite) testRateLimit(t *testing.T) {
	checkAs(s, t, "RateAcrossProcesses", func(t *testing.T, q queue.Queue, _ driver.Scheduler) {
		// 50 per second across 3 processes: never more than 50 starts in
		// a second, and the slots come back after their second: the run
		// goes on until more than three seconds' worth have started,
		// which no limiter that kept its slots could reach. How fast a
		// store gets there is a speed figure, measured by hand in
		// docs/workflows.md, not asserted here (on a loaded machine
		// SQLite's one writer gave 158 starts in 10 s): the wait for
		// them is only a deadline.
		const n, per = 50, time.Second
		// Starts are recorded when the handler begins, after the store
		// granted the slot; scheduling on a loaded machine can delay one
		// recording against another, so windows are judged that much
		// shorter. A limiter that did not hold would start the 700 jobs
		// within milliseconds, far inside this.
		const slack = 250 * time.Millisecond
		dispatchLimited(t, q, "rate", 700, false)
		var mu sync.Mutex
		var starts []time.Time
		record := func(ctx context.Context, _ limitedJob) error {
			mu.Lock()
			starts = append(starts, time.Now())
			mu.Unlock()
			return nil
		}
		started := func() int {
			mu.Lock()
			defer mu.Unlock()
			return len(starts)
		}
		rate := func(l *queue.Limiter) (queue.Middleware, error) { return l.Rate(queue.KeyByName, n, per) }
		begin := time.Now()
		var stops []func()
		for _, h := range s.processes(t, q, 3) {
			stops = append(stops, runWorker(t, limited(t, h, "rate", 4, rate, record)))
		}
		for deadline := time.Now().Add(2 * time.Minute); started() <= 3*n; time.Sleep(pollEvery) {
			if time.Now().After(deadline) {
				t.Fatalf("%d starts in 2 minutes at %d per %s across 3 processes, want more than %d: the slots did not come back after their interval", started(), n, per, 3*n)
			}
		}
		for _, stop := range stops {
			stop()
		}
		mu.Lock()
		defer mu.Unlock()
		slices.SortFunc(starts, time.Time.Compare)
		for i := 0; i+n < len(starts); i++ {
			if d := starts[i+n].Sub(starts[i]); d < per-slack {
				t.Fatalf("%d jobs started within %s (from %s): more than %d per %s", n+1, d, starts[i].Sub(begin), n, per)
			}
		}
		t.Logf("%d starts in %s", len(starts), time.Since(begin).Round(time.Millisecond))
	})
}

func (s *suite) testConcurrencyLimits(t *testing.T) {
	concurrency := func(name string, key queue.KeyFunc, limit int) {
		checkAs(s, t, name, func(t *testing.T, q queue.Queue, _ driver.Scheduler) {
			// Checked by the handlers themselves: each counts the handlers
			// running at once, across 3 processes of 2 handlers each (more
			// handlers than slots in all, and in more than one process).
			// Every attempt that finds no free slot is a snooze, a write:
			// more handlers or jobs only multiply the writes a
			// single-writer store (SQLite) must queue, not what is checked.
			jobs := 10 * limit
			dispatchLimited(t, q, "conc", jobs, false)
			var mu sync.Mutex
			running, most, done := 0, 0, 0
			work := func(ctx context.Context, _ limitedJob) error {
				mu.Lock()
				running++
				most = max(most, running)
				mu.Unlock()
				time.Sleep(5 * time.Millisecond) // the job's work, so jobs overlap
				mu.Lock()
				running--
				done++
				mu.Unlock()
				return nil
			}
			mw := func(l *queue.Limiter) (queue.Middleware, error) {
				return l.Concurrency(key, limit, 5*time.Second, 20*time.Millisecond)
			}
			var stops []func()
			for _, h := range s.processes(t, q, 3) {
				stops = append(stops, runWorker(t, limited(t, h, "conc", 2, mw, work)))
			}
			eventually(t, "every job to run", func() bool {
				mu.Lock()
				defer mu.Unlock()
				return done >= jobs
			})
			for _, stop := range stops {
				stop()
			}
			mu.Lock()
			defer mu.Unlock()
			if most > limit {
				t.Errorf("%d jobs ran at once under a concurrency limit of %d", most, limit)
			}
			if done != jobs {
				t.Errorf("%d handlings of %d jobs, want each once", done, jobs)
			}
		})
	}
	concurrency("ConcurrencyPerKey", queue.KeyByName, 2)
	concurrency("ConcurrencyPerQueue", queue.KeyByQueue, 1)
}

func (s *suite) testThrottle(t *testing.T) {
	checkAs(s, t, "ThrottleErrors", func(t *testing.T, q queue.Queue, _ driver.Scheduler) {
		// Two failures within the window block the key for a second: a
		// job of the key pushed after them starts no sooner.
		const backoff = time.Second
		var mu sync.Mutex
		var failedAt []time.Time
		var okAt []time.Time
		fn := func(ctx context.Context, j limitedJob) error {
			mu.Lock()
			defer mu.Unlock()
			if j.Fail {
				failedAt = append(failedAt, time.Now())
				return queue.Permanent(errors.New("the service is down"))
			}
			okAt = append(okAt, time.Now())
			return nil
		}
		mw := func(l *queue.Limiter) (queue.Middleware, error) {
			return l.ThrottleErrors(queue.KeyByName, 2, time.Minute, backoff)
		}
		var stops []func()
		for _, h := range s.processes(t, q, 2) {
			stops = append(stops, runWorker(t, limited(t, h, "throttle", 4, mw, fn)))
		}
		dispatchLimited(t, q, "throttle", 2, true)
		eventually(t, "both failing jobs to be dead-lettered", func() bool { return len(deadLetters(t, q, "throttle", 10)) == 2 })
		dispatchLimited(t, q, "throttle", 1, false)
		eventually(t, "the next job to run", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(okAt) == 1
		})
		for _, stop := range stops {
			stop()
		}
		mu.Lock()
		defer mu.Unlock()
		last := slices.MaxFunc(failedAt, time.Time.Compare)
		if okAt[0].Before(last.Add(backoff)) {
			t.Errorf("a job of the throttled key started %s after the second failure, want at least %s", okAt[0].Sub(last), backoff)
		}
	})
}
