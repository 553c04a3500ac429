package queue

import (
	"sync"

	"github.com/meridianjobs/meridian/queue/internal/stackpark"
)

// handoff carries the fetcher's reserved jobs to the executors: jobs in
// the order they were reserved, each to the executor that went idle last.
//
// A channel read by every executor would wake them in turn, first idle
// first served, so that at any rate each of a thousand handler goroutines
// runs a job between two garbage collections; the collector shrinks the
// stacks of parked goroutines, and each then grows its stack again, by
// copying, for its next job (at 10,000 jobs/s on PostgreSQL the stack
// copies were a tenth of the Worker's CPU). Served last idle first, the
// few executors a rate needs stay busy and warm, and the others sleep.
// And an executor that has run a job waits for the next one without
// letting the collector shrink its stack (keepStack, internal/stackpark):
// when every executor works, as in a burn-down, every one of them is
// reused before the next collection anyway, and keeping their stacks
// took 38% off the client's CPU per job on PostgreSQL (run AZ).
//
// The fetcher's count of jobs reserved and not finished bounds what a
// handoff holds (Concurrency and the prefetch, or a budget's), so send
// never waits.
type handoff struct {
	mu     sync.Mutex
	jobs   []*held      // waiting for an executor, oldest first
	head   int          // jobs[head:] are waiting
	idle   []chan *held // idle executors' inboxes, the last idle last
	closed bool
}

// send hands h to the executor that went idle last, or keeps it for the
// next executor to ask when none is idle.
func (o *handoff) send(h *held) {
	o.mu.Lock()
	if n := len(o.idle); n > 0 {
		in := o.idle[n-1]
		o.idle[n-1] = nil
		o.idle = o.idle[:n-1]
		o.mu.Unlock()
		in <- h // buffered, and only this send fills it
		return
	}
	if o.head > 0 && o.head >= len(o.jobs)/2 {
		// Half or more taken: move the waiting jobs to the front. Each
		// move copies no more jobs than were taken since the last one, so
		// a send costs O(1) amortized however full the buffer stays.
		n := copy(o.jobs, o.jobs[o.head:])
		clear(o.jobs[n:])
		o.jobs, o.head = o.jobs[:n], 0
	}
	o.jobs = append(o.jobs, h)
	o.mu.Unlock()
}

// take returns the oldest waiting job, or waits on in (an executor's own
// inbox, buffered for one) for the next one sent, with the caller's stack
// kept from shrinking while it waits when keepStack is set (an executor
// that has run a job: its stack is grown for the next). It returns false
// once the handoff is closed and holds no job.
func (o *handoff) take(in chan *held, keepStack bool) (*held, bool) {
	o.mu.Lock()
	if h, ok := o.popLocked(); ok {
		o.mu.Unlock()
		return h, true
	}
	if o.closed {
		o.mu.Unlock()
		return nil, false
	}
	o.idle = append(o.idle, in)
	o.mu.Unlock()
	if keepStack {
		return stackpark.Receive(in)
	}
	h, ok := <-in
	return h, ok
}

// popLocked removes and returns the oldest waiting job.
func (o *handoff) popLocked() (*held, bool) {
	if o.head == len(o.jobs) {
		return nil, false
	}
	h := o.jobs[o.head]
	o.jobs[o.head] = nil
	o.head++
	return h, true
}

// close ends the executors' takes once the waiting jobs are taken: the
// idle executors return at once.
func (o *handoff) close() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.closed = true
	for _, in := range o.idle {
		close(in)
	}
	o.idle = nil
}

// drain removes and returns the jobs no executor took.
func (o *handoff) drain() []*held {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []*held
	for {
		h, ok := o.popLocked()
		if !ok {
			return out
		}
		out = append(out, h)
	}
}
