package queue_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/meridianjobs/meridian/memqueue"
	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/balance"
)

// fill pushes n Greet jobs onto queue qn.
func fill(t *testing.T, q queue.Queue, qn string, n int) {
	t.Helper()
	for i := range n {
		if err := queue.Dispatch(context.Background(), q, Greet{Name: fmt.Sprint(qn, i)}, queue.OnQueue(qn)); err != nil {
			t.Fatal(err)
		}
	}
}

// gauge counts the handlers running per queue and in all, and keeps the
// most seen at once.
type gauge struct {
	mu               sync.Mutex
	running, most    map[string]int
	total, mostTotal int
	starts           []string // the queue of each start, in order
	startAt          []time.Duration
	runningAt        []int // the start's queue's running count, the start included
	t0               time.Time
}

func newGauge() *gauge {
	return &gauge{running: map[string]int{}, most: map[string]int{}, t0: time.Now()}
}

func (g *gauge) start(qn string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.running[qn]++
	g.total++
	g.most[qn] = max(g.most[qn], g.running[qn])
	g.mostTotal = max(g.mostTotal, g.total)
	g.starts = append(g.starts, qn)
	g.startAt = append(g.startAt, time.Since(g.t0))
	g.runningAt = append(g.runningAt, g.running[qn])
}

func (g *gauge) end(qn string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.running[qn]--
	g.total--
}

func (g *gauge) started() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.starts)
}

// handle registers a Greet handler on w that runs for d, measured by g.
func (g *gauge) handle(w *queue.Worker, d time.Duration) {
	g.handleFor(w, func(int, Greet) time.Duration { return d })
}

// handleFor registers a Greet handler on w that runs the n'th start, of
// v, for d(n, v), measured by g.
func (g *gauge) handleFor(w *queue.Worker, d func(n int, v Greet) time.Duration) {
	queue.Handle(w, func(ctx context.Context, v Greet) error {
		j, _ := queue.JobFromContext(ctx)
		g.start(j.Queue)
		defer g.end(j.Queue)
		g.mu.Lock()
		n := len(g.starts)
		g.mu.Unlock()
		time.Sleep(d(n, v))
		return nil
	})
}

// TestWorkerWeightedQueues: with every queue backlogged, each run of
// starts as long as the sum of the weights holds each queue's weight in
// starts, interleaved (balance.Weighted).
func TestWorkerWeightedQueues(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		q := memqueue.New()
		fill(t, q, "critical", 70)
		fill(t, q, "low", 70)
		g := newGauge()
		w := queue.NewWorker(q).Slog(quiet).Concurrency(1).Prefetch(0).
			Balance(balance.Options{Strategy: balance.Weighted, Weights: map[string]int{"critical": 6, "low": 1}})
		g.handle(w, time.Millisecond)
		stop := startWorker(t, w)
		waitFor(t, "70 starts", func() bool { return g.started() >= 70 })
		stop()
		g.mu.Lock()
		defer g.mu.Unlock()
		for i := 0; i+7 <= 70; i += 7 {
			n := 0
			for _, qn := range g.starts[i : i+7] {
				if qn == "low" {
					n++
				}
			}
			if n != 1 {
				t.Fatalf("starts %d to %d hold %d jobs of low, want 1 (6:1): %v", i, i+6, n, g.starts[:70])
			}
		}
	})
}

// TestWorkerWeightedQueuesGiveWayWhenEmpty: a queue with nothing ready
// gives its turn to the others, and Weights alone name the queues.
func TestWorkerWeightedQueuesGiveWayWhenEmpty(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		q := memqueue.New()
		fill(t, q, "low", 20)
		g := newGauge()
		w := queue.NewWorker(q).Slog(quiet).Concurrency(2).
			Balance(balance.Options{Strategy: balance.Weighted, Weights: map[string]int{"critical": 6, "low": 1}})
		g.handle(w, time.Millisecond)
		startWorker(t, w)
		waitFor(t, "the 20 jobs of low", func() bool { return g.started() == 20 })
	})
}

// TestWorkerBudgetSimple: a budget split evenly: each queue runs at most
// its half, even while the other has nothing, and the whole never more
// than the budget.
func TestWorkerBudgetSimple(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		q := memqueue.New()
		fill(t, q, "a", 30)
		fill(t, q, "b", 6)
		g := newGauge()
		w := queue.NewWorker(q).Slog(quiet).Concurrency(3).Queues("a", "b").
			Balance(balance.Options{Strategy: balance.Simple, Max: 6})
		g.handle(w, time.Second)
		startWorker(t, w)
		waitWithin(t, time.Minute, "all 36 jobs", func() bool { return g.started() == 36 })
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.most["a"] != 3 || g.most["b"] != 3 || g.mostTotal != 6 {
			t.Fatalf("most running at once: a %d, b %d, all %d; want 3, 3, 6 (Max 6 split evenly)", g.most["a"], g.most["b"], g.mostTotal)
		}
	})
}

