package queue

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/meridianjobs/meridian/queue/balance"
	"github.com/meridianjobs/meridian/queue/driver"
	"github.com/meridianjobs/meridian/queue/internal/retry"
)

// Balance sets how the worker shares its handlers among its queues: strict
// order (the default, see Queues), weighted queues, or a budget of handlers
// split evenly or balanced by the queues' wait time or backlog. See
// package balance and docs/semantics.md, "Sharing handlers among queues".
// Run returns an error matching balance.ErrOptions for options it cannot
// honour.
func (w *Worker) Balance(o balance.Options) *Worker {
	o.Weights = maps.Clone(o.Weights)
	w.balance = o
	return w
}

// budget is the share of a budget of handlers among a run's queues
// (balance.Simple and balance.Auto): each queue's allotment, and the jobs
// each holds. The fetcher alone reserves and reads the allotments; the
// executors count finished jobs per queue; the balancer (Auto) sets new
// allotments.
type budget struct {
	max    int
	queues []string
	index  map[string]int
	// finished counts, per queue, the jobs the executors finished.
	finished []atomic.Int64

	// The fetcher's own: what it counted finished, and the jobs reserved
	// and not finished, per queue and in all.
	seen  []int64
	out   []int
	total int

	mu    sync.Mutex
	allot []int
}

func newBudget(queues []string, max int) *budget {
	b := &budget{max: max, queues: queues, index: make(map[string]int, len(queues)),
		finished: make([]atomic.Int64, len(queues)), seen: make([]int64, len(queues)), out: make([]int, len(queues)),
		allot: balance.Even(len(queues), max)}
	for i, q := range queues {
		b.index[q] = i
	}
	return b
}

// done counts a finished job of queue qn; the executors call it before
// they count the job in freed.
func (b *budget) done(qn string) {
	if i, ok := b.index[qn]; ok {
		b.finished[i].Add(1)
	}
}

// sync takes the finished jobs off the fetcher's counts.
func (b *budget) sync() {
	for i := range b.out {
		n := b.finished[i].Load()
		d := int(n - b.seen[i])
		b.seen[i] = n
		b.out[i] -= d
		b.total -= d
	}
}

// reserved counts n jobs reserved from queue i.
func (b *budget) reserved(i, n int) {
	b.out[i] += n
	b.total += n
}

// rooms returns how many jobs each queue may reserve now: up to its
// allotment, the budget as a whole never exceeded (after a shift, a queue
// may hold more than its new allotment until its jobs finish).
func (b *budget) rooms() []int {
	allot := b.allotments()
	free := b.max - b.total
	rooms := make([]int, len(allot))
	for i, a := range allot {
		r := min(a-b.out[i], free)
		if r > 0 {
			rooms[i] = r
			free -= r
		}
	}
	return rooms
}

func (b *budget) allotments() []int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.allot)
}

// set replaces the allotments and reports whether they changed.
func (b *budget) set(a []int) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if slices.Equal(a, b.allot) {
		return false
	}
	b.allot = slices.Clone(a)
	return true
}

// runBudget is the fetcher's loop under a budget: it reserves, queue by
// queue, up to each queue's room (no prefetch: a queue never holds more
// jobs than its allotment), and waits for a job to finish when no queue
// has room, or for work, a finished job or new allotments when the queues
// with room have nothing ready.
func (f *fetcher) runBudget(stopCtx context.Context) {
	b := f.budget
	var seen int64
	bo := retry.Backoff{Initial: 50 * time.Millisecond, Max: max(f.poll, 5*time.Second)}
	fails := streak{log: f.log, doing: "reserving jobs", level: slog.LevelError}
	for {
		f.freed.since(&seen)
		b.sync()
		if stopCtx.Err() != nil || !f.gate.wait(stopCtx.Done()) {
			return
		}
		rooms := b.rooms()
		var open []string
		for i, r := range rooms {
			if r > 0 {
				open = append(open, b.queues[i])
			}
		}
		if len(open) == 0 {
			if !f.freed.wait(seen+1, stopCtx.Done()) {
				return
			}
			continue
		}
		drained := true
		var err error
		for i, room := range rooms {
			if room <= 0 {
				continue
			}
			var jobs []Job
			jobs, err = f.q.ReserveUnstarted(f.ctx, []string{b.queues[i]}, room, f.lease)
			f.handOut(jobs)
			b.reserved(i, len(jobs))
			if len(jobs) == room {
				drained = false
			}
			if err != nil {
				break
			}
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
		case drained:
			fails.ok()
			bo.Reset()
			f.idleOrFreed(stopCtx, open, seen)
		default:
			fails.ok()
			bo.Reset()
		}
	}
}

