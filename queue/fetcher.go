package queue

import (
	"context"
	"log/slog"
	"math"
	"sync/atomic"
	"time"

	"github.com/meridianjobs/meridian/queue/driver"
	"github.com/meridianjobs/meridian/queue/internal/retry"
)

// prefetchHorizon is how much work, in time at the recent completion rate,
// the fetcher reserves ahead of free handlers.
const prefetchHorizon = 50 * time.Millisecond

// fetcher is the part of a run that reserves jobs and hands them to the
// executors (River's producer). It keeps every handler busy and, when jobs
// finish quickly, a short buffer beyond them: up to the jobs the worker
// completes in prefetchHorizon at its recent rate, capped by Prefetch. Slow
// jobs therefore get no prefetch (no job waits long leased to a busy
// process), while fast ones are reserved hundreds per round trip. The
// buffer is kept only while at least half the handlers are
// running jobs: buffered jobs each cost a start mark, which pays only when
// handlers, not reservations, are what the run waits for.
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

	out   chan<- *held // reserved jobs' held entries, to the executors
	freed *freed       // the jobs the executors finished
	pace  pacer
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
	f.want.Store(target)
	defer f.want.Store(math.MaxInt64)
	if f.n.Load() >= target {
		return true
	}
	select {
	case <-f.wake:
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
	outstanding := 0 // reserved and not finished: buffered or running
	var seen int64   // finished jobs counted in outstanding
	bo := retry.Backoff{Initial: 50 * time.Millisecond, Max: max(f.poll, 5*time.Second)}
	fails := streak{log: f.log, doing: "reserving jobs", level: slog.LevelError}
	for {
		if n := f.freed.since(&seen); n > 0 {
			outstanding -= n
			f.pace.done(n)
		}
		if stopCtx.Err() != nil {
			return
		}
		ahead := f.pace.ahead(time.Now())
		if 2*f.leases.runningHandlers() < f.concurrency {
			// Fewer than half the handlers run a job: the reservations,
			// not the handlers, limit the run, and jobs reserved beyond
			// the idle handlers would only wait for a start mark each
			// (a write of its own, the store's largest cost per job when
			// handlers are fast). Reserve for the idle
			// handlers only; the next reservation follows at once.
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
			f.out <- &hs[i]
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
		case len(jobs) == 0:
			// Nothing ready: wait for a wake-up or the poll, whether or not
			// handlers are still busy, rather than asking again at once.
			fails.ok()
			bo.Reset()
			f.idle(stopCtx)
		default:
			fails.ok()
			bo.Reset()
		}
	}
}

// reserve takes up to n jobs, from the worker's queues in priority order.
// With a Starter every job is reserved without counting an attempt, and
// the executor counts it (a start mark) just before its handler runs: an
// attempt counts only when its handler starts, so jobs that were leased
// beside one that crashed the process keep their attempts.
//
// unstarted[i] reports whether the job out[i] was reserved so.
func (f *fetcher) reserve(n, _ int) (out []*Job, unstarted []bool, err error) {
	for _, qn := range f.queues {
		if n <= 0 {
			break
		}
		var jobs []Job
		jobs, err = f.q.ReserveUnstarted(f.ctx, []string{qn}, n, f.lease)
		for i := range jobs {
			out = append(out, &jobs[i])
			unstarted = append(unstarted, true)
		}
		n -= len(jobs)
		if err != nil {
			return out, unstarted, err
		}
	}
	return out, unstarted, nil
}

// idle waits for work: woken by the queue when it can, else after the poll.
func (f *fetcher) idle(stopCtx context.Context) {
	if f.waiter == nil {
		_ = retry.Sleep(stopCtx, f.poll)
		return
	}
	err := f.waiter.Wait(stopCtx, f.queues, f.poll)
	if err != nil && stopCtx.Err() == nil {
		if f.halt.check("waiting for jobs", err) {
			return
		}
		f.log.Warn("queue: waiting for jobs", "err", err)
		_ = retry.Sleep(stopCtx, f.poll)
	}
}

// pacer measures the rate at which a run completes jobs and turns it into
// how many jobs to reserve ahead of the handlers.
type pacer struct {
	horizon time.Duration // how much work, in time, to hold ahead
	max     int           // the most jobs to hold ahead (Prefetch)

	rate      float64 // completions per second, smoothed
	completed int     // since sampled
	sampled   time.Time
}

// done counts n completed jobs.
func (p *pacer) done(n int) { p.completed += n }

// ahead returns how many jobs to hold ahead at now, sampling the rate at
// most every 10ms.
func (p *pacer) ahead(now time.Time) int {
	if p.sampled.IsZero() {
		p.sampled = now
	}
	if el := now.Sub(p.sampled); el >= 10*time.Millisecond {
		p.rate = (p.rate + float64(p.completed)/el.Seconds()) / 2
		p.completed, p.sampled = 0, now
	}
	return min(p.max, int(p.rate*p.horizon.Seconds()))
}