// TestWorkerBudgetAutoShiftsBounded: under Auto a flooded queue gains
// handlers from an idle one by at most MaxShift per Cooldown, down to the
// idle queue's Min, and never beyond the budget; when the other queue
// fills, handlers move back.
func TestWorkerBudgetAutoShiftsBounded(t *testing.T) {
	t.Parallel()
	for _, by := range []balance.Measure{balance.WaitTime, balance.Backlog} {
		t.Run(string(by), func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				q := memqueue.New()
				fill(t, q, "a", 400)
				g := newGauge()
				const cooldown = 3 * time.Second
				w := queue.NewWorker(q).Slog(quiet).Queues("a", "b").
					Balance(balance.Options{Strategy: balance.Auto, Max: 10, Min: 1, By: by, MaxShift: 1, Cooldown: cooldown})
				g.handle(w, time.Second)
				startWorker(t, w)
				waitWithin(t, time.Minute, "a running 9", func() bool {
					g.mu.Lock()
					defer g.mu.Unlock()
					return g.running["a"] == 9
				})
				g.mu.Lock()
				for i, qn := range g.starts {
					if qn != "a" {
						continue
					}
					if limit := 5 + int(g.startAt[i]/cooldown); g.runningAt[i] > limit {
						t.Fatalf("at %s a ran %d at once; from 5 of 10, one more per %s allows %d", g.startAt[i], g.runningAt[i], cooldown, limit)
					}
				}
				if g.most["a"] > 9 || g.mostTotal > 10 {
					t.Fatalf("most running: a %d, all %d; want a <= 9 (b keeps Min 1), all <= 10", g.most["a"], g.mostTotal)
				}
				g.mu.Unlock()

				fill(t, q, "b", 400)
				waitWithin(t, 2*time.Minute, "b running 3", func() bool {
					g.mu.Lock()
					defer g.mu.Unlock()
					return g.running["b"] >= 3
				})
				g.mu.Lock()
				defer g.mu.Unlock()
				if g.mostTotal > 10 {
					t.Fatalf("%d handlers ran at once, over the budget of 10", g.mostTotal)
				}
			})
		})
	}
}

// TestWorkerBalanceRefusesBadOptions: Run says what it cannot honour.
func TestWorkerBalanceRefusesBadOptions(t *testing.T) {
	t.Parallel()
	for name, o := range map[string]balance.Options{
		"floors over the budget": {Strategy: balance.Simple, Max: 3, Min: 2},
		"unknown strategy":       {Strategy: "fair"},
		"zero weight":            {Strategy: balance.Weighted, Weights: map[string]int{"a": -1}},
	} {
		w := queue.NewWorker(memqueue.New()).Slog(quiet).Queues("a", "b").Balance(o)
		queue.Handle(w, func(context.Context, Greet) error { return nil })
		if err := w.Run(context.Background()); !errors.Is(err, balance.ErrOptions) {
			t.Errorf("%s: Run = %v, want ErrOptions", name, err)
		}
	}
}

// reserveCounter is a memqueue that counts its reservations per queue,
// and those that came back empty.
type reserveCounter struct {
	*memqueue.Queue
	mu           sync.Mutex
	calls, empty map[string]int
}

func newReserveCounter() *reserveCounter {
	return &reserveCounter{Queue: memqueue.New(), calls: map[string]int{}, empty: map[string]int{}}
}

func (c *reserveCounter) ReserveUnstarted(ctx context.Context, queues []string, n int, lease time.Duration) ([]queue.Job, error) {
	jobs, err := c.Queue.ReserveUnstarted(ctx, queues, n, lease)
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, qn := range queues {
		c.calls[qn]++
		if len(jobs) == 0 {
			c.empty[qn]++
		}
	}
	return jobs, err
}

func (c *reserveCounter) counts(qn string) (calls, empty int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls[qn], c.empty[qn]
}

// TestWorkerEmptyQueueSleepsUntilWoken: under a budget and under weights,
// a queue whose reservation came back empty is not asked again while the
// other queue's jobs finish, only once it is woken (here by a push, the
// poll being an hour); then its job starts at once.
func TestWorkerEmptyQueueSleepsUntilWoken(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		o balance.Options
		// within bounds the start of b's job after its push: the jobs of
		// a reserved ahead run first (without a budget, the worker's
		// prefetch: about 50ms of work).
		within time.Duration
	}{
		"simple":   {balance.Options{Strategy: balance.Simple, Max: 10}, 5 * time.Millisecond},
		"auto":     {balance.Options{Strategy: balance.Auto, Max: 10}, 5 * time.Millisecond},
		"weighted": {balance.Options{Strategy: balance.Weighted, Weights: map[string]int{"a": 6, "b": 1}}, 100 * time.Millisecond},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				q := newReserveCounter()
				fill(t, q, "a", 1000)
				g := newGauge()
				w := queue.NewWorker(q).Slog(quiet).Concurrency(10).Poll(time.Hour).Queues("a", "b").Balance(tc.o)
				g.handle(w, time.Millisecond)
				startWorker(t, w)
				waitWithin(t, time.Minute, "500 starts", func() bool { return g.started() >= 500 })
				if calls, empty := q.counts("b"); calls > 1 || empty > 1 {
					t.Fatalf("b, empty, was asked %d times (%d empty) while 500 jobs of a started; want at most once until woken", calls, empty)
				}
				fill(t, q, "b", 1)
				at := time.Now()
				waitWithin(t, time.Minute, "b's job", func() bool {
					g.mu.Lock()
					defer g.mu.Unlock()
					return g.most["b"] == 1
				})
				if d := time.Since(at); d > tc.within {
					t.Errorf("b's job started %s after its push; want within %s (woken by the push)", d, tc.within)
				}
			})
		})
	}
}

