package queue_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/meridianjobs/meridian/memqueue"
	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/balance"
)

// unreachable is a memory queue one of whose queues fails every
// reservation while down is set, as a queue on a Redis Cluster does while
// its master is dead and its replica not yet promoted.
type unreachable struct {
	*memqueue.Queue
	name  string
	down  atomic.Bool
	mu    sync.Mutex
	asked int // reservations naming the queue while it was down
}

func (u *unreachable) fail(queues []string) error {
	if !u.down.Load() || !slices.Contains(queues, u.name) {
		return nil
	}
	u.mu.Lock()
	u.asked++
	u.mu.Unlock()
	return errors.New("dial tcp 127.0.0.1:7002: connect: connection refused")
}

func (u *unreachable) Reserve(ctx context.Context, queues []string, n int, lease time.Duration) ([]queue.Job, error) {
	if err := u.fail(queues); err != nil {
		return nil, err
	}
	return u.Queue.Reserve(ctx, queues, n, lease)
}

func (u *unreachable) ReserveStarting(ctx context.Context, queues []string, n int, lease time.Duration) ([]queue.Job, error) {
	if err := u.fail(queues); err != nil {
		return nil, err
	}
	return u.Queue.ReserveStarting(ctx, queues, n, lease)
}

func (u *unreachable) ReserveUnstarted(ctx context.Context, queues []string, n int, lease time.Duration) ([]queue.Job, error) {
	if err := u.fail(queues); err != nil {
		return nil, err
	}
	return u.Queue.ReserveUnstarted(ctx, queues, n, lease)
}

// TestWorkerServesItsOtherQueuesWhileOneFails: a queue whose reservations
// fail is left out for a backoff of its own while the worker's other
// queues go on, under every balance strategy, and is served again once it
// answers; it is asked with backoff meanwhile and logged once.
func TestWorkerServesItsOtherQueuesWhileOneFails(t *testing.T) {
	t.Parallel()
	for name, o := range map[string]balance.Options{
		"strict":   {},
		"weighted": {Strategy: balance.Weighted, Weights: map[string]int{"first": 3, "second": 1}},
		"simple":   {Strategy: balance.Simple, Max: 4},
		"auto":     {Strategy: balance.Auto, Max: 4},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				q := &unreachable{Queue: memqueue.New(), name: "first"}
				q.down.Store(true)
				fill(t, q, "first", 10)
				fill(t, q, "second", 100)
				var logs syncBuffer
				g := newGauge()
				w := queue.NewWorker(q).Slog(slog.New(slog.NewTextHandler(&logs, nil))).
					Concurrency(2).Queues("first", "second").Balance(o)
				g.handle(w, 100*time.Millisecond) // 100 jobs: 5 s on 2 handlers
				stop := startWorker(t, w)
				defer stop()
				waitFor(t, "the second queue's 100 jobs while the first fails", func() bool { return g.started() >= 100 })
				q.mu.Lock()
				asked := q.asked
				q.mu.Unlock()
				// Asked again after 50 ms, 100 ms, ... up to 5 s: about 7
				// times in 5 s, not once per reservation of the other's.
				if asked > 15 {
					t.Errorf("the failing queue was asked %d times in the 5 s its neighbour took, want it to rest between tries", asked)
				}
				q.down.Store(false)
				waitFor(t, "the first queue's 10 jobs once it answers", func() bool { return g.started() >= 110 })
				g.mu.Lock()
				firsts := 0
				for _, qn := range g.starts[:100] {
					if qn == "first" {
						firsts++
					}
				}
				g.mu.Unlock()
				if firsts != 0 {
					t.Errorf("%d jobs of the failing queue ran while it failed", firsts)
				}
				synctest.Wait()
				out := logs.String()
				if n := strings.Count(out, `reserving jobs from queue \"first\"`); n < 1 || n > 2 {
					t.Errorf("%d log lines about the failing queue, want its failure once (and its recovery):\n%s", n, out)
				}
				if strings.Contains(out, "level=ERROR") {
					t.Errorf("an error logged while the worker's other queue answered:\n%s", out)
				}
			})
		})
	}
}
