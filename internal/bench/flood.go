package bench

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/balance"
)

// The flood mode's queues: one flooded before the worker starts, one
// receiving a trickle of jobs while it drains the other.
const (
	floodQueue   = "bench_flood"
	trickleQueue = "bench_trickle"
)

// floodJob is the flood mode's job: T is when a trickle job was
// dispatched (Unix nanoseconds), zero for a flood job.
type floodJob struct {
	T int64 `json:"t,omitempty"`
}

// JobName routes the flood mode's jobs to its handler.
func (floodJob) JobName() string { return "meridian_bench_flood" }

// floodVariant is one way of sharing the budget the flood mode measures.
type floodVariant struct {
	name string
	opts balance.Options
}

// floodVariants are the ways compared: strict order (the flooded queue
// first), Auto by wait time at its defaults (one handler moved per queue
// per 3 s cooldown), Auto moving up to half the budget per cooldown (how
// much of Auto's rate is its ramp from an even split), and weights 6:1.
func floodVariants(budget int) []floodVariant {
	return []floodVariant{
		{"strict", balance.Options{Strategy: balance.Strict}},
		{"auto", balance.Options{Strategy: balance.Auto, Max: budget, By: balance.WaitTime}},
		{"auto, shift " + strconv.Itoa(max(budget/2, 1)), balance.Options{Strategy: balance.Auto, Max: budget, By: balance.WaitTime, MaxShift: max(budget/2, 1)}},
		{"weights 6:1", balance.Options{Strategy: balance.Weighted, Weights: map[string]int{floodQueue: 6, trickleQueue: 1}}},
	}
}

// flood measures, for each variant, a worker of FloodBudget handlers over
// two queues: FloodJobs jobs of FloodWork each queued on the first before
// it starts, and one job every TrickleEvery dispatched to the second for
// FloodFor. Its figures are the trickle jobs' dispatch-to-start p50 and
// p99 and the flood queue's jobs/s over the window, per variant: over the
// part of the window until the flood drained, when it drained within it
// (else a variant that drains it early would seem no faster than the
// flood's size over the window).
func flood(ctx context.Context, q queue.Queue, o Options) ([]Figure, error) {
	var figs []Figure
	for _, v := range floodVariants(o.FloodBudget) {
		f, err := floodOnce(ctx, q, o, v)
		figs = append(figs, f...)
		if err != nil {
			return figs, fmt.Errorf("%s: %w", v.name, err)
		}
	}
	return figs, nil
}

func floodOnce(ctx context.Context, q queue.Queue, o Options, v floodVariant) ([]Figure, error) {
	o.progress("  flood, %s: %d jobs of %s queued, 1 job every %s for %s, %d handlers", v.name, o.FloodJobs, o.FloodWork, o.TrickleEvery, o.FloodFor, o.FloodBudget)
	for done := 0; done < o.FloodJobs; {
		n := min(o.ChunkSize, o.FloodJobs-done)
		if _, err := queue.DispatchMany(ctx, q, make([]floodJob, n), queue.OnQueue(floodQueue)); err != nil {
			return nil, fmt.Errorf("queueing the flood: %w", err)
		}
		done += n
	}
	// The worker's reservations are counted per queue: the evidence for
	// what a variant's throughput costs in round trips.
	wq, calls := count(q)
	var mu sync.Mutex
	var samples []time.Duration
	// ran counts every job run, the stall detector's measure of progress:
	// under strict order the trickle waits for the flood to drain.
	var flooded, trickled, ran, drainedAt atomic.Int64
	w := queue.NewWorker(wq).Slog(quiet).Concurrency(o.FloodBudget).Poll(o.Poll).ShutdownTimeout(10*time.Second).
		Queues(floodQueue, trickleQueue).Balance(v.opts)
	queue.Handle(w, func(ctx context.Context, j floodJob) error {
		if j.T != 0 {
			d := time.Duration(time.Now().UnixNano() - j.T)
			mu.Lock()
			samples = append(samples, d)
			mu.Unlock()
			trickled.Add(1)
			ran.Add(1)
			return nil
		}
		time.Sleep(o.FloodWork)
		ran.Add(1)
		if flooded.Add(1) == int64(o.FloodJobs) {
			drainedAt.Store(time.Now().UnixNano())
		}
		return nil
	})
	errc := make(chan error, 1)
	go func() { errc <- w.Run(context.Background()) }()

	start := time.Now()
	sent := 0
	var err error
	for at := start; time.Since(start) < o.FloodFor; at = at.Add(o.TrickleEvery) {
		if !sleepCtx(ctx, time.Until(at)) {
			break
		}
		if err = queue.Dispatch(ctx, q, floodJob{T: time.Now().UnixNano()}, queue.OnQueue(trickleQueue)); err != nil {
			err = fmt.Errorf("dispatching a trickle job: %w", err)
			break
		}
		sent++
	}
	el := time.Since(start)
	done := flooded.Load()
	if at := drainedAt.Load(); at != 0 {
		el = min(el, time.Duration(at-start.UnixNano()))
	}
	if err == nil {
		err = waitCountWhile(ctx, &trickled, int64(sent), &ran)
	}
	w.Stop()
	err = errors.Join(err, <-errc)
	if _, perr := q.Purge(context.WithoutCancel(ctx), ""); perr != nil {
		err = errors.Join(err, fmt.Errorf("emptying the queues: %w", perr))
	}
	if err != nil {
		return nil, err
	}
	o.progress("    reservations: %s", calls.ByQueue(floodQueue, trickleQueue))
	mu.Lock()
	ps := Percentiles(samples, 50, 99)
	mu.Unlock()
	return []Figure{
		{Name: fmt.Sprintf("flood, %s: trickle dispatch to start p50", v.name), Value: ms(ps[0]), Unit: Milliseconds},
		{Name: fmt.Sprintf("flood, %s: trickle dispatch to start p99", v.name), Value: ms(ps[1]), Unit: Milliseconds},
		{Name: fmt.Sprintf("flood, %s: flooded queue", v.name), Value: float64(done) / el.Seconds(), Unit: PerSecond},
	}, nil
}
