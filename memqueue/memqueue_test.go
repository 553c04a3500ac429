package memqueue_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/meridianjobs/meridian/contracttest"
	"github.com/meridianjobs/meridian/internal/testutil"
	"github.com/meridianjobs/meridian/memqueue"
	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

func TestContract(t *testing.T) {
	contracttest.Run(t, contracttest.Harness{
		New: func(t *testing.T) queue.Queue { return memqueue.New() },
	})
}

// TestContractWithoutRetention runs the suite on a queue that keeps no
// acked jobs, the configuration Caps.NoDoneRetention describes.
func TestContractWithoutRetention(t *testing.T) {
	contracttest.Run(t, contracttest.Harness{
		New:  func(t *testing.T) queue.Queue { return memqueue.New(memqueue.WithRetention(0)) },
		Caps: contracttest.Capabilities{NoDoneRetention: "WithRetention(0) deletes acked jobs at once"},
	})
}

// clock is a settable time source for WithClock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)} }

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func mustPush(t *testing.T, q *memqueue.Queue, j queue.Job) {
	t.Helper()
	if err := q.Push(t.Context(), j); err != nil {
		t.Fatalf("Push: %v", err)
	}
}

func mustReserve(t *testing.T, q *memqueue.Queue, queueName string, max int, lease time.Duration) []queue.Job {
	t.Helper()
	jobs, err := q.Reserve(t.Context(), []string{queueName}, max, lease)
	if err != nil {
		t.Fatalf("Reserve: %v", err)
	}
	return jobs
}

func TestRetentionKeepsLastAcked(t *testing.T) {
	t.Parallel()
	q := memqueue.New(memqueue.WithRetention(3))
	var acked []string
	for i := range 5 {
		j := queue.Job{ID: fmt.Sprintf("job-%d", i)}
		mustPush(t, q, j)
		r := mustReserve(t, q, queue.DefaultQueue, 1, time.Minute)
		if err := testutil.Ack(t.Context(), q, r[0].Lease()); err != nil {
			t.Fatalf("Ack: %v", err)
		}
		acked = append(acked, j.ID)
	}
	page, err := q.ListJobs(t.Context(), driver.JobFilter{State: queue.StateDone})
	if err != nil {
		t.Fatalf("ListJobs: %v", err)
	}
	var got []string
	for _, j := range page.Jobs {
		got = append(got, j.ID)
	}
	slices.Reverse(acked) // listed newest first
	if fmt.Sprint(got) != fmt.Sprint(acked[:3]) {
		t.Fatalf("done jobs %v, want the last three acked, newest first, %v", got, acked[:3])
	}
	slices.Reverse(acked)
	if _, err := q.GetJob(t.Context(), acked[0]); !errors.Is(err, queue.ErrNotFound) {
		t.Fatalf("GetJob of an acked job past retention: %v, want ErrNotFound", err)
	}
	// Pushing a retained done job's ID stores a new job; the ring must
	// not later delete the new one when the old slot is reused.
	mustPush(t, q, queue.Job{ID: acked[2]})
	for i := range 3 {
		mustPush(t, q, queue.Job{ID: fmt.Sprintf("more-%d", i), Queue: "other"})
		r := mustReserve(t, q, "other", 1, time.Minute)
		if err := testutil.Ack(t.Context(), q, r[0].Lease()); err != nil {
			t.Fatalf("Ack: %v", err)
		}
	}
	info, err := q.GetJob(t.Context(), acked[2])
	if err != nil || info.State != queue.StateReady {
		t.Fatalf("GetJob(re-pushed %s) = %v, %v; want it ready", acked[2], info.State, err)
	}
}

func TestExpiredLeaseIsLostBeforeRedelivery(t *testing.T) {
	t.Parallel()
	c := newClock()
	q := memqueue.New(memqueue.WithClock(c.now))
	mustPush(t, q, queue.Job{ID: "a"})
	r := mustReserve(t, q, queue.DefaultQueue, 1, time.Second)
	c.advance(time.Second)
	if err := testutil.Ack(t.Context(), q, r[0].Lease()); !errors.Is(err, queue.ErrLeaseLost) {
		t.Fatalf("Ack after the lease expired: %v, want ErrLeaseLost", err)
	}
	again := mustReserve(t, q, queue.DefaultQueue, 1, time.Second)
	if len(again) != 1 || again[0].Attempts != 2 {
		t.Fatalf("after expiry reserved %+v, want the job with Attempts 2", again)
	}
}

