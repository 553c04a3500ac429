package queue

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/meridianjobs/meridian/queue/driver"
)

// heldLeases is the set of leases one run holds: jobs reserved and not yet
// settled, whether buffered, running or waiting for an ack flush. The
// fetcher adds to it, the executor marks handlers running in it, the
// completer removes from it and the extender keeps it alive. It also
// counts, per queue, the leases held and the handlers running, which the
// heartbeat reports (WorkerInfo.Running and Reserved).
type heldLeases struct {
	// marked counts the held entries whose cancelled flag is set (at
	// least: an entry replaced by add is not uncounted), so that
	// isCancelled, which every job asks, takes no lock while none is.
	marked atomic.Int64

	mu sync.Mutex
	m  map[string]*held
	// byQueue counts the entries of m by queue; an entry is counted as
	// running while it is in m with running set.
	byQueue map[string]*heldCount
	// handlers counts the handlers between run and stop, held or not.
	handlers int
	// margin is how long before its stored expiry a lease counts as lost
	// unless renewed (Worker.LeaseMargin); 0 in tests that set none.
	margin time.Duration
}

// heldCount is what one queue's entries of heldLeases hold.
type heldCount struct {
	leases  int // every lease held
	running int // of which a handler runs
}

// held is one lease the run holds.
type held struct {
	job     *Job       // the job reserved under lease
	count   *heldCount // its queue's, in heldLeases.byQueue
	gone    bool       // no longer in heldLeases.m: uncounted
	lease   driver.Lease
	expires time.Time // the stored expiry, as last stored
	// deadline is expires minus the margin, in Unix nanoseconds: when the
	// lease counts as lost unless renewed first. Written under the lock,
	// read without it by the handler's context (jobContext.check).
	deadline atomic.Int64
	// running is the handler's context while it runs (jc), which a lost
	// lease or a cancel of the job cancels; nil otherwise.
	running *jobContext
	lost    bool // the queue no longer honours the lease
	// released is set when shutdown gave the job back while its handler
	// still ran: the handler's outcome is no longer the run's to record.
	released bool
	// cancelled is set when the job was cancelled in the store while held.
	cancelled bool
	// unstarted marks a job the fetcher prefetched through
	// Starter.ReserveUnstarted: its attempt is counted (Starter.Start) just
	// before its handler starts. Only the fetcher, before it hands the
	// entry on, and then the executor write it.
	unstarted bool
	// jc is the job's handler context, made by run. It lives here, not in
	// an allocation of its own per job, because addAll allocates a claim's
	// entries together.
	jc jobContext
}

func newHeldLeases() *heldLeases {
	return &heldLeases{m: make(map[string]*held), byQueue: make(map[string]*heldCount)}
}

// queueCount returns the count of queue name's leases. Callers hold s.mu.
func (s *heldLeases) queueCount(name string) *heldCount {
	c := s.byQueue[name]
	if c == nil {
		c = &heldCount{}
		s.byQueue[name] = c
	}
	return c
}

// counts returns the jobs held by queue: running, those whose handler
// runs, and reserved, the others (see WorkerInfo). A map is nil when it
// would be empty.
func (s *heldLeases) counts() (running, reserved map[string]int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for name, c := range s.byQueue {
		if c.running > 0 {
			if running == nil {
				running = make(map[string]int)
			}
			running[name] = c.running
		}
		if r := c.leases - c.running; r > 0 {
			if reserved == nil {
				reserved = make(map[string]int)
			}
			reserved[name] = r
		}
	}
	return running, reserved
}

// add holds j's lease, expiring at j.LeaseExpiresAt or, when the driver
// left it unset, lease from now.
func (s *heldLeases) add(j *Job, lease time.Duration) { s.addAll([]*Job{j}, lease) }

// addAll holds the leases of jobs as add does, under one lock and in one
// allocation for the batch (a claim's hundreds of jobs), and returns their
// entries, in the order of jobs, for the executors (see run).
func (s *heldLeases) addAll(jobs []*Job, lease time.Duration) []held {
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
		hs[i].job, hs[i].lease, hs[i].expires = j, j.Lease(), exp
		hs[i].deadline.Store(exp.Add(-s.margin).UnixNano())
	}
	s.mu.Lock()
	var c *heldCount
	for i, j := range jobs {
		if old := s.m[j.ID]; old != nil {
			// The store leased the job again: the lease held before is
			// over, and so is any handler still running under it.
			s.lapseLocked(old)
			s.removeLocked(j.ID)
		}
		if c == nil || (i > 0 && j.Queue != jobs[i-1].Queue) {
			c = s.queueCount(j.Queue)
		}
		hs[i].count = c
		c.leases++
		s.m[j.ID] = &hs[i]
	}
	s.mu.Unlock()
	return hs
}

// remove forgets lease l: its job's entry, if it is still that lease's. A
// newer lease of the same job (the store leased it again to this process
// while an older attempt ran) keeps its entry.
func (s *heldLeases) remove(l driver.Lease) {
	s.mu.Lock()
	s.removeLeaseLocked(l)
	s.mu.Unlock()
}

// removeJobs forgets the leases of the jobs of items, as remove does,
// under one lock (an ack flush's hundreds).
func (s *heldLeases) removeJobs(items []ackItem) {
	s.mu.Lock()
	for _, it := range items {
		s.removeLeaseLocked(it.j.Lease())
	}
	s.mu.Unlock()
}

func (s *heldLeases) removeLeaseLocked(l driver.Lease) {
	if h := s.m[l.JobID]; h != nil && h.lease == l {
		s.removeLocked(l.JobID)
	}
}

