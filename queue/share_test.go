package queue_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
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

// TestWorkerBudgetSimple: a budget split evenly: while both queues have
// work each runs at most its half, and the whole never more than the
// budget.
func TestWorkerBudgetSimple(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		q := memqueue.New()
		fill(t, q, "a", 30)
		fill(t, q, "b", 30)
		g := newGauge()
		w := queue.NewWorker(q).Slog(quiet).Concurrency(3).Queues("a", "b").
			Balance(balance.Options{Strategy: balance.Simple, Max: 6})
		g.handle(w, time.Second)
		startWorker(t, w)
		waitWithin(t, time.Minute, "all 60 jobs", func() bool { return g.started() == 60 })
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.most["a"] != 3 || g.most["b"] != 3 || g.mostTotal != 6 {
			t.Fatalf("most running at once: a %d, b %d, all %d; want 3, 3, 6 (Max 6 split evenly)", g.most["a"], g.most["b"], g.mostTotal)
		}
	})
}

// TestWorkerBudgetLendsIdleHandlers: the sharing is work-conserving. A
// queue with nothing to do lends its allotment to a queue with work, the
// budget still never exceeded; once it has work again it takes its
// allotment back as the borrowed handlers' jobs finish, and from then on
// the borrower runs no more than its own allotment.
func TestWorkerBudgetLendsIdleHandlers(t *testing.T) {
	t.Parallel()
	for name, o := range map[string]balance.Options{
		"simple": {Strategy: balance.Simple, Max: 6},
		// A cooldown longer than the test: the allotments stay 3 and 3.
		"auto": {Strategy: balance.Auto, Max: 6, Cooldown: time.Hour},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				q := memqueue.New()
				fill(t, q, "a", 200)
				g := newGauge()
				w := queue.NewWorker(q).Slog(quiet).Poll(time.Hour).Queues("a", "b").Balance(o)
				g.handle(w, time.Second)
				startWorker(t, w)
				waitWithin(t, time.Minute, "a running 6 (its 3 and b's 3)", func() bool {
					g.mu.Lock()
					defer g.mu.Unlock()
					return g.running["a"] == 6
				})
				fill(t, q, "b", 30)
				pushed := time.Since(g.t0)
				waitWithin(t, time.Minute, "b's 30 jobs", func() bool {
					g.mu.Lock()
					defer g.mu.Unlock()
					return g.most["b"] == 3 && g.running["b"] == 0 && countOf(g.starts, "b") == 30
				})
				g.mu.Lock()
				defer g.mu.Unlock()
				if g.mostTotal > 6 {
					t.Fatalf("%d handlers ran at once, over the budget of 6", g.mostTotal)
				}
				// a's borrowed handlers run jobs of 1s: b has its 3 back
				// within one of them.
				lastB, back := 0, time.Duration(0)
				for i, qn := range g.starts {
					if qn == "b" {
						lastB = i
						if g.runningAt[i] == 3 && back == 0 {
							back = g.startAt[i]
						}
					}
				}
				if d := back - pushed; d > time.Second {
					t.Errorf("b ran its allotment of 3 %s after its push; want within the 1s of a borrowed handler's job", d)
				}
				for i, qn := range g.starts[:lastB] {
					if qn == "a" && g.startAt[i] >= back && g.runningAt[i] > 3 {
						t.Fatalf("at %s, b having work, a ran %d at once; want at most its allotment of 3", g.startAt[i], g.runningAt[i])
					}
				}
			})
		})
	}
}

// countOf returns how many of starts are qn.
func countOf(starts []string, qn string) int {
	n := 0
	for _, s := range starts {
		if s == qn {
			n++
		}
	}
	return n
}

// rebalances records the allotments Auto logs on each rebalance.
type rebalances struct {
	mu    sync.Mutex
	steps [][2][]int // from, to
}

func (r *rebalances) Enabled(context.Context, slog.Level) bool { return true }
func (r *rebalances) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *rebalances) WithGroup(string) slog.Handler            { return r }
func (r *rebalances) Handle(_ context.Context, rec slog.Record) error {
	if rec.Message != "queue: handlers rebalanced" {
		return nil
	}
	var step [2][]int
	rec.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "from":
			step[0], _ = a.Value.Any().([]int)
		case "to":
			step[1], _ = a.Value.Any().([]int)
		}
		return true
	})
	r.mu.Lock()
	defer r.mu.Unlock()
	r.steps = append(r.steps, step)
	return nil
}

func (r *rebalances) last() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.steps) == 0 {
		return nil
	}
	return r.steps[len(r.steps)-1][1]
}

