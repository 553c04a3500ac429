package queue

import (
	"time"

	"github.com/meridianjobs/meridian/queue/driver"
)

// cancelSkew is how far back each cancel poll looks before the previous
// one, so that a cancel stamped by a process whose clock is a little behind
// this one's, or committed just after the previous poll read, is not
// missed. Leases already cancelled are skipped, so overlap costs nothing.
const cancelSkew = 5 * time.Second

// watchCancels is the part of a run that learns of cancels: every
// CancelPoll, while the run holds leases, it asks the store for jobs
// cancelled while running and cancels the handlers of those it holds
// (prefetched ones are dropped before they start). It returns when done is
// closed.
func (r *run) watchCancels(c driver.Controller, done <-chan struct{}) {
	t := time.NewTicker(r.w.cancelPoll)
	defer t.Stop()
	since := time.Now().Add(-cancelSkew)
	for {
		select {
		case <-done:
			return
		case <-t.C:
		}
		if r.held.len() == 0 {
			since = time.Now().Add(-cancelSkew)
			continue
		}
		now := time.Now()
		leases, err := c.CancelledSince(r.bgCtx, since)
		if err != nil {
			if r.bgCtx.Err() == nil {
				r.log.Warn("queue: asking the store for cancelled jobs failed; retrying", "err", err)
			}
			continue
		}
		since = now.Add(-cancelSkew)
		if n := r.held.cancelled(leases); n > 0 {
			r.log.Info("queue: jobs this worker holds were cancelled; stopping their handlers", "jobs", n)
		}
	}
}