func (s *heldLeases) removeLocked(id string) {
	if h := s.m[id]; h != nil {
		if h.cancelled {
			s.marked.Add(-1)
		}
		h.count.leases--
		if h.running != nil {
			h.count.running--
		}
		h.gone = true
		delete(s.m, id)
	}
}

// len reports how many leases are held.
func (s *heldLeases) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m)
}

// run makes j's handler context, a child of base, and records that j's
// handler runs under it. h is j's entry as addAll returned it, or nil to
// look it up (the fetcher hands executors the entries, so that a job costs
// no lookup here). It returns the held entry to pass to stop, nil (with a
// context of its own) when j is not held.
func (s *heldLeases) run(j *Job, h *held, base context.Context) (*held, *jobContext) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if h == nil {
		h = s.m[j.ID]
	}
	if h == nil {
		return nil, newJobContext(base, j)
	}
	if h.running == nil {
		s.handlers++
		if !h.gone {
			h.count.running++
		}
	}
	h.jc = jobContext{base: base, job: j, hold: h, set: s}
	h.running = &h.jc
	if h.lost && !h.cancelled {
		// Its lease ran out (to its margin) while it waited to start.
		h.jc.cancel(ErrLeaseLost)
	}
	return h, &h.jc
}

// runningHandlers reports how many handlers run (between run and stop).
func (s *heldLeases) runningHandlers() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.handlers
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
	if h.running != nil {
		s.handlers--
		if !h.gone {
			h.count.running--
		}
	}
	h.running = nil
	return h.lost, h.cancelled, h.released
}

// cancelled records that the jobs under leases were cancelled in the
// store: those this run holds lose their lease, and their running handlers
// are cancelled with ErrCancelled. It reports how many it held.
func (s *heldLeases) cancelled(leases []driver.Lease) int {
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
		s.marked.Add(1)
		if h.running != nil {
			h.running.cancel(ErrCancelled)
		}
	}
	return n
}

// isCancelled reports whether the held job id was cancelled before it
// started.
func (s *heldLeases) isCancelled(id string) bool {
	if s.marked.Load() == 0 {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.m[id]
	return h != nil && h.cancelled
}

// due returns the leases with less than half of their usable part (lease
// minus the margin) left before their deadline at now.
func (s *heldLeases) due(now time.Time, lease time.Duration) []driver.Lease {
	out, _ := s.dueBy(now, lease)
	return out
}

// dueBy returns what due does and the earliest deadline among those
// leases: the time by which a call extending them must have returned.
func (s *heldLeases) dueBy(now time.Time, lease time.Duration) ([]driver.Lease, time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []driver.Lease
	var first time.Time
	half := (lease - s.margin) / 2
	for _, h := range s.m {
		if h.lost || h.cancelled {
			continue
		}
		// A lease past its deadline is not extended: expire ends it.
		if dl := h.expires.Add(-s.margin); dl.After(now) && dl.Sub(now) < half {
			out = append(out, h.lease)
			if first.IsZero() || dl.Before(first) {
				first = dl
			}
		}
	}
	return out, first
}

// expire ends, at now, the leases whose deadline (the stored expiry minus
// the margin) has passed: they count as lost and their running handlers
// are cancelled with ErrLeaseLost, whatever a call extending them is
// doing. It returns how many it ended and the earliest deadline still
// ahead (zero if none).
func (s *heldLeases) expire(now time.Time) (n int, next time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, h := range s.m {
		if h.lost || h.cancelled {
			continue
		}
		dl := time.Unix(0, h.deadline.Load())
		if !now.Before(dl) {
			s.lapseLocked(h)
			n++
		} else if next.IsZero() || dl.Before(next) {
			next = dl
		}
	}
	return n, next
}

// lapse ends h's lease if its deadline has passed: the clock check of the
// handler's context (jobContext.check), which runs in the handler's own
// goroutine, so that a process that was paused past the deadline finds
// the lease over at its first look, before any timer has run.
func (s *heldLeases) lapse(h *held) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if time.Now().UnixNano() >= h.deadline.Load() {
		s.lapseLocked(h)
	}
}

// lapseLocked marks h lost and cancels its running handler with
// ErrLeaseLost, unless it is lost or cancelled already. Callers hold s.mu.
func (s *heldLeases) lapseLocked(h *held) {
	if h.lost || h.cancelled {
		return
	}
	h.lost = true
	if h.running != nil {
		h.running.cancel(ErrLeaseLost)
	}
}

// extended records the outcome of extending l by d at now: a new expiry, or
// a lost lease whose running handler is cancelled. Other errors change
// nothing, and so does any outcome for a job known cancelled (its handler
// was cancelled with ErrCancelled). It reports whether the lease was found
// lost.
func (s *heldLeases) extended(l driver.Lease, now time.Time, d time.Duration, err error) (lost bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.m[l.JobID]
	switch {
	case h == nil || h.lease != l || h.cancelled:
	case h.lost:
		// A lease that counted as lost never counts as held again, even
		// if the call renewed it after its deadline.
	case err == nil:
		if time.Now().UnixNano() >= h.deadline.Load() {
			s.lapseLocked(h) // renewed too late: the handler was due to stop
			return false
		}
		h.expires = now.Add(d)
		h.deadline.Store(h.expires.Add(-s.margin).UnixNano())
	case errors.Is(err, ErrLeaseLost):
		s.lapseLocked(h)
		return true
	}
	return false
}

// anyHold reports whether any of leases is still held and unexpired at now.
func (s *heldLeases) anyHold(leases []driver.Lease, now time.Time) bool {
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
func (s *heldLeases) releaseRunning() []driver.Lease {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []driver.Lease
	for id, h := range s.m {
		if h.running != nil && !h.lost {
			h.released = true
			out = append(out, h.lease)
			s.removeLocked(id)
		}
	}
	return out
}