// TestWorkerBudgetReservesAhead: under a budget a flooded queue of fast
// jobs is reserved ahead of its free handlers, many jobs per round trip
// rather than one per finished job, while it never runs more handlers
// than its allotment nor the worker more than the budget.
func TestWorkerBudgetReservesAhead(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		q := newReserveCounter()
		fill(t, q, "a", 2000)
		fill(t, q, "b", 2000)
		g := newGauge()
		w := queue.NewWorker(q).Slog(quiet).Queues("a", "b").Balance(balance.Options{Strategy: balance.Simple, Max: 16})
		// 1 to 2ms, varied so that the handlers finish one by one.
		g.handleFor(w, func(n int, _ Greet) time.Duration {
			return time.Millisecond + time.Duration(n*37%101)*10*time.Microsecond
		})
		startWorker(t, w)
		waitWithin(t, time.Minute, "all 4000 jobs", func() bool { return g.started() == 4000 })
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.most["a"] > 8 || g.most["b"] > 8 || g.mostTotal > 16 {
			t.Fatalf("most running at once: a %d, b %d, all %d; want at most 8, 8, 16 (Max 16 split evenly)", g.most["a"], g.most["b"], g.mostTotal)
		}
		for _, qn := range []string{"a", "b"} {
			// Reserving ahead 50ms of work (over 200 jobs at 8 handlers'
			// rate), again when half of that is left: tens of jobs per
			// reservation once paced (one per finished job without it).
			if calls, _ := q.counts(qn); calls > 2000/10 {
				t.Errorf("%s was reserved %d times for its 2000 jobs; want at most %d (many jobs per round trip)", qn, calls, 2000/10)
			}
		}
	})
}

// TestWorkerBudgetWaitingJobsKeepTheirLeases: jobs a queue reserved
// ahead wait, leased, while its allotment's one handler runs a job ten
// times as long as the lease: the worker extends their leases meanwhile,
// so none is lost and every job runs once.
func TestWorkerBudgetWaitingJobsKeepTheirLeases(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		q := memqueue.New()
		fill(t, q, "a", 100)
		if err := queue.Dispatch(context.Background(), q, Greet{Name: "slow"}, queue.OnQueue("a")); err != nil {
			t.Fatal(err)
		}
		fill(t, q, "a", 50)
		var mu sync.Mutex
		events := map[queue.EventKind]int{}
		runs := map[string]int{}
		var slowAt time.Time
		w := queue.NewWorker(q).Slog(quiet).Lease(3*time.Second).Queues("a", "b").
			Balance(balance.Options{Strategy: balance.Simple, Max: 2}).
			Observer(queue.ObserverFunc(func(e queue.Event) {
				mu.Lock()
				defer mu.Unlock()
				events[e.Kind]++
				if e.Kind == queue.EventStarted {
					runs[e.Job.ID]++
				}
			}))
		newGauge().handleFor(w, func(_ int, v Greet) time.Duration {
			if v.Name != "slow" {
				return time.Millisecond
			}
			mu.Lock()
			slowAt = time.Now()
			mu.Unlock()
			return 30 * time.Second
		})
		startWorker(t, w)
		waitWithin(t, time.Minute, "the slow job running for five leases", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return !slowAt.IsZero() && time.Since(slowAt) >= 15*time.Second
		})
		counts, err := q.Counts(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range counts {
			if c.Queue == "a" && c.Ready.N >= 50 {
				t.Fatalf("a has %d ready jobs while its slow job runs; want fewer than the 50 after it (some reserved ahead)", c.Ready.N)
			}
		}
		waitWithin(t, time.Minute, "every job done", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return events[queue.EventDone] == 151
		})
		mu.Lock()
		defer mu.Unlock()
		if events[queue.EventLeaseLost] != 0 || len(runs) != 151 {
			t.Fatalf("%d leases lost, %d jobs run; want none lost, 151 run", events[queue.EventLeaseLost], len(runs))
		}
		for id, n := range runs {
			if n != 1 {
				t.Fatalf("job %s ran %d times, want once", id, n)
			}
		}
	})
}
