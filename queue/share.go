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
// each holds. The fetcher alone reserves, hands jobs on and reads the
// allotments; the executors count finished jobs per queue; the balancer
// (Auto) sets new allotments.
//
// A queue's jobs are handed on (to the executors: running, or about to)
// only while the queue has fewer handed on than its allotment, plus what
// the queues lending lend it (see free), and the run fewer than max, so
// the run never runs more than max. The sharing is work-conserving: a
// queue lends while it has nothing to do (asleep: its last reservation
// came back short, and no job waiting), and the room it lends (its
// allotment less its jobs handed on) goes to the queues with work; once
// it wakes, that room is its own again, kept from the borrowers, and
// comes back to it as their jobs finish. Beyond that, a queue may hold
// jobs reserved ahead (waiting), at most Prefetch (see ahead): leased,
// their leases extended, handed on as its handlers free up.
type budget struct {
	max    int
	queues []string
	index  map[string]int
	// finished counts, per queue, the jobs the executors finished.
	finished []atomic.Int64

	// The fetcher's own: per queue, the finished jobs it counted, the jobs
	// reserved and not finished (waiting or handed on), the jobs reserved
	// ahead and not yet handed on, and the pace of its completions; the
	// jobs handed on and not finished in all.
	seen    []int64
	out     []int
	waiting [][]*held
	pace    []pacer
	handed  int
	// asleep is the fetcher's naps' (see naps): the queues whose last
	// reservation came back short, not woken since; nil: none.
	asleep []bool

	mu    sync.Mutex
	allot []int
}

func newBudget(queues []string, max, prefetch int) *budget {
	b := &budget{max: max, queues: queues, index: make(map[string]int, len(queues)),
		finished: make([]atomic.Int64, len(queues)), seen: make([]int64, len(queues)), out: make([]int, len(queues)),
		waiting: make([][]*held, len(queues)), pace: make([]pacer, len(queues)),
		allot: balance.Even(len(queues), max)}
	for i, q := range queues {
		b.index[q] = i
		b.pace[i] = pacer{horizon: prefetchHorizon, max: prefetch}
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
		b.handed -= d
		b.pace[i].done(d)
	}
}

// handedOn returns the jobs of queue i handed on and not finished.
func (b *budget) handedOn(i int) int { return b.out[i] - len(b.waiting[i]) }

// room returns how many more jobs queue i may hand on within its own
// allotment (none when it holds more: after a shift, or borrowing).
func (b *budget) room(i int, allot []int) int { return max(0, allot[i]-b.handedOn(i)) }

// lending reports whether queue i lends its room to the others: it is
// asleep (nothing ready when last asked) and holds no job waiting.
func (b *budget) lending(i int) bool {
	return b.asleep != nil && b.asleep[i] && len(b.waiting[i]) == 0
}

// free returns how many more jobs of queue i may be handed on now: its
// own room and the room of every queue lending, but never the room of a
// queue not lending (that is kept for it, so a queue that wakes gets its
// allotment back as the borrowers' jobs finish), and the budget as a
// whole never exceeded.
func (b *budget) free(i int, allot []int) int {
	own, lent, kept := b.room(i, allot), 0, 0
	for j := range b.queues {
		switch {
		case j == i:
		case b.lending(j):
			lent += b.room(j, allot)
		default:
			kept += b.room(j, allot)
		}
	}
	return max(0, min(own+lent, b.max-b.handed-kept))
}

// ahead returns how many jobs queue i may hold reserved ahead of its free
// handlers at now, as the fetcher's run does for a worker without a
// budget: the jobs the queue finishes in prefetchHorizon at its recent
// rate, capped by Prefetch, while its handlers are busy; none while half
// that many or more of its allotment idle on average (its jobs' run time
// per second, from leases): its jobs then finish faster than claims bring
// them, and the free handlers' claims carry the work alone, counting
// their attempts (see reserveShare and run).
func (b *budget) ahead(i int, allot []int, now time.Time, leases *heldLeases) int {
	qn := b.queues[i]
	a := b.pace[i].ahead(now, func(t time.Time) time.Duration { return leases.workedIn(qn, t) })
	if b.pace[i].spare(allot[i]) >= float64(max(1, a/2)) {
		return 0
	}
	return a
}

