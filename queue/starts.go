package queue

import (
	"context"
	"sync"

	"github.com/meridianjobs/meridian/queue/driver"
)

// starts records that prefetched jobs start (Queue.Complete) in batches, as
// a group commit: the executor that asks first writes every start waiting
// at that moment in one call, and the starts asked for meanwhile go in the
// next call, led by the first of them. So a busy run writes one start
// statement per batch of jobs, never one per job, and each start is
// written before its handler runs. It has no goroutine of its own.
type starts struct {
	q   Queue
	ctx context.Context // for queue calls

	mu      sync.Mutex
	waiting []*startReq
	busy    bool // a call is being made or led
}

// startReq is one job's wait for its start to be written.
type startReq struct {
	l    driver.Lease
	lost bool
	err  error
	done chan struct{} // buffered (1): receives one value once lost and err are set
	lead chan struct{} // closed when this request is to make the next call
}

// start writes the start of the job under l and reports whether the lease
// was lost (the job is someone else's, or expired) or the call failed; in
// both cases no attempt is known to be counted.
func (b *starts) start(l driver.Lease) (lost bool, err error) {
	r := &startReq{l: l, done: make(chan struct{}, 1), lead: make(chan struct{})}
	b.mu.Lock()
	b.waiting = append(b.waiting, r)
	if !b.busy {
		b.busy = true
		close(r.lead)
	}
	b.mu.Unlock()
	select {
	case <-r.done:
		return r.lost, r.err
	case <-r.lead:
	}
	b.mu.Lock()
	batch := b.waiting
	b.waiting = nil
	b.mu.Unlock()
	b.flush(batch)
	b.mu.Lock()
	if len(b.waiting) > 0 {
		close(b.waiting[0].lead)
	} else {
		b.busy = false
	}
	b.mu.Unlock()
	return r.lost, r.err
}

// flush makes one Complete call for batch and answers every request in it.
func (b *starts) flush(batch []*startReq) {
	leases := make([]driver.Lease, len(batch))
	for i, r := range batch {
		leases[i] = r.l
	}
	lost, _, err := b.q.Complete(b.ctx, leases, nil)
	gone := make(map[driver.Lease]bool, len(lost))
	for _, l := range lost {
		gone[l] = true
	}
	for _, r := range batch {
		r.lost, r.err = gone[r.l], err
		r.done <- struct{}{}
	}
}
