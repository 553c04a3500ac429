package queue

import (
	"log/slog"
	"sync"
	"time"

	"github.com/meridianjobs/meridian/queue/driver"
)

// fleetPoll is how often a worker over a store with the Fleet ability
// reads its orders: a fleet command reaches every worker within about
// this long, for one small read per worker per fleetPoll.
const fleetPoll = time.Second

// gate holds the fetcher while the worker is paused by a fleet command.
type gate struct {
	mu     sync.Mutex
	paused bool
	open   chan struct{} // closed while not paused
}

func newGate() *gate {
	g := &gate{open: make(chan struct{})}
	close(g.open)
	return g
}

// set pauses or opens the gate and reports whether that changed it.
func (g *gate) set(paused bool) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if paused == g.paused {
		return false
	}
	g.paused = paused
	if paused {
		g.open = make(chan struct{})
	} else {
		close(g.open)
	}
	return true
}

// wait returns true once the gate is open, or false when done is closed
// first. A nil gate is always open.
func (g *gate) wait(done <-chan struct{}) bool {
	if g == nil {
		return true
	}
	g.mu.Lock()
	open := g.open
	g.mu.Unlock()
	select {
	case <-open:
		return true
	default:
	}
	select {
	case <-open:
		return true
	case <-done:
		return false
	}
}

// isPaused reports whether the gate is paused. A nil gate never is.
func (g *gate) isPaused() bool {
	if g == nil {
		return false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.paused
}

// opened returns a channel closed once the gate is open (already closed
// while it is). A nil gate is always open.
func (g *gate) opened() <-chan struct{} {
	if g == nil {
		return closedChan
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.open
}

var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// fleetWatch is the part of a run that obeys fleet commands
// (driver.Fleet): it reads the worker's orders once as the run starts,
// keeping the fleet's count of terminations then, and every fleetPoll
// after; it pauses and opens the fetcher's gate, and on a terminate (of
// this worker, or of the fleet since the run started) stops the run, whose
// Run then returns ErrTerminated.
type fleetWatch struct {
	fleet driver.Fleet
	r     *run
	base  int64 // the fleet's terminations when the run started; -1 before the first read
	fails streak
}

func newFleetWatch(f driver.Fleet, r *run) *fleetWatch {
	return &fleetWatch{fleet: f, r: r, base: -1, fails: streak{log: r.log, doing: "reading the worker's fleet orders", level: slog.LevelWarn}}
}

// check reads the orders once and obeys them; it reports false once the
// run is terminated.
func (fw *fleetWatch) check() bool {
	r := fw.r
	o, err := fw.fleet.WorkerOrders(r.bgCtx, r.id)
	if err != nil {
		if r.bgCtx.Err() == nil && !r.halt.check("reading its fleet orders", err) {
			fw.fails.failed(err)
		}
		return true
	}
	fw.fails.ok()
	if fw.base < 0 {
		fw.base = o.Terminations
	}
	if o.Terminate || o.Terminations > fw.base {
		r.log.Info("queue: worker terminated by a fleet command; finishing its running jobs", "worker", r.id)
		r.halt.terminate()
		return false
	}
	if r.gate.set(o.Paused) {
		if o.Paused {
			r.log.Info("queue: worker paused by a fleet command; it reserves no jobs until continued", "worker", r.id)
		} else {
			r.log.Info("queue: worker continued by a fleet command", "worker", r.id)
		}
	}
	return true
}

// run checks the orders every fleetPoll until done is closed or the run
// is terminated.
func (fw *fleetWatch) run(done <-chan struct{}) {
	t := time.NewTicker(fleetPoll)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
		}
		if !fw.check() {
			return
		}
	}
}
