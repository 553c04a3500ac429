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
	queue.Handle(w, func(ctx context.Context, _ Greet) error {
		j, _ := queue.JobFromContext(ctx)
		g.start(j.Queue)
		defer g.end(j.Queue)
		time.Sleep(d)
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
