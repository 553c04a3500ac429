package contracttest

import (
	"context"
	"errors"

	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// tickJob is the periodic job of the cross-process checks.
type tickJob struct{}

// blockJob is the job the cross-process cancel check runs.
type blockJob struct{}

// quiet discards the Workers' logs.
var quiet = slog.New(slog.DiscardHandler)

// runWorker runs w until the returned stop is called; stop waits for Run
// to return and fails t if it returned an unexpected error.
func runWorker(t *testing.T, w *queue.Worker) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("Worker.Run: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// testProcesses checks the Worker-level promises that involve several
// processes over one store (Harness.Peer): periodic ticks enqueued once,
// leader failover within TTL plus one renew, and a cancel from another
// process reaching a running handler.
func (s *suite) testProcesses(t *testing.T) {
	if s.h.Peer == nil {
		t.Skip("Harness.Peer is nil: the driver is not shared by several processes")
	}
	checkAs(s, t, "PeriodicOncePerTick", func(t *testing.T, q queue.Queue, _ driver.Scheduler) {
		// Two processes register the same periodic job every second; over
		// ten consecutive ticks each is handled exactly once.
		var mu sync.Mutex
		ticks := map[time.Time]int{}
		handles := []queue.Queue{q, s.h.Peer(t, q)}
		var stops []func()
		for _, h := range handles {
			w := queue.NewWorker(h).Slog(quiet).Queues("ticks")
			queue.Handle(w, func(ctx context.Context, _ tickJob) error {
				j, _ := queue.JobFromContext(ctx)
				at, err := time.Parse(time.RFC3339Nano, j.Meta[queue.MetaPeriodicTick])
				if err != nil {
					t.Errorf("periodic job %s carries tick %q: %v", j.ID, j.Meta[queue.MetaPeriodicTick], err)
				}
				mu.Lock()
				ticks[at]++
				mu.Unlock()
				return nil
			})
			if err := queue.Periodic(w, "every-second", queue.Every(time.Second), tickJob{}, queue.OnQueue("ticks")); err != nil {
				t.Fatal(err)
			}
			stops = append(stops, runWorker(t, w))
		}
		const want = 10
		seen := func() []time.Time {
			mu.Lock()
			defer mu.Unlock()
			return slices.SortedFunc(func(yield func(time.Time) bool) {
				for at := range ticks {
					if !yield(at) {
						return
					}
				}
			}, time.Time.Compare)
		}
		deadline := time.Now().Add(want*time.Second + 2*patience)
		for len(seen()) < want+1 && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
		}
		for _, stop := range stops {
			stop()
		}
		at := seen()
		if len(at) < want {
			t.Fatalf("%d ticks handled in %s, want at least %d: %v", len(at), want*time.Second+2*patience, want, at)
		}
		mu.Lock()
		defer mu.Unlock()
		for i, a := range at {
			if n := ticks[a]; n != 1 {
				t.Errorf("tick %s was handled %d times, want once", a.Format(time.RFC3339), n)
			}
			if i > 0 && a.Sub(at[i-1]) != time.Second {
				t.Errorf("ticks %s and %s are not one second apart: a tick was missed while both processes ran", at[i-1].Format(time.RFC3339), a.Format(time.RFC3339))
			}
		}
	})
	checkAs(s, t, "LeaderFailover", func(t *testing.T, q queue.Queue, l driver.Scheduler) {
		// A holder that dies without releasing (a killed process) is
		// replaced by a Leader on another process within TTL plus one
		// renew interval.
		const ttl, renew = time.Second, 250 * time.Millisecond
		start := time.Now()
		if ok, err := l.AcquireLease(t.Context(), "failover", "killed", ttl); !ok || err != nil {
			t.Fatalf("AcquireLease = %v, %v", ok, err)
		}
		leader, err := queue.NewLeader(s.h.Peer(t, q), "failover", queue.LeaderTTL(ttl), queue.LeaderRenew(renew), queue.LeaderLogger(quiet))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- leader.Run(ctx) }()
		defer func() { cancel(); <-done }()
		for !leader.IsLeader() {
			select {
			case <-leader.Changed():
			case <-time.After(patience):
				t.Fatalf("no Leader took over a dead holder's lease within %s", patience)
			}
		}
		// The bound is the rule plus the time of one store round trip
		// for slow CI machines; the rule itself is TTL + renew.
		if took, bound := time.Since(start), ttl+renew+renew; took > bound {
			t.Errorf("the dead holder was replaced after %s, want within TTL + renew (%s)", took, ttl+renew)
		}
	})
	checkAs(s, t, "CancelRunningFromPeer", func(t *testing.T, q queue.Queue, _ driver.Controller) {
		started := make(chan string, 1)
		cause := make(chan error, 1)
		w := queue.NewWorker(q).Slog(quiet).Queues("block")
		queue.Handle(w, func(ctx context.Context, _ blockJob) error {
			j, _ := queue.JobFromContext(ctx)
			started <- j.ID
			<-ctx.Done()
			cause <- context.Cause(ctx)
			return ctx.Err()
		})
		stop := runWorker(t, w)
		defer stop()
		id, _, err := queue.Enqueue(t.Context(), q, blockJob{}, queue.OnQueue("block"))
		if err != nil {
			t.Fatal(err)
		}
		select {
		case <-started:
		case <-time.After(patience):
			t.Fatalf("the job did not start within %s", patience)
		}
		peer := s.h.Peer(t, q)
		at := time.Now()
		if was, err := queue.CancelJob(t.Context(), peer, id); err != nil || was != queue.StateRunning {
			t.Fatalf("CancelJob from another process = %v, %v; want running, nil", was, err)
		}
		select {
		case err := <-cause:
			if !errors.Is(err, queue.ErrCancelled) {
				t.Errorf("the handler's context ended with %v, want ErrCancelled", err)
			}
			// The rule is one cancel poll (queue.DefaultCancelPoll); the
			// bound adds room for a loaded machine.
			if took, bound := time.Since(at), 2*time.Second; took > bound {
				t.Errorf("the cancel reached the handler after %s, want within a second", took)
			}
		case <-time.After(patience):
			t.Fatalf("a cancel from another process did not reach the running handler within %s", patience)
		}
		stop()
		if insp := inspector(peer); insp != nil {
			if info, err := insp.GetJob(t.Context(), id); err == nil && info.State != queue.StateCancelled {
				t.Errorf("after the cancel the job is %s, want cancelled", info.State)
			}
		}
	})
}
