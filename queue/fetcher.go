package queue

import (
	"context"
	"log/slog"
	"time"

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
// process), while fast ones are reserved hundreds per round trip. With a
// Starter the buffer is kept only while at least half the handlers are
// running jobs: buffered jobs each cost a start mark, which pays only when
// handlers, not reservations, are what the run waits for.
type fetcher struct {
	q           Queue
	starter     Starter // nil: every reservation counts its attempt
	waiter      Waiter  // nil: poll
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

	out   chan<- *Job     // reserved jobs, to the executors
	freed <-chan struct{} // one token per job an executor finished
	pace  pacer
}

// run reserves jobs until stopCtx is done.
func (f *fetcher) run(stopCtx context.Context) {
	outstanding := 0 // reserved and not finished: buffered or running
	bo := retry.Backoff{Initial: 50 * time.Millisecond, Max: max(f.poll, 5*time.Second)}
	fails := streak{log: f.log, doing: "reserving jobs", level: slog.LevelError}
	for {
	drain:
		for {
			select {
			case <-f.freed:
				outstanding--
				f.pace.done()
			default:
				break drain
			}
		}
		if stopCtx.Err() != nil {
			return
		}
		ahead := f.pace.ahead(time.Now())
		if f.starter != nil && 2*f.leases.runningHandlers() < f.concurrency {
			// Fewer than half the handlers run a job: the reservations,
			// not the handlers, limit the run, and jobs reserved beyond
			// the idle handlers would only wait for a start mark each
			// (a write of its own; in a PostgreSQL burn-down with no-op
			// handlers 40% of the server's CPU). Reserve for the idle
			// handlers only; the next reservation follows at once.
			ahead = 0
		}
		want := f.concurrency + ahead - outstanding
		// Reserve when a handler is idle, or when the buffer has room for a
		// batch worth a round trip; else wait for a handler to finish.
		if outstanding >= f.concurrency && (want <= 0 || want < ahead/2) {
			select {
			case <-f.freed:
				outstanding--
				f.pace.done()
				continue
			case <-stopCtx.Done():
				return
			}
		}
		jobs, err := f.reserve(want, f.concurrency-outstanding)
		f.leases.addAll(jobs, f.lease)
		for _, j := range jobs {
			outstanding++
			f.out <- j
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
// The first idle of them (as many as handlers are idle) start at once, so
// their attempts are counted by the claim; with a Starter the rest, which
// wait in the buffer, are reserved without counting one, and the executor
// counts it (starts) just before their handler runs.
func (f *fetcher) reserve(n, idle int) ([]*Job, error) {
	var out []*Job
	for _, qn := range f.queues {
		for _, unstarted := range []bool{false, true} {
			k := n
			if f.starter != nil {
				k = min(n, max(0, idle-len(out)))
				if unstarted {
					k = n
				}
			}
			if k == 0 || (unstarted && f.starter == nil) {
				continue
			}
			var jobs []Job
			var err error
			if unstarted {
				jobs, err = f.starter.ReserveUnstarted(f.ctx, []string{qn}, k, f.lease)
			} else {
				jobs, err = f.q.Reserve(f.ctx, []string{qn}, k, f.lease)
			}
			for i := range jobs {
				jobs[i].unstarted = unstarted
				out = append(out, &jobs[i])
			}
			n -= len(jobs)
			if err != nil {
				return out, err
			}
			if len(jobs) < k {
				break // the queue has no more ready jobs
			}
		}
	}
	return out, nil
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

// done counts one completed job.
func (p *pacer) done() { p.completed++ }

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
