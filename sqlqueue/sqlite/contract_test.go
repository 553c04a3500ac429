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
	open := func(t *testing.T, path string) queue.Queue {
		q, err := sqlite.Open(t.Context(), path, opts...)
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
		Caps: contracttest.Capabilities{
			TimePrecision: time.Microsecond,
		},
	})
}