// TestWorkerBudgetAutoShiftsBounded: under Auto a flooded queue's
// allotment grows from an idle one's by at most MaxShift per Cooldown,
// down to the idle queue's Min, the allotments never summing over the
// budget, and the worker never runs more than the budget; when the other
// queue fills, handlers move back. (Meanwhile the flooded queue borrows
// what the idle one does not use: TestWorkerBudgetLendsIdleHandlers.)
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
				log := &rebalances{}
				w := queue.NewWorker(q).Slog(slog.New(log)).Queues("a", "b").
					Balance(balance.Options{Strategy: balance.Auto, Max: 10, Min: 1, By: by, MaxShift: 1, Cooldown: cooldown})
				g.handle(w, time.Second)
				startWorker(t, w)
				waitWithin(t, time.Minute, "a allotted 9", func() bool { return slices.Equal(log.last(), []int{9, 1}) })
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
				log.mu.Lock()
				defer log.mu.Unlock()
				prev := []int{5, 5}
				for _, s := range log.steps {
					from, to := s[0], s[1]
					if !slices.Equal(from, prev) {
						t.Fatalf("a rebalance from %v, after one to %v", from, prev)
					}
					if to[0]+to[1] > 10 || to[0] < 1 || to[1] < 1 || abs(to[0]-from[0]) > 1 || abs(to[1]-from[1]) > 1 {
						t.Fatalf("rebalanced from %v to %v; want each moved at most 1 (MaxShift), each at least 1 (Min), at most 10 in all", from, to)
					}
					prev = to
				}
				if len(log.steps) < 4 || log.steps[3][1][0] != 9 {
					t.Fatalf("allotments %v; want a from 5 to 9 in four steps, one per cooldown", log.steps)
				}
				if prev[1] < 2 {
					t.Fatalf("allotments end at %v; want b's grown back once it filled", prev)
				}
			})
		})
	}
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
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
	return jobs, c.count(queues, jobs, err)
}

func (c *reserveCounter) ReserveStarting(ctx context.Context, queues []string, n int, lease time.Duration) ([]queue.Job, error) {
	jobs, err := c.Queue.ReserveStarting(ctx, queues, n, lease)
	return jobs, c.count(queues, jobs, err)
}

// count counts a reservation of queues that gave jobs, and returns err.
func (c *reserveCounter) count(queues []string, jobs []queue.Job, err error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, qn := range queues {
		c.calls[qn]++
		if len(jobs) == 0 {
			c.empty[qn]++
		}
	}
	return err
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
		if g.mostTotal > 16 {
			t.Fatalf("%d handlers ran at once, over the budget of 16", g.mostTotal)
		}
		// While both queues have work (until the last 16 starts of the
		// first to drain), each runs at most its half; after, the other
		// borrows its idle handlers.
		last := map[string]int{}
		for i, qn := range g.starts {
			last[qn] = i
		}
		for i, qn := range g.starts[:min(last["a"], last["b"])-16] {
			if g.runningAt[i] > 8 {
				t.Fatalf("start %d: %s ran %d at once, both queues having work; want at most 8 (Max 16 split evenly)", i, qn, g.runningAt[i])
			}
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

// slowReserve is a reserveCounter whose reservations take d each, as a
// store's round trip does.
type slowReserve struct {
	*reserveCounter
	d time.Duration
}

func (s *slowReserve) ReserveUnstarted(ctx context.Context, queues []string, n int, lease time.Duration) ([]queue.Job, error) {
	if err := s.wait(ctx); err != nil {
		return nil, err
	}
	return s.reserveCounter.ReserveUnstarted(ctx, queues, n, lease)
}

func (s *slowReserve) ReserveStarting(ctx context.Context, queues []string, n int, lease time.Duration) ([]queue.Job, error) {
	if err := s.wait(ctx); err != nil {
		return nil, err
	}
	return s.reserveCounter.ReserveStarting(ctx, queues, n, lease)
}

// wait is the round trip's delay, or ctx's error.
func (s *slowReserve) wait(ctx context.Context) error {
	select {
	case <-time.After(s.d):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// TestWorkerReservesManyPerRoundTrip: when the reservations are slower
// than the jobs (10ms a round trip, jobs of 2ms on 20 handlers), a flooded
// queue is reserved ahead of the handlers whatever the strategy, many
// more jobs per round trip than the handlers, rather than only for the
// handlers idle at each turn (which held strict order and weights to 20
// jobs per round trip at most, 10 in practice: 1,000 jobs/s here).
func TestWorkerReservesManyPerRoundTrip(t *testing.T) {
	t.Parallel()
	for name, o := range map[string]balance.Options{
		"strict":   {Strategy: balance.Strict},
		"weighted": {Strategy: balance.Weighted, Weights: map[string]int{"a": 6, "b": 1}},
		"simple":   {Strategy: balance.Simple, Max: 20},
		"auto":     {Strategy: balance.Auto, Max: 20},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				q := &slowReserve{reserveCounter: newReserveCounter(), d: 10 * time.Millisecond}
				fill(t, q, "a", 4000)
				g := newGauge()
				w := queue.NewWorker(q).Slog(quiet).Concurrency(20).Poll(50*time.Millisecond).Queues("a", "b").Balance(o)
				g.handle(w, 2*time.Millisecond)
				startWorker(t, w)
				waitWithin(t, time.Minute, "a's 4000 jobs", func() bool { return g.started() == 4000 })
				calls, _ := q.counts("a")
				if calls > 4000/40 {
					t.Fatalf("a's 4000 jobs took %d reservations; want at most %d (at least 40 jobs per round trip, twice the handlers)", calls, 4000/40)
				}
			})
		})
	}
}

