package queue

import (
	"context"
	"errors"
	"sync"
	"time"
)

// heldLeases is the set of leases one run holds: jobs reserved and not yet
// settled, whether buffered, running or waiting for an ack flush. The
// fetcher adds to it, the executor marks handlers running in it, the
// completer removes from it and the extender keeps it alive.
type heldLeases struct {
	mu      sync.Mutex
	m       map[string]*held
	running int // handlers between start and stop
}

// held is one lease the run holds.
type held struct {
	lease   Lease
	expires time.Time
	cancel  context.CancelCauseFunc // set while the handler runs
	lost    bool                    // the queue no longer honours the lease
	// released is set when shutdown gave the job back while its handler
	// still ran: the handler's outcome is no longer the run's to record.
	released bool
	// cancelled is set when the job was cancelled in the store while held.
	cancelled bool
}

func newHeldLeases() *heldLeases { return &heldLeases{m: make(map[string]*held)} }

// add holds j's lease, expiring at j.LeaseExpiresAt or, when the driver
// left it unset, lease from now.
func (s *heldLeases) add(j *Job, lease time.Duration) { s.addAll([]*Job{j}, lease) }

// addAll holds the leases of jobs as add does, under one lock and in one
// allocation for the batch (a claim's hundreds of jobs).
func (s *heldLeases) addAll(jobs []*Job, lease time.Duration) {
	hs := make([]held, len(jobs))
	var now time.Time
	for i, j := range jobs {
		exp := j.LeaseExpiresAt
		if exp.IsZero() {
			if now.IsZero() {
				now = time.Now()
			}
			exp = now.Add(lease)
		}
		hs[i] = held{lease: j.Lease(), expires: exp}
	}
	s.mu.Lock()
	for i, j := range jobs {
		s.m[j.ID] = &hs[i]
	}
	s.mu.Unlock()
}

// remove forgets the job id's lease.
func (s *heldLeases) remove(id string) {
	s.mu.Lock()
	delete(s.m, id)
	s.mu.Unlock()
}

// len reports how many leases are held.
func (s *heldLeases) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m)
}

// start records that id's handler runs under cancel, which a lost lease
// cancels. It returns the entry to pass to stop, nil if id is not held.
func (s *heldLeases) start(id string, cancel context.CancelCauseFunc) *held {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.m[id]
	if h != nil {
		h.cancel = cancel
		s.running++
	}
	return h
}

// runningHandlers reports how many handlers run (between start and stop).
func (s *heldLeases) runningHandlers() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.running
}

// stop records that h's handler returned and reports whether its lease was
// lost (cancelled: by a cancel of the job), or given back by shutdown,
// meanwhile.
func (s *heldLeases) stop(h *held) (lost, cancelled, released bool) {
	if h == nil {
		return false, false, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	h.cancel = nil
	s.running--
	return h.lost, h.cancelled, h.released
}

// cancelled records that the jobs under leases were cancelled in the
// store: those this run holds lose their lease, and their running handlers
// are cancelled with ErrCancelled. It reports how many it held.
func (s *heldLeases) cancelled(leases []Lease) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, l := range leases {
		h := s.m[l.JobID]
		if h == nil || h.lease != l || h.cancelled {
			continue
		}
		n++
		h.lost, h.cancelled = true, true
		if h.cancel != nil {
			h.cancel(ErrCancelled)
		}
	}
	return n
}

// isCancelled reports whether the held job id was cancelled before it
// started.
func (s *heldLeases) isCancelled(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.m[id]
	return h != nil && h.cancelled
}

// due returns the leases with less than half of lease left at now.
func (s *heldLeases) due(now time.Time, lease time.Duration) []Lease {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Lease
	for _, h := range s.m {
		if !h.lost && h.expires.Sub(now) < lease/2 {
			out = append(out, h.lease)
		}
	}
	return out
}

// extended records the outcome of extending l by d at now: a new expiry, or
// a lost lease whose running handler is cancelled. Other errors change
// nothing. It reports whether the lease was found lost.
func (s *heldLeases) extended(l Lease, now time.Time, d time.Duration, err error) (lost bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.m[l.JobID]
	switch {
	case h == nil || h.lease != l:
	case err == nil:
		h.expires = now.Add(d)
	case errors.Is(err, ErrLeaseLost):
		h.lost = true
		if h.cancel != nil {
			h.cancel(ErrLeaseLost)
		}
		return true
	}
	return false
}

// anyHold reports whether any of leases is still held and unexpired at now.
func (s *heldLeases) anyHold(leases []Lease, now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, l := range leases {
		if h := s.m[l.JobID]; h != nil && !h.lost && h.expires.After(now) {
			return true
		}
	}
	return false
}

// releaseRunning removes the leases whose handlers still run, marking them
// released, and returns them: shutdown gives those jobs back to the queue.
func (s *heldLeases) releaseRunning() []Lease {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Lease
	for id, h := range s.m {
		if h.cancel != nil && !h.lost {
			h.released = true
			out = append(out, h.lease)
			delete(s.m, id)
		}
	}
	return out
}
