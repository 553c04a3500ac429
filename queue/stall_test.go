package queue_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/meridianjobs/meridian/memqueue"
	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// stuckQueue is a memory queue whose lease extensions hang, ignoring their
// context, until released: a frozen connection to the store. It records
// the deadline each extension was given.
type stuckQueue struct {
	*memqueue.Queue
	release chan struct{}

	mu        sync.Mutex
	deadlines []time.Time
}

func (s *stuckQueue) stuck(ctx context.Context) {
	d, _ := ctx.Deadline()
	s.mu.Lock()
	s.deadlines = append(s.deadlines, d)
	s.mu.Unlock()
	<-s.release
}

func (s *stuckQueue) ExtendMany(ctx context.Context, leases []driver.Lease, d time.Duration) ([]driver.Lease, error) {
	s.stuck(ctx)
	return s.Queue.ExtendMany(ctx, leases, d)
}

// TestWorkerCancelsAHandlerBeforeItsLeaseExpires is issue 25 item 1: a
// handler whose lease cannot be renewed (the call hangs) is cancelled with
// ErrLeaseLost the margin before the expiry its lease last stored, whatever
// the call is doing, and the call itself had that time as its deadline.
func TestWorkerCancelsAHandlerBeforeItsLeaseExpires(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		lease  time.Duration
		set    time.Duration // Worker.LeaseMargin; 0: the default
		margin time.Duration
	}{
		{"default margin, short lease", 3 * time.Second, 0, 500 * time.Millisecond},
		{"default margin, a tenth", 20 * time.Second, 0, 2 * time.Second},
		{"default margin, capped at half", 600 * time.Millisecond, 0, 300 * time.Millisecond},
		{"set margin", 3 * time.Second, time.Second, time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				q := &stuckQueue{Queue: memqueue.New(), release: make(chan struct{})}
				defer close(q.release)
				type outcome struct {
					at      time.Time
					expires time.Time
					cause   error
				}
				got := make(chan outcome, 1)
				w := queue.NewWorker(q).Slog(quiet).Lease(tc.lease).LeaseMargin(tc.set)
				queue.Handle(w, func(ctx context.Context, g Greet) error {
					j, _ := queue.JobFromContext(ctx)
					<-ctx.Done()
					got <- outcome{time.Now(), j.LeaseExpiresAt, context.Cause(ctx)}
					return ctx.Err()
				})
				if err := queue.Dispatch(t.Context(), q, Greet{}); err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithCancel(t.Context())
				errc := make(chan error, 1)
				go func() { errc <- w.Run(ctx) }()
				var o outcome
				select {
				case o = <-got:
				case <-time.After(10 * tc.lease):
					t.Fatalf("the handler ran on for %s while its lease could not be renewed", 10*tc.lease)
				}
				if !errors.Is(o.cause, queue.ErrLeaseLost) {
					t.Fatalf("handler cancelled with %v, want ErrLeaseLost", o.cause)
				}
				if want := o.expires.Add(-tc.margin); !o.at.Equal(want) {
					t.Errorf("handler cancelled at %s, want the lease's expiry %s minus the margin %s",
						o.at.Format(time.StampMilli), o.expires.Format(time.StampMilli), tc.margin)
				}
				q.mu.Lock()
				deadlines := q.deadlines
				q.mu.Unlock()
				if len(deadlines) == 0 || !deadlines[0].Equal(o.expires.Add(-tc.margin)) {
					t.Errorf("extension deadlines %v, want the first at %s", deadlines, o.expires.Add(-tc.margin).Format(time.StampMilli))
				}
				cancel()
				q.release <- struct{}{}
				if err := <-errc; err != nil {
					t.Fatal(err)
				}
			})
		})
	}
}

// stuckLeaser is a memory queue whose lease calls after the first hang,
// ignoring their context, until released: a concurrency slot holder whose
// connection froze after it took its slot. It records the deadline of each
// hanging call.
type stuckLeaser struct {
	*memqueue.Queue
	release chan struct{}

	mu        sync.Mutex
	calls     int
	deadlines []time.Time
}

func (s *stuckLeaser) AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (bool, error) {
	s.mu.Lock()
	s.calls++
	first := s.calls == 1
	if !first {
		d, _ := ctx.Deadline()
		s.deadlines = append(s.deadlines, d)
	}
	s.mu.Unlock()
	if !first {
		<-s.release
	}
	return s.Queue.AcquireLease(ctx, name, holder, ttl)
}

// TestConcurrencySlotHolderStopsBeforeItsSlotExpires is issue 25 item 3: a
// Concurrency slot holder whose renewals hang is cancelled with
// ErrLeaseLost the margin before the slot's stored expiry, and each renewal
// had that time as its deadline.
func TestConcurrencySlotHolderStopsBeforeItsSlotExpires(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		q := &stuckLeaser{Queue: memqueue.New(), release: make(chan struct{})}
		lim, err := queue.NewLimiter(q, quiet)
		if err != nil {
			t.Fatal(err)
		}
		const expiry, margin = 3 * time.Second, 500 * time.Millisecond
		mw, err := lim.Concurrency(queue.KeyByName, 1, expiry, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		type outcome struct {
			at      time.Time
			cause   error
			holding error
		}
		got := make(chan outcome, 1)
		var started time.Time
		w := queue.NewWorker(q).Slog(quiet).Lease(time.Minute).Use(mw)
		queue.Handle(w, func(ctx context.Context, g Greet) error {
			started = time.Now()
			<-ctx.Done()
			got <- outcome{time.Now(), context.Cause(ctx), queue.Holding(ctx)}
			return ctx.Err()
		})
		if err := queue.Dispatch(t.Context(), q, Greet{}); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		errc := make(chan error, 1)
		go func() { errc <- w.Run(ctx) }()
		var o outcome
		select {
		case o = <-got:
		case <-time.After(10 * expiry):
			t.Fatalf("the handler ran on for %s while its slot could not be renewed", 10*expiry)
		}
		if !errors.Is(o.cause, queue.ErrLeaseLost) || !errors.Is(o.holding, queue.ErrLeaseLost) {
			t.Fatalf("handler cancelled with %v (Holding %v), want ErrLeaseLost", o.cause, o.holding)
		}
		if want := started.Add(expiry - margin); !o.at.Equal(want) {
			t.Errorf("handler cancelled %s after it took its slot, want the expiry %s minus the margin %s", o.at.Sub(started), expiry, margin)
		}
		q.mu.Lock()
		deadlines := q.deadlines
		q.mu.Unlock()
		if len(deadlines) == 0 || !deadlines[0].Equal(started.Add(expiry-margin)) {
			t.Errorf("renewal deadlines %v, want the first at the slot's expiry minus the margin", deadlines)
		}
		cancel()
		close(q.release)
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	})
}