// handOut holds the leases of jobs, reserved without their attempts
// counted, and sends them to the executors.
func (f *fetcher) handOut(jobs []Job) {
	if len(jobs) == 0 {
		return
	}
	ptrs := make([]*Job, len(jobs))
	for i := range jobs {
		ptrs[i] = &jobs[i]
	}
	hs := f.leases.addAll(ptrs, f.lease)
	for i := range hs {
		hs[i].unstarted = true
		f.out <- &hs[i]
	}
}

// idleOrFreed waits for work on queues (the Waiter, or the poll), for a
// job to finish after the seen'th, or for new allotments, whichever comes
// first.
func (f *fetcher) idleOrFreed(stopCtx context.Context, queues []string, seen int64) {
	ctx, cancel := context.WithCancel(stopCtx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer cancel()
		f.idle(ctx, queues)
	}()
	f.freed.wait(seen+1, ctx.Done())
	cancel()
	<-done
}

// balancer is the part of a run that rebalances a budget (balance.Auto):
// every cooldown it measures the queues' load and shifts the allotments
// towards it, each by at most MaxShift.
type balancer struct {
	opts   balance.Options
	budget *budget
	q      Queue
	insp   driver.Inspector // nil: Len of each queue
	ctx    context.Context
	wake   func() // tells the fetcher the allotments changed
	log    *slog.Logger
}

// run rebalances until done is closed.
func (b *balancer) run(done <-chan struct{}) {
	t := time.NewTicker(b.opts.Cooldown)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
		}
		load, err := b.load()
		if err != nil {
			if b.ctx.Err() == nil {
				b.log.Warn("queue: measuring the queues' load to balance handlers failed; keeping the allotments", "err", err)
			}
			continue
		}
		cur := b.budget.allotments()
		next := balance.Shift(cur, balance.Target(cur, load, b.opts.Max, b.opts.Min), b.opts.Max, b.opts.Min, b.opts.MaxShift)
		if b.budget.set(next) {
			b.log.Debug("queue: handlers rebalanced", "queues", b.budget.queues, "from", cur, "to", next, "load", load)
			b.wake()
		}
	}
}

// load measures each queue's load by the options' measure.
func (b *balancer) load() ([]float64, error) {
	qs := b.budget.queues
	out := make([]float64, len(qs))
	switch {
	case b.insp != nil && b.opts.By == balance.WaitTime:
		oldest, err := b.insp.OldestReady(b.ctx)
		if err != nil {
			return nil, err
		}
		now := time.Now()
		for i, q := range qs {
			if t, ok := oldest[q]; ok {
				out[i] = max(now.Sub(t).Seconds(), 0)
			}
		}
	case b.insp != nil:
		counts, err := b.insp.Counts(b.ctx)
		if err != nil {
			return nil, err
		}
		for _, c := range counts {
			if i, ok := b.budget.index[c.Queue]; ok {
				out[i] = float64(c.Ready.N)
			}
		}
	default:
		for i, q := range qs {
			n, err := b.q.Len(b.ctx, q)
			if err != nil {
				return nil, err
			}
			out[i] = float64(n)
		}
	}
	return out, nil
}
