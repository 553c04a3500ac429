package postgres_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meridianjobs/meridian/internal/testutil"
	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/sqlqueue/postgres"
)

type Ping struct{ N int }

// A Worker whose Poll is far away handles a job pushed by another process,
// and its retry after a short backoff, through Wait: NOTIFY for the push,
// the due-time lookup for the retry.
func TestWorkerWokenWithoutPolling(t *testing.T) {
	t.Parallel()
	dsn := testDSN(t)
	q := newQueue(t, dsn)
	other := openQueue(t, dsn, q.Table())

	var attempts atomic.Int32
	handled := make(chan time.Time, 2)
	w := queue.NewWorker(q).Poll(safetyPoll).Backoff(300 * time.Millisecond).MaxRetry(3).
		Slog(slog.New(slog.NewTextHandler(io.Discard, nil)))
	queue.Handle(w, func(ctx context.Context, p Ping) error {
		handled <- time.Now()
		if attempts.Add(1) == 1 {
			return errors.New("first attempt fails")
		}
		return nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	runDone := make(chan error, 1)
	go func() { runDone <- w.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-runDone; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	testutil.Eventually(t, wakeBound, func() bool { return postgres.Waiting(q) > 0 }, "the worker did not Wait")

	pushed := time.Now()
	if err := queue.Dispatch(t.Context(), other, Ping{1}); err != nil {
		t.Fatal(err)
	}
	var first, second time.Time
	select {
	case first = <-handled:
	case <-time.After(wakeBound):
		t.Fatalf("the job was not handled within %v of its push (Poll %v)", wakeBound, safetyPoll)
	}
	select {
	case second = <-handled:
	case <-time.After(wakeBound + 300*time.Millisecond):
		t.Fatalf("the retry was not handled within %v of its 300ms backoff (Poll %v)", wakeBound, safetyPoll)
	}
	if gap := second.Sub(first); gap < 300*time.Millisecond {
		t.Fatalf("retry %v after the first attempt, before its 300ms backoff", gap)
	}
	t.Logf("handled %v after the push, retried %v after the first attempt", first.Sub(pushed), second.Sub(first))
}