// TestWorkerWeightedWokenEmptyQueueCostsNoSecondTrip: under weights a
// queue woken by the poll with nothing ready hands its share to the busy
// queue in the same round trip: the busy queue is asked once per turn,
// not a second time for the few jobs the empty one lacked. With the poll
// as short as a reservation, the empty queue is awake at nearly every
// turn, so the busy queue's reservations are at most one per turn.
func TestWorkerWeightedWokenEmptyQueueCostsNoSecondTrip(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		q := &slowReserve{reserveCounter: newReserveCounter(), d: 10 * time.Millisecond}
		fill(t, q, "a", 4000)
		g := newGauge()
		w := queue.NewWorker(q).Slog(quiet).Concurrency(20).Poll(10 * time.Millisecond).
			Balance(balance.Options{Strategy: balance.Weighted, Weights: map[string]int{"a": 6, "b": 1}})
		g.handle(w, 2*time.Millisecond)
		startWorker(t, w)
		waitWithin(t, time.Minute, "a's 4000 jobs", func() bool { return g.started() == 4000 })
		a, _ := q.counts("a")
		b, bEmpty := q.counts("b")
		// At this pace a reservation carries about 150 jobs (50ms of
		// work at 3,000 jobs/s): some 27 for a's jobs, with a few more
		// while the pace builds up, where a second trip per wake-up of b
		// added one each (23 against 34 here, b woken 12 times).
		if bEmpty < 5 || a > 4000/150+b/2 {
			t.Fatalf("a reserved %d times for 4000 jobs while b came back empty %d times of %d; want at most %d (no second trip per wake-up of b)", a, bEmpty, b, 4000/150+b/2)
		}
	})
}

// claimKinds is a slowReserve that counts the jobs reserved with their
// attempts counted in the claim and those reserved ahead, uncounted.
type claimKinds struct {
	*slowReserve
	starting, unstarted atomic.Int64
}

func (c *claimKinds) ReserveStarting(ctx context.Context, queues []string, n int, lease time.Duration) ([]queue.Job, error) {
	jobs, err := c.slowReserve.ReserveStarting(ctx, queues, n, lease)
	c.starting.Add(int64(len(jobs)))
	return jobs, err
}

func (c *claimKinds) ReserveUnstarted(ctx context.Context, queues []string, n int, lease time.Duration) ([]queue.Job, error) {
	jobs, err := c.slowReserve.ReserveUnstarted(ctx, queues, n, lease)
	c.unstarted.Add(int64(len(jobs)))
	return jobs, err
}

// TestWorkerPrefetchesOnlyWhileHandlersAreBusy: with 1,000 handlers and
// reservations of 10ms, jobs of 1ms leave most handlers idle (about 100
// busy at the 100,000 jobs/s the reservations allow): every job is
// reserved for an idle handler, its attempt counted by its claim, none
// ahead to wait for a start mark. Jobs of 100ms keep all the handlers busy
// (10,000 jobs/s): most are reserved ahead of them.
func TestWorkerPrefetchesOnlyWhileHandlersAreBusy(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		job       time.Duration
		ahead     bool // most jobs reserved ahead
		handlers  int
		jobsCount int
	}{
		{job: time.Millisecond, ahead: false, handlers: 1000, jobsCount: 10000},
		{job: 100 * time.Millisecond, ahead: true, handlers: 1000, jobsCount: 10000},
	} {
		t.Run(tc.job.String(), func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				q := &claimKinds{slowReserve: &slowReserve{reserveCounter: newReserveCounter(), d: 10 * time.Millisecond}}
				fill(t, q, queue.DefaultQueue, tc.jobsCount)
				g := newGauge()
				w := queue.NewWorker(q).Slog(quiet).Concurrency(tc.handlers).Poll(50 * time.Millisecond)
				g.handle(w, tc.job)
				stop := startWorker(t, w)
				waitWithin(t, time.Minute, "the jobs", func() bool { return g.started() == tc.jobsCount })
				stop()
				s, u := q.starting.Load(), q.unstarted.Load()
				if tc.ahead && u < s {
					t.Fatalf("jobs of %s on %d busy handlers: %d reserved for idle handlers, %d ahead; want most ahead", tc.job, tc.handlers, s, u)
				}
				if !tc.ahead && u != 0 {
					t.Fatalf("jobs of %s on %d mostly idle handlers: %d reserved for idle handlers, %d ahead; want none ahead", tc.job, tc.handlers, s, u)
				}
			})
		})
	}
}

