package redisqueue_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/meridianjobs/meridian/internal/testutil"
	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/redisqueue"
)

type ping struct{ N int }

// TestWorkerWokenWithoutPolling runs a Worker whose poll is an hour: a
// job pushed while it waits runs at once all the same, because the push
// wakes its Wait.
func TestWorkerWokenWithoutPolling(t *testing.T) {
	t.Parallel()
	rdb := client(t)
	q := newQueue(t, rdb, prefix(t, rdb))
	ran := make(chan int, 2)
	w := queue.NewWorker(q).Poll(time.Hour).Slog(slog.New(slog.DiscardHandler))
	queue.Handle(w, func(ctx context.Context, p ping) error { ran <- p.N; return nil })
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("Worker.Run: %v", err)
		}
	}()
	for n := 1; n <= 2; n++ {
		// The second push comes after the first job ran, when the Worker
		// has nothing to do but wait.
		if err := queue.Dispatch(t.Context(), q, ping{n}); err != nil {
			t.Fatal(err)
		}
		select {
		case got := <-ran:
			if got != n {
				t.Fatalf("ran job %d, want %d", got, n)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("job %d did not run within 10s under an hour's poll", n)
		}
	}
	// The last ack is flushed after its handler returned.
	testutil.Eventually(t, 10*time.Second, func() bool {
		n, err := q.Len(t.Context(), "")
		return err == nil && n == 0
	}, "jobs left after both ran")
}

// TestCloseEndsWait checks that Close wakes a Wait in progress, so a
// Worker's fetcher never outlives its queue by the Wait's max.
func TestCloseEndsWait(t *testing.T) {
	t.Parallel()
	rdb := client(t)
	q, err := redisqueue.New(rdb, redisqueue.WithPrefix(prefix(t, rdb)))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- q.Wait(t.Context(), []string{"w"}, time.Hour) }()
	// Close once the Wait is subscribed: a push made then would wake it.
	testutil.Eventually(t, 10*time.Second, func() bool {
		n, err := rdb.PubSubNumSub(t.Context(), "{"+q.Prefix()+"}:wake").Result()
		return err == nil && n["{"+q.Prefix()+"}:wake"] == 1
	}, "the Wait did not subscribe")
	q.Close()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Wait still blocked 10s after Close")
	}
}
