package postgres_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/meridianjobs/meridian/contracttest"
	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/sqlqueue"
	"github.com/meridianjobs/meridian/sqlqueue/postgres"
)

// TestContract runs the conformance suite on postgres.Queue: sqlqueue's
// PostgreSQL dialect plus the LISTEN/NOTIFY Waiter, COPY in PushMany and
// the pgx.Tx pusher, keeping finished jobs for an hour so the done-state
// checks run too.
func TestContract(t *testing.T) {
	dsn := testDSN(t)
	opts := []sqlqueue.Option{sqlqueue.WithRetention(time.Hour, 24*time.Hour)}
	var mu sync.Mutex
	maint := map[queue.Queue]*postgres.Queue{}
	contracttest.Run(t, contracttest.Harness{
		Maintain: func(t *testing.T, q queue.Queue, keep time.Duration) {
			mu.Lock()
			m := maint[q]
			if m == nil {
				// One handle for every pass on q: it leads them all.
				m = openQueue(t, dsn, q.(*postgres.Queue).Table(), append(opts, sqlqueue.WithRetention(time.Hour, keep))...)
				maint[q] = m
			}
			mu.Unlock()
			if leader, _, err := m.Maintain(t.Context()); err != nil || !leader {
				t.Fatalf("Maintain = leader %v, %v; want a pass led by the suite's handle", leader, err)
			}
		},
		New: func(t *testing.T) queue.Queue { return newQueue(t, dsn, opts...) },
		Peer: func(t *testing.T, q queue.Queue) queue.Queue {
			return openQueue(t, dsn, q.(*postgres.Queue).Table(), opts...)
		},
		Tx: func(t *testing.T, q queue.Queue) (queue.Pusher, func() error, func() error) {
			pq := q.(*postgres.Queue)
			tx, err := pq.Pool().Begin(t.Context())
			if err != nil {
				t.Fatalf("Begin: %v", err)
			}
			t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
			return pq.Tx(tx), func() error { return tx.Commit(t.Context()) }, func() error { return tx.Rollback(t.Context()) }
		},
		Caps: contracttest.Capabilities{TimePrecision: time.Microsecond},
	})
}