// TestWorkerPrefetchesBesideLongJobs: jobs still running count as busy
// handlers before they return. With 900 of 1,000 handlers held by jobs
// that run until shutdown, the 10,000 jobs of 1ms that the other 100 work
// are mostly reserved ahead of them, as for any busy handlers.
func TestWorkerPrefetchesBesideLongJobs(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		q := &claimKinds{slowReserve: &slowReserve{reserveCounter: newReserveCounter(), d: 10 * time.Millisecond}}
		fill(t, q, queue.DefaultQueue, 900)
		for i := range 10000 {
			if err := queue.Dispatch(t.Context(), q, Greet{Name: fmt.Sprint("fast", i)}); err != nil {
				t.Fatal(err)
			}
		}
		var fast atomic.Int64
		w := queue.NewWorker(q).Slog(quiet).Concurrency(1000).Poll(50 * time.Millisecond).ShutdownTimeout(time.Second)
		queue.Handle(w, func(ctx context.Context, v Greet) error {
			if !strings.HasPrefix(v.Name, "fast") {
				<-ctx.Done()
				return ctx.Err()
			}
			time.Sleep(time.Millisecond)
			fast.Add(1)
			return nil
		})
		stop := startWorker(t, w)
		waitWithin(t, time.Minute, "the fast jobs", func() bool { return fast.Load() == 10000 })
		stop()
		if s, u := q.starting.Load(), q.unstarted.Load(); u < 9000 {
			t.Fatalf("fast jobs beside 900 long ones on 1000 handlers: %d reserved for idle handlers, %d ahead; want at least 9000 ahead", s, u)
		}
	})
}

// TestWorkerBudgetCountsFreeHandlersInTheirClaim: under a budget the jobs
// a queue's free handlers take at once are reserved with their attempts
// counted in the claim, as without one; only the jobs reserved ahead wait
// for a start mark. With reservations of 10ms, jobs of 1ms on a budget of
// 1,000 leave most handlers free (about 100 busy): none is reserved ahead.
// Jobs of 100ms keep the handlers busy: most are reserved ahead.
func TestWorkerBudgetCountsFreeHandlersInTheirClaim(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		strategy balance.Strategy
		job      time.Duration
		ahead    bool // most jobs reserved ahead
	}{
		{balance.Simple, time.Millisecond, false},
		{balance.Auto, time.Millisecond, false},
		{balance.Simple, 100 * time.Millisecond, true},
	} {
		t.Run(fmt.Sprint(tc.strategy, " ", tc.job), func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				q := &claimKinds{slowReserve: &slowReserve{reserveCounter: newReserveCounter(), d: 10 * time.Millisecond}}
				fill(t, q, "a", 10000)
				g := newGauge()
				w := queue.NewWorker(q).Slog(quiet).Poll(50 * time.Millisecond).Queues("a").
					Balance(balance.Options{Strategy: tc.strategy, Max: 1000})
				g.handle(w, tc.job)
				stop := startWorker(t, w)
				waitWithin(t, time.Minute, "the jobs", func() bool { return g.started() == 10000 })
				stop()
				s, u := q.starting.Load(), q.unstarted.Load()
				if s+u != 10000 {
					t.Fatalf("%d jobs reserved for free handlers and %d ahead; want 10000 in all", s, u)
				}
				if tc.ahead && u < s {
					t.Fatalf("jobs of %s on a busy budget: %d reserved for free handlers, %d ahead; want most ahead", tc.job, s, u)
				}
				if !tc.ahead && u != 0 {
					t.Fatalf("jobs of %s on a budget mostly free: %d reserved for free handlers, %d ahead; want none ahead", tc.job, s, u)
				}
			})
		})
	}
}
