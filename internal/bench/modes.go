package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// job is the benchmark's job: T is when it was dispatched (Unix
// nanoseconds) in the latency mode and zero elsewhere, so the payload stays
// as small as a real no-op job's.
type job struct {
	T int64 `json:"t,omitempty"`
}

// JobName routes bench jobs to the bench handler.
func (job) JobName() string { return "meridian_bench" }

// stallAfter is how long a mode waits without any progress before it
// gives up: a stuck driver fails the run instead of hanging it.
const stallAfter = 30 * time.Second

// waitCount waits until n reaches want, failing when ctx is done or when
// n stays still for stallAfter.
func waitCount(ctx context.Context, n *atomic.Int64, want int64) error {
	return waitCountWhile(ctx, n, want, n)
}

// waitCountWhile is waitCount whose stall detector watches progress
// rather than n: it gives up only when progress stands still for
// stallAfter.
func waitCountWhile(ctx context.Context, n *atomic.Int64, want int64, progress *atomic.Int64) error {
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	last, lastMove := progress.Load(), time.Now()
	for {
		cur := n.Load()
		if cur >= want {
			return nil
		}
		if p := progress.Load(); p != last {
			last, lastMove = p, time.Now()
		} else if time.Since(lastMove) > stallAfter {
			return fmt.Errorf("stalled at %d of %d jobs: no progress for %s", cur, want, stallAfter)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// fill queues n jobs with DispatchMany in chunks of o.ChunkSize from
// o.Producers goroutines.
func fill(ctx context.Context, e Engine, n int, o Options) error {
	var next atomic.Int64
	chunks := int64((n + o.ChunkSize - 1) / o.ChunkSize)
	var wg sync.WaitGroup
	errs := make([]error, o.Producers)
	for g := range o.Producers {
		wg.Go(func() {
			for {
				c := next.Add(1) - 1
				if c >= chunks || ctx.Err() != nil {
					return
				}
				size := min(o.ChunkSize, n-int(c)*o.ChunkSize)
				if _, err := e.DispatchMany(ctx, size); err != nil {
					errs[g] = fmt.Errorf("queueing jobs: %w", err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return ctx.Err()
}

// burnDown queues o.Jobs jobs, then measures how fast the workers empty the
// queue, and the client's (and, where the target can read it, the
// database server's) CPU time per 1,000 jobs in each phase.
func burnDown(ctx context.Context, e Engine, o Options) ([]Figure, error) {
	return burnDownAs(ctx, e, o, "burn-down")
}

// failOnce is burnDown with every job failing its first attempt and
// succeeding in its retry, due at once: each job's two outcomes, a retry
// and a done, reach the store. Its figures count jobs, not attempts.
func failOnce(ctx context.Context, e Engine, o Options) ([]Figure, error) {
	o.failFirst = true
	return burnDownAs(ctx, e, o, "fail-once burn-down")
}

// burnDownAs is burnDown with its figures named by mode.
func burnDownAs(ctx context.Context, e Engine, o Options, mode string) ([]Figure, error) {
	o.progress("  burn-down: queueing %d jobs (DispatchMany x%d, %d goroutines)", o.Jobs, o.ChunkSize, o.Producers)
	heapBefore := o.heapInUse()
	var storeBefore uint64
	if o.ReadStoreMemory != nil {
		var err error
		if storeBefore, err = o.ReadStoreMemory(ctx); err != nil {
			return nil, err
		}
	}
	cpu := o.startCPU()
	start := time.Now()
	if err := fill(ctx, e, o.Jobs, o); err != nil {
		return nil, err
	}
	fillRate := float64(o.Jobs) / time.Since(start).Seconds()
	figs := []Figure{{Name: fmt.Sprintf("%s: queue %d (DispatchMany x%d)", mode, o.Jobs, o.ChunkSize), Value: fillRate, Unit: PerSecond}}
	figs = append(figs, cpu.figures(fmt.Sprintf("%s: queue %d", mode, o.Jobs), o.Jobs)...)
	if o.heldPerJob {
		held := float64(o.heapInUse()) - float64(heapBefore)
		figs = append(figs, Figure{Name: fmt.Sprintf("%s: queue %d: heap held per queued job", mode, o.Jobs), Value: held / float64(o.Jobs), Unit: Bytes})
	}
	if o.ReadStoreMemory != nil {
		after, err := o.ReadStoreMemory(ctx)
		if err != nil {
			return figs, err
		}
		figs = append(figs, Figure{Name: fmt.Sprintf("%s: queue %d: store memory per queued job", mode, o.Jobs), Value: (float64(after) - float64(storeBefore)) / float64(o.Jobs), Unit: Bytes})
	}
	if o.analyze != nil {
		o.progress("  burn-down: refreshing the table's statistics (ANALYZE)")
		if err := o.analyze(ctx); err != nil {
			return figs, fmt.Errorf("analyzing the jobs table: %w", err)
		}
	}

	o.progress("  burn-down: working %d jobs (%d worker(s) x %d)", o.Jobs, o.Workers, o.Concurrency)
	var handled atomic.Int64
	cpu = o.startCPU()
	start = time.Now()
	stop, err := e.StartWorkers(o, o.working(&handled))
	if err != nil {
		return figs, fmt.Errorf("starting the workers: %w", err)
	}
	// In the fail-once mode handle counts attempts, two per job: a retry
	// is due after every first attempt already queued, so the successes
	// come only at the end, and the attempts are the progress.
	want := int64(o.Jobs)
	if o.failFirst {
		want *= 2
	}
	werr := waitCount(ctx, &handled, want)
	if err := errors.Join(werr, stop()); err != nil {
		return figs, err
	}
	rate := float64(o.Jobs) / time.Since(start).Seconds()
	figs = append(figs, Figure{Name: fmt.Sprintf("%s: work %d (end to end)", mode, o.Jobs), Value: rate, Unit: PerSecond})
	figs = append(figs, cpu.figures(fmt.Sprintf("%s: work %d", mode, o.Jobs), o.Jobs)...)
	return figs, nil
}

// working returns the burn-down's and continuous mode's handle function:
// it runs for o.JobTime and counts the job in handled.
func (o Options) working(handled *atomic.Int64) func(int64) {
	if o.JobTime <= 0 {
		return func(int64) { handled.Add(1) }
	}
	return func(int64) {
		time.Sleep(o.JobTime)
		handled.Add(1)
	}
}

// heapInUse returns the heap in use after a GC, when the burn-down
// reports the heap held per queued job (a GC takes milliseconds on a
// large heap, so only then).
func (o Options) heapInUse() uint64 {
	if !o.heldPerJob {
		return 0
	}
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// continuous runs producers and workers together for o.Duration and
// measures the jobs handled per second after the warm-up, and the CPU
// per 1,000 of them.
func continuous(ctx context.Context, e Engine, o Options) ([]Figure, error) {
	o.progress("  continuous: %d producer(s) x%d, %d worker(s) x %d, %s", o.Producers, o.BatchSize, o.Workers, o.Concurrency, o.Duration)
	var handled, dispatched atomic.Int64
	stop, err := e.StartWorkers(o, o.working(&handled))
	if err != nil {
		return nil, fmt.Errorf("starting the workers: %w", err)
	}

	pctx, stopProducers := context.WithCancel(ctx)
	defer stopProducers()
	var wg sync.WaitGroup
	errs := make([]error, o.Producers)
	for g := range o.Producers {
		wg.Go(func() {
			for pctx.Err() == nil {
				if dispatched.Load()-handled.Load() > int64(o.MaxBacklog) {
					time.Sleep(time.Millisecond)
					continue
				}
				n, err := e.DispatchMany(pctx, o.BatchSize)
				if err != nil {
					if pctx.Err() == nil {
						errs[g] = fmt.Errorf("dispatching: %w", err)
					}
					return
				}
				dispatched.Add(int64(n))
			}
		})
	}

	// The window opens after the warm-up and once a job has been handled,
	// and closes after its length and once a job has been handled in it:
	// on a loaded machine a short window could otherwise count nothing.
	sleepCtx(ctx, o.Warmup)
	waitHandled(ctx, &handled, 0)
	h0, t0 := handled.Load(), time.Now()
	cpu := o.startCPU()
	sleepCtx(ctx, o.Duration-o.Warmup)
	waitHandled(ctx, &handled, h0)
	h1, el := handled.Load(), time.Since(t0)
	// Per job handled in the window, which queued about as many (the
	// producers pause above the backlog): the cost of one job pushed and
	// worked while both run.
	cpuFigs := cpu.figures(fmt.Sprintf("continuous x%d", o.BatchSize), int(h1-h0))
	stopProducers()
	wg.Wait()
	if err := errors.Join(append(errs, stop(), ctx.Err())...); err != nil {
		return nil, err
	}
	if h1 == h0 {
		return nil, fmt.Errorf("no job was handled in %s", el)
	}
	return append([]Figure{{
		Name:  fmt.Sprintf("continuous: work while dispatching x%d", o.BatchSize),
		Value: float64(h1-h0) / el.Seconds(), Unit: PerSecond,
	}}, cpuFigs...), nil
}

// dispatchOne measures Dispatch of one job at a time from o.Dispatchers
// goroutines, with no workers.
func dispatchOne(ctx context.Context, e Engine, o Options) ([]Figure, error) {
	o.progress("  dispatch: Dispatch from %d goroutines, %s", o.Dispatchers, o.Duration)
	n, el, err := forDuration(ctx, o.Dispatchers, o.Duration, func(ctx context.Context) (int, error) {
		return 1, e.Dispatch(ctx, 0)
	})
	if err != nil {
		return nil, err
	}
	return []Figure{{Name: fmt.Sprintf("dispatch: Dispatch, %d goroutines", o.Dispatchers), Value: float64(n) / el.Seconds(), Unit: PerSecond}}, nil
}

// dispatchMany measures DispatchMany of o.ChunkSize jobs per call from
// o.Producers goroutines, with no workers, and the mean time of one call.
func dispatchMany(ctx context.Context, e Engine, o Options) ([]Figure, error) {
	o.progress("  dispatch: DispatchMany x%d from %d goroutines, %s", o.ChunkSize, o.Producers, o.Duration)
	var calls atomic.Int64
	var busy atomic.Int64 // summed call time, nanoseconds
	n, el, err := forDuration(ctx, o.Producers, o.Duration, func(ctx context.Context) (int, error) {
		start := time.Now()
		n, err := e.DispatchMany(ctx, o.ChunkSize)
		busy.Add(int64(time.Since(start)))
		calls.Add(1)
		return n, err
	})
	if err != nil {
		return nil, err
	}
	figs := []Figure{{Name: fmt.Sprintf("dispatch: DispatchMany x%d, %d goroutines", o.ChunkSize, o.Producers), Value: float64(n) / el.Seconds(), Unit: PerSecond}}
	if c := calls.Load(); c > 0 {
		mean := time.Duration(busy.Load() / c)
		figs = append(figs, Figure{Name: fmt.Sprintf("dispatch: one DispatchMany x%d call, mean", o.ChunkSize), Value: ms(mean), Unit: Milliseconds})
	}
	return figs, nil
}

// forDuration calls fn from g goroutines until d has passed and returns
// the summed counts fn reported and the elapsed time.
func forDuration(ctx context.Context, g int, d time.Duration, fn func(ctx context.Context) (int, error)) (int64, time.Duration, error) {
	var total atomic.Int64
	deadline := time.Now().Add(d)
	start := time.Now()
	var wg sync.WaitGroup
	errs := make([]error, g)
	for i := range g {
		wg.Go(func() {
			for ctx.Err() == nil && time.Now().Before(deadline) {
				n, err := fn(ctx)
				if err != nil {
					errs[i] = fmt.Errorf("dispatching: %w", err)
					return
				}
				total.Add(int64(n))
			}
		})
	}
	wg.Wait()
	el := time.Since(start)
	if err := errors.Join(append(errs, ctx.Err())...); err != nil {
		return 0, el, err
	}
	return total.Load(), el, nil
}

// latency dispatches single jobs at o.Rate per second for
// o.LatencyDuration while the workers run, and reports percentiles of the
// time from each job's tick to its handler's start. A tick is handed to
// the first free dispatcher: when all are busy it waits, and that wait
// counts, as a request waiting for a connection would (timing from the
// Dispatch call alone would leave out the jobs' queueing whenever the
// dispatchers fall behind: coordinated omission).
func latency(ctx context.Context, e Engine, o Options) ([]Figure, error) {
	total := int(float64(o.Rate) * o.LatencyDuration.Seconds())
	if total < 1 {
		total = 1
	}
	o.progress("  latency: %d jobs at %d/s, %d worker(s) x %d, poll %s", total, o.Rate, o.Workers, o.Concurrency, o.Poll)
	var mu sync.Mutex
	samples := make([]time.Duration, 0, total)
	var handled atomic.Int64
	stop, err := e.StartWorkers(o, func(t int64) {
		d := time.Duration(time.Now().UnixNano() - t)
		mu.Lock()
		samples = append(samples, d)
		mu.Unlock()
		handled.Add(1)
	})
	if err != nil {
		return nil, fmt.Errorf("starting the workers: %w", err)
	}
	// Let the workers reach their idle wait before the first job.
	sleepCtx(ctx, 200*time.Millisecond)

	ticks := make(chan int64, total) // each tick's time, Unix ns
	var wg sync.WaitGroup
	errs := make([]error, o.Dispatchers)
	calls := make([][]time.Duration, o.Dispatchers) // each Dispatch call's own time
	for g := range o.Dispatchers {
		wg.Go(func() {
			for tick := range ticks {
				start := time.Now()
				if err := e.Dispatch(ctx, tick); err != nil {
					errs[g] = fmt.Errorf("dispatching: %w", err)
					return
				}
				calls[g] = append(calls[g], time.Since(start))
			}
		})
	}
	interval := time.Second / time.Duration(o.Rate)
	// CPU from the first dispatch until the last job has started: at a
	// steady low rate a job's cost is its round trips, unshared, and on a
	// busy machine this figure moves far less than the latencies.
	cpu := o.startCPU()
	start := time.Now()
	for i := range total {
		if d := time.Until(start.Add(time.Duration(i) * interval)); d > 0 {
			if !sleepCtx(ctx, d) {
				break
			}
		}
		ticks <- time.Now().UnixNano()
	}
	close(ticks)
	wg.Wait()
	el := time.Since(start)
	err = errors.Join(errs...)
	if err == nil {
		err = waitCount(ctx, &handled, int64(total))
	}
	cpuFigs := cpu.figures(fmt.Sprintf("latency @%d/s", o.Rate), total)
	if err = errors.Join(err, stop()); err != nil {
		return nil, err
	}
	if achieved := float64(total) / el.Seconds(); achieved < 0.9*float64(o.Rate) {
		o.progress("  latency: dispatch reached only %.0f jobs/s of %d from %d dispatchers: the percentiles count each job's wait for a free one (--dispatchers sends more at once)", achieved, o.Rate, o.Dispatchers)
	}
	mu.Lock()
	defer mu.Unlock()
	ps := Percentiles(samples, 50, 95, 99, 100)
	var figs []Figure
	for i, p := range []int{50, 95, 99} {
		figs = append(figs, Figure{Name: fmt.Sprintf("latency p%d, dispatch to start @%d/s", p, o.Rate), Value: ms(ps[i]), Unit: Milliseconds})
	}
	figs = append(figs, Figure{Name: fmt.Sprintf("latency max, dispatch to start @%d/s", o.Rate), Value: ms(ps[3]), Unit: Milliseconds})
	// The Dispatch call's own time is part of the latency: the job cannot
	// start before it is stored. Reported apart, it shows how much of the
	// latency is the push and how much the wake-up and reservation.
	cs := Percentiles(slices.Concat(calls...), 50, 99)
	figs = append(figs,
		Figure{Name: fmt.Sprintf("latency: the Dispatch call itself, p50 @%d/s", o.Rate), Value: ms(cs[0]), Unit: Milliseconds},
		Figure{Name: fmt.Sprintf("latency: the Dispatch call itself, p99 @%d/s", o.Rate), Value: ms(cs[1]), Unit: Milliseconds})
	return append(figs, cpuFigs...), nil
}

// Percentiles returns the nearest-rank percentiles ps (each in (0, 100])
// of samples, which it does not modify. With no samples every result is 0.
func Percentiles(samples []time.Duration, ps ...float64) []time.Duration {
	out := make([]time.Duration, len(ps))
	if len(samples) == 0 {
		return out
	}
	s := slices.Clone(samples)
	slices.Sort(s)
	for i, p := range ps {
		rank := int(math.Ceil(p / 100 * float64(len(s))))
		out[i] = s[min(max(rank, 1), len(s))-1]
	}
	return out
}

// ms converts d to fractional milliseconds.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// sleepCtx sleeps for d and reports whether ctx is still live.
// waitHandled waits until more than after jobs were handled or ctx ends,
// checking every millisecond.
func waitHandled(ctx context.Context, handled *atomic.Int64, after int64) {
	for handled.Load() <= after && sleepCtx(ctx, time.Millisecond) {
	}
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