// take counts the jobs hs reserved from queue i as waiting.
func (b *budget) take(i int, hs []held) {
	for k := range hs {
		b.waiting[i] = append(b.waiting[i], &hs[k])
	}
	b.out[i] += len(hs)
}

// handOn sends queue i's waiting jobs to the executors while it has free
// handlers.
func (b *budget) handOn(i int, allot []int, out *handoff) {
	n := min(b.free(i, allot), len(b.waiting[i]))
	for _, h := range b.waiting[i][:n] {
		out.send(h)
	}
	b.waiting[i] = b.waiting[i][n:]
	b.handed += n
}

// flush sends every waiting job to the executors, whatever the
// allotments: the run is stopping, and they run within ShutdownTimeout as
// the jobs prefetched without a budget do.
func (b *budget) flush(out *handoff) {
	for i := range b.waiting {
		for _, h := range b.waiting[i] {
			out.send(h)
		}
		b.handed += len(b.waiting[i])
		b.waiting[i] = nil
	}
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

// runBudget is the fetcher's loop under a budget. Each turn it hands
// waiting jobs on to their queues' free handlers, then reserves, queue by
// queue, for the free handlers and ahead of them (see budget.ahead): the
// free handlers' jobs with their attempts counted in the claim, the rest
// uncounted, one call each (see reserveShare); it reserves ahead again
// only once a queue's waiting jobs fell to half of what it may hold, so a
// flooded queue of fast jobs costs a round trip per several jobs, not one
// per job. A queue whose reservation came back short is not asked again
// until it is woken (see naps). Then it waits for a job to finish, a queue
// to wake, new allotments or the end of a fleet pause. While a fleet
// command pauses the worker it reserves nothing but still hands on what it
// holds.
func (f *fetcher) runBudget(stopCtx context.Context) {
	b := f.budget
	naps := newNaps(f, stopCtx)
	defer naps.stop()
	b.asleep = naps.asleep
	defer b.flush(f.out)
	var seen int64
	bo := retry.Backoff{Initial: 50 * time.Millisecond, Max: max(f.poll, 5*time.Second)}
	fails := streak{log: f.log, doing: "reserving jobs", level: slog.LevelError}
	rests := newRests(f.log, b.queues, f.poll, f.freed.poke)
	for {
		f.freed.since(&seen)
		b.sync()
		if stopCtx.Err() != nil {
			return
		}
		naps.wakeUp()
		allot := b.allotments()
		for i := range b.queues {
			b.handOn(i, allot, f.out)
		}
		paused := f.gate.isPaused()
		now := time.Now()
		for i := range b.queues {
			ahead := b.ahead(i, allot, now, f.leases) // samples the pace of every queue
			if paused || naps.asleep[i] || rests.resting(i, now) {
				continue
			}
			// A queue reserves for what it may hand on now and, when it
			// may reserve ahead (Prefetch), for its own room even while
			// borrowers fill the budget: its jobs then wait for theirs
			// to finish, not for a reservation.
			claim := b.free(i, allot)
			if b.pace[i].max > 0 {
				claim = max(claim, b.room(i, allot))
			}
			want := claim + ahead - len(b.waiting[i])
			if want <= 0 || (claim == 0 && want < max(1, ahead/2)) {
				continue
			}
			got, err := f.reserveShare(i, want, max(0, b.free(i, allot)-len(b.waiting[i])), allot)
			if got < want && err == nil {
				naps.sleep(i)
			}
			rests.done(i, err)
		}
		naps.watch()
		if err := rests.end(now); err != nil {
			if f.halt.check("reserving jobs", err) {
				return
			}
			d := bo.Next()
			fails.failed(err, "retry_in", d)
			if retry.Sleep(stopCtx, d) != nil {
				return
			}
			continue
		}
		fails.ok()
		bo.Reset()
		var opened <-chan struct{}
		if paused {
			opened = f.gate.opened()
		}
		if !f.freed.waitOr(seen+1, stopCtx.Done(), opened) {
			return
		}
	}
}

// hold holds the leases of jobs and returns their entries for the
// executors. starting reports that their claim counted their attempts
// (ReserveStarting); a job taken back from an expired lease waits for its
// start mark even so (see reserve).
func (f *fetcher) hold(jobs []Job, starting bool) []held {
	if len(jobs) == 0 {
		return nil
	}
	ptrs := make([]*Job, len(jobs))
	for i := range jobs {
		ptrs[i] = &jobs[i]
	}
	hs := f.leases.addAll(ptrs, f.lease)
	for i := range hs {
		hs[i].unstarted = !starting || jobs[i].Recovered
	}
	return hs
}

// reserveShare reserves up to want jobs of budget queue i, of which up to
// start are handed on at once: those through ReserveStarting, whose claim
// counts their attempts (their handlers are free, and the queue holds no
// job waiting before them), handed on before the rest is asked for; the
// rest, which wait for handlers, through ReserveUnstarted, each counted
// by its start mark (see reserve). A short or failed first call ends the
// queue's turn. It returns how many jobs it reserved.
func (f *fetcher) reserveShare(i, want, start int, allot []int) (int, error) {
	b, qn := f.budget, []string{f.budget.queues[i]}
	start = min(start, want)
	got := 0
	if start > 0 {
		jobs, err := f.q.ReserveStarting(f.ctx, qn, start, f.lease)
		b.take(i, f.hold(jobs, true))
		b.handOn(i, allot, f.out)
		got = len(jobs)
		if err != nil || got < start || got == want {
			return got, err
		}
	}
	jobs, err := f.q.ReserveUnstarted(f.ctx, qn, want-got, f.lease)
	b.take(i, f.hold(jobs, false))
	b.handOn(i, allot, f.out)
	return got + len(jobs), err
}

// naps keeps the queues whose last reservation came back short (nothing
// more ready) from being asked again until they are woken: one goroutine
// waits for work on them, through the store's Waiter or, without one, for
// the poll, and wakes the fetcher when it returns; the queues it waited
// on are then asked again. So a queue with nothing ready costs no store
// call per finished job of the others, only one per wake-up or poll.
// Only the fetcher calls its methods.
type naps struct {
	f      *fetcher
	ctx    context.Context
	asleep []bool
	// The running waiter, if any: the queues it waits on, and whether it
	// returned.
	watching []bool
	cancel   context.CancelFunc // nil: none runs
	done     chan struct{}
	woke     atomic.Bool
}

func newNaps(f *fetcher, ctx context.Context) *naps {
	return &naps{f: f, ctx: ctx, asleep: make([]bool, len(f.queues)), watching: make([]bool, len(f.queues))}
}

// sleep marks queue i asleep.
func (n *naps) sleep(i int) { n.asleep[i] = true }

// wakeUp wakes the queues the waiter waited on, if it returned.
func (n *naps) wakeUp() {
	if n.cancel == nil || !n.woke.Load() {
		return
	}
	n.stop()
	for i, w := range n.watching {
		if w {
			n.asleep[i] = false
		}
	}
}

// watch has a waiter wait on every queue asleep, starting one (and
// stopping one that waits on fewer) when needed.
func (n *naps) watch() {
	if n.woke.Load() {
		n.wakeUp()
		n.f.freed.poke() // the fetcher asks the woken queues at its next turn
	}
	if n.cancel != nil && slices.Equal(n.asleep, n.watching) {
		return
	}
	n.stop()
	var names []string
	for i, a := range n.asleep {
		n.watching[i] = a
		if a {
			names = append(names, n.f.queues[i])
		}
	}
	if len(names) == 0 {
		return
	}
	ctx, cancel := context.WithCancel(n.ctx)
	n.cancel, n.done = cancel, make(chan struct{})
	go func() {
		defer close(n.done)
		n.f.idle(ctx, names)
		if ctx.Err() == nil {
			n.woke.Store(true)
			n.f.freed.poke()
		}
	}()
}

// stop stops the waiter, if one runs, and waits for it to return.
func (n *naps) stop() {
	if n.cancel == nil {
		return
	}
	n.cancel()
	<-n.done
	n.cancel = nil
	n.woke.Store(false)
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