func TestMetricsKeepTheLastHour(t *testing.T) {
	t.Parallel()
	c := newClock()
	q := memqueue.New(memqueue.WithClock(c.now))
	q.ObserveRun(driver.RunRecord{Queue: "m", Start: c.now(), Runtime: time.Second, Outcome: driver.OutcomeDone})
	c.advance(30 * time.Minute)
	q.ObserveRun(driver.RunRecord{Queue: "m", Start: c.now(), Runtime: 3 * time.Second, Outcome: driver.OutcomeFailed})
	q.ObserveRun(driver.RunRecord{Queue: "m", Start: c.now().Add(-2 * time.Hour), Outcome: driver.OutcomeDone}) // too old: dropped

	points, err := q.Metrics(t.Context(), c.now().Add(-time.Hour))
	if err != nil || len(points) != 2 || points[0].Processed != 1 || points[1].Failed != 1 {
		t.Fatalf("Metrics = %+v, %v; want two points, oldest first", points, err)
	}
	stats, _ := q.QueueStats(t.Context())
	if len(stats) != 1 || stats[0].Processed != 1 || stats[0].Failed != 1 || stats[0].AvgRuntime != 2*time.Second {
		t.Fatalf("QueueStats = %+v, want 1 processed, 1 failed, 2s average runtime", stats)
	}

	c.advance(31 * time.Minute) // the first minute leaves the window
	points, _ = q.Metrics(t.Context(), time.Time{})
	if len(points) != 1 || points[0].Failed != 1 {
		t.Fatalf("Metrics an hour later = %+v, want only the newer point", points)
	}
	c.advance(time.Hour)
	if stats, _ := q.QueueStats(t.Context()); len(stats) != 0 {
		t.Fatalf("QueueStats with no jobs and no metrics in the window = %+v, want none", stats)
	}
}

func TestWorkersExpire(t *testing.T) {
	t.Parallel()
	c := newClock()
	q := memqueue.New(memqueue.WithClock(c.now))
	if err := q.Heartbeat(t.Context(), driver.WorkerInfo{ID: "w"}); err != nil {
		t.Fatal(err)
	}
	c.advance(59 * time.Second)
	if ws, _ := q.Workers(t.Context()); len(ws) != 1 {
		t.Fatalf("Workers after 59s = %+v, want the entry", ws)
	}
	c.advance(2 * time.Second)
	if ws, _ := q.Workers(t.Context()); len(ws) != 0 {
		t.Fatalf("Workers after 61s without a heartbeat = %+v, want none", ws)
	}
}

// TestWaitWakes checks that each way a job becomes ready wakes a blocked
// Wait long before its max.
func TestWaitWakes(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		setup func(t *testing.T, q *memqueue.Queue) func()
	}{
		{"push", func(t *testing.T, q *memqueue.Queue) func() {
			return func() { mustPush(t, q, queue.Job{}) }
		}},
		{"delayed job comes due", func(t *testing.T, q *memqueue.Queue) func() {
			return func() { mustPush(t, q, queue.Job{AvailableAt: time.Now().Add(100 * time.Millisecond)}) }
		}},
		{"lease expires", func(t *testing.T, q *memqueue.Queue) func() {
			mustPush(t, q, queue.Job{})
			mustReserve(t, q, queue.DefaultQueue, 1, 300*time.Millisecond)
			return func() {}
		}},
		{"nack", func(t *testing.T, q *memqueue.Queue) func() {
			mustPush(t, q, queue.Job{})
			r := mustReserve(t, q, queue.DefaultQueue, 1, time.Hour)
			return func() { _ = testutil.Nack(t.Context(), q, r[0].Lease(), time.Time{}, "again") }
		}},
		{"retry dead", func(t *testing.T, q *memqueue.Queue) func() {
			mustPush(t, q, queue.Job{ID: "d"})
			r := mustReserve(t, q, queue.DefaultQueue, 1, time.Hour)
			_ = testutil.Fail(t.Context(), q, r[0].Lease(), "dead")
			return func() { _ = q.RetryDead(t.Context(), "d") }
		}},
		{"resume", func(t *testing.T, q *memqueue.Queue) func() {
			_ = q.Pause(t.Context(), queue.DefaultQueue)
			mustPush(t, q, queue.Job{})
			return func() { _ = q.Resume(t.Context(), queue.DefaultQueue) }
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			q := memqueue.New()
			act := c.setup(t, q)
			done := make(chan error, 1)
			go func() { done <- q.Wait(t.Context(), []string{"elsewhere", queue.DefaultQueue}, time.Minute) }()
			testutil.Eventually(t, 10*time.Second, func() bool { return memqueue.Waiting(q, queue.DefaultQueue) }, "Wait did not block")
			act()
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("Wait: %v", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("Wait did not wake")
			}
			testutil.Eventually(t, 10*time.Second, func() bool { return len(mustReserve(t, q, queue.DefaultQueue, 1, time.Hour)) > 0 },
				"Wait woke but no job became reservable")
		})
	}
}

func TestOpen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, err := queue.Open(ctx, "memory://")
	if err != nil {
		t.Fatalf("Open(memory://): %v", err)
	}
	b, err := queue.Open(ctx, "memory://?retention=10")
	if err != nil {
		t.Fatalf("Open(memory://?retention=10): %v", err)
	}
	if _, ok := a.(*memqueue.Queue); !ok {
		t.Fatalf("Open returned %T, want *memqueue.Queue", a)
	}
	if err := a.Push(ctx, queue.Job{}); err != nil {
		t.Fatal(err)
	}
	if n, _ := b.Len(ctx, ""); n != 0 {
		t.Fatalf("a second Open sees %d jobs of the first, want its own empty queue", n)
	}
	for _, bad := range []string{"memory://?retention=-1", "memory://?retention=many", "memory://?size=3"} {
		if _, err := queue.Open(ctx, bad); err == nil {
			t.Errorf("Open(%q) succeeded, want an error", bad)
		}
	}
}
