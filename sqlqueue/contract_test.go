package sqlqueue_test

import (
	"database/sql"
	"sync"
	"testing"
	"time"

	"github.com/meridianjobs/meridian/contracttest"
	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/sqlqueue"
)

// harness runs the conformance suite on b. Each check gets a fresh table
// (and on SQLite a fresh file); finished jobs are kept for an hour so the
// done-state checks run too.
func harness(b backend, opts ...sqlqueue.Option) contracttest.Harness {
	type handle struct {
		s     store
		db    *sql.DB
		maint *sqlqueue.Queue // Maintain's handle, opened at its first call
	}
	var mu sync.Mutex
	handles := map[queue.Queue]handle{}
	lookup := func(q queue.Queue) handle {
		mu.Lock()
		defer mu.Unlock()
		return handles[q]
	}
	caps := contracttest.Capabilities{TimePrecision: time.Microsecond}
	return contracttest.Harness{
		New: func(t *testing.T) queue.Queue {
			s := newStore(t, b)
			q, db := s.open(t, opts...)
			mu.Lock()
			handles[q] = handle{s: s, db: db}
			mu.Unlock()
			return q
		},
		Peer: func(t *testing.T, q queue.Queue) queue.Queue {
			return lookup(q).s.queue(t, opts...)
		},
		Maintain: func(t *testing.T, q queue.Queue, keep time.Duration) {
			mu.Lock()
			h := handles[q]
			mu.Unlock()
			if h.maint == nil {
				// One handle for every pass on q: it leads them all.
				h.maint = h.s.queue(t, append(opts, sqlqueue.WithRetention(time.Hour, keep))...)
				mu.Lock()
				handles[q] = h
				mu.Unlock()
			}
			leader, _, err := h.maint.Maintain(t.Context())
			if err != nil || !leader {
				t.Fatalf("Maintain = leader %v, %v; want a pass led by the suite's handle", leader, err)
			}
		},
		Tx: func(t *testing.T, q queue.Queue) (queue.Pusher, func() error, func() error) {
			tx, err := lookup(q).db.BeginTx(t.Context(), nil)
			if err != nil {
				t.Fatalf("BeginTx: %v", err)
			}
			return q.(*sqlqueue.Queue).Tx(tx), tx.Commit, tx.Rollback
		},
		Caps: caps,
	}
}

// TestContract runs the conformance suite on every dialect, keeping
// finished jobs (the done state) for an hour.
func TestContract(t *testing.T) {
	for d, open := range backends(t) {
		t.Run(string(d), func(t *testing.T) {
			contracttest.Run(t, harness(open(t), sqlqueue.WithRetention(time.Hour, 24*time.Hour)))
		})
	}
}
