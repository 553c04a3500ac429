// Package storestats reads the per-queue state that metrics and alerts
// report (depth by state, failures, the oldest ready job's wait) from a
// driver's inspection interfaces, and caches it so that many readers cost
// one bounded read per period.
package storestats

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// Snapshot is the store's per-queue state at one time.
type Snapshot struct {
	At    time.Time
	Stats []driver.QueueStats
	// OldestReady maps each queue with ready jobs to the earliest time one
	// of them became available.
	OldestReady map[string]time.Time
	// Counts are the store's counts by state (nil in a snapshot not
	// read from a store, which Depths then takes from Stats).
	Counts []driver.QueueCounts
}

// Depth is the number of one queue's jobs in one state.
type Depth struct {
	Queue string
	State driver.JobState
	N     int64
}

// Depths lists each queue's jobs by state: from Counts when the store
// keeps them (ready, scheduled, running, dead, done, cancelled; exact
// totals), else from Stats (ready, scheduled, running, dead; a count a
// driver capped is its cap). Queues are in name order, states in
// driver.JobStates order.
func (s Snapshot) Depths() []Depth {
	var out []Depth
	if s.Counts != nil {
		for _, c := range s.Counts {
			out = append(out,
				Depth{c.Queue, queue.StateReady, c.Ready.N}, Depth{c.Queue, queue.StateScheduled, c.Scheduled.N},
				Depth{c.Queue, queue.StateRunning, c.Running.N}, Depth{c.Queue, queue.StateDead, c.Dead},
				Depth{c.Queue, queue.StateDone, c.Done}, Depth{c.Queue, queue.StateCancelled, c.Cancelled})
		}
		return out
	}
	for _, st := range s.Stats {
		out = append(out, Depth{st.Queue, queue.StateReady, st.Ready.N}, Depth{st.Queue, queue.StateScheduled, st.Scheduled.N},
			Depth{st.Queue, queue.StateRunning, st.Running.N}, Depth{st.Queue, queue.StateDead, st.Dead.N})
	}
	return out
}

// OldestAge returns how long queue's oldest ready job has waited at the
// snapshot's time, zero when it has none.
func (s Snapshot) OldestAge(queueName string) time.Duration {
	t, ok := s.OldestReady[queueName]
	if !ok || !s.At.After(t) {
		return 0
	}
	return s.At.Sub(t)
}

// Read takes a snapshot: one QueueStats, one Counts and one OldestReady
// call.
func Read(ctx context.Context, in driver.Inspector) (Snapshot, error) {
	stats, err := in.QueueStats(ctx)
	if err != nil {
		return Snapshot{}, fmt.Errorf("reading queue stats: %w", err)
	}
	s := Snapshot{At: time.Now(), Stats: stats}
	counts, err := in.Counts(ctx)
	if err != nil {
		return Snapshot{}, fmt.Errorf("reading job counts: %w", err)
	}
	s.Counts = counts
	if s.Counts == nil {
		s.Counts = []driver.QueueCounts{}
	}
	oldest, err := in.OldestReady(ctx)
	if err != nil {
		return Snapshot{}, fmt.Errorf("reading the oldest ready jobs: %w", err)
	}
	s.OldestReady = oldest
	if s.OldestReady == nil {
		s.OldestReady = map[string]time.Time{}
	}
	return s, nil
}

// Cache holds the latest snapshot for TTL. Concurrent callers during a
// refresh wait for it rather than starting their own.
type Cache struct {
	in      driver.Inspector
	ttl     time.Duration
	timeout time.Duration

	mu   sync.Mutex
	snap Snapshot
	err  error
	have bool
}

// NewCache returns a cache over in that keeps a snapshot for ttl; each
// read is bounded by timeout.
func NewCache(in driver.Inspector, ttl, timeout time.Duration) *Cache {
	return &Cache{in: in, ttl: ttl, timeout: timeout}
}

// Get returns a snapshot no older than the TTL, reading the store when the
// cached one has expired. A failed read is cached for the TTL too, so a
// down database is not hammered by every scrape.
func (c *Cache) Get(ctx context.Context) (Snapshot, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.have && time.Since(c.snap.At) < c.ttl {
		return c.snap, c.err
	}
	rctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	snap, err := Read(rctx, c.in)
	if err != nil {
		snap = Snapshot{At: time.Now()}
	}
	c.snap, c.err, c.have = snap, err, true
	return snap, err
}
