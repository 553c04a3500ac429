package sqlite_test

import (
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/meridianjobs/meridian/contracttest"
	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/sqlqueue"
	"github.com/meridianjobs/meridian/sqlqueue/sqlite"
)

// TestContract runs the conformance suite on queues opened by Open, whose
// connections reuse prepared statements (sqlqueue's own suite runs on
// plain database/sql connections). Finished jobs are kept for an hour so
// the done-state checks run too.
func TestContract(t *testing.T) {
	opts := []sqlqueue.Option{sqlqueue.WithRetention(time.Hour, 24*time.Hour)}
	var mu sync.Mutex
	paths := map[queue.Queue]string{}
	maint := map[queue.Queue]*sqlqueue.Queue{}
	open := func(t *testing.T, path string, more ...sqlqueue.Option) queue.Queue {
		q, err := sqlite.Open(t.Context(), path, append(opts, more...)...)
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		t.Cleanup(func() {
			if err := q.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
		mu.Lock()
		paths[q] = path
		mu.Unlock()
		return q
	}
	contracttest.Run(t, contracttest.Harness{
		New: func(t *testing.T) queue.Queue {
			return open(t, filepath.Join(t.TempDir(), "jobs.db"))
		},
		Peer: func(t *testing.T, q queue.Queue) queue.Queue {
			mu.Lock()
			path := paths[q]
			mu.Unlock()
			return open(t, path)
		},
		Maintain: func(t *testing.T, q queue.Queue, keep time.Duration) {
			mu.Lock()
			m, path := maint[q], paths[q]
			mu.Unlock()
			if m == nil {
				// One handle for every pass on q: it leads them all.
				m = open(t, path, sqlqueue.WithRetention(time.Hour, keep)).(*sqlqueue.Queue)
				mu.Lock()
				maint[q] = m
				mu.Unlock()
			}
			if leader, _, err := m.Maintain(t.Context()); err != nil || !leader {
				t.Fatalf("Maintain = leader %v, %v; want a pass led by the suite's handle", leader, err)
			}
		},
		Caps: contracttest.Capabilities{
			TimePrecision: time.Microsecond,
		},
	})
}
