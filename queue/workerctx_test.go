package queue_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/meridianjobs/meridian/memqueue"
	"github.com/meridianjobs/meridian/queue"
	"github.com/meridianjobs/meridian/queue/driver"
)

// The worker names itself to the driver when it reserves, so a driver
// that keeps an attempt history records which worker ran each attempt:
// the ID the worker registry lists.
func TestWorkerNamesItselfWhenReserving(t *testing.T) {
	t.Parallel()
	q := memqueue.New()
	w := queue.NewWorker(q).Slog(quiet).MaxAttempts(2).Backoff(time.Millisecond)
	queue.Handle(w, func(ctx context.Context, g Greet) error { return errors.New("always") })
	stop := startWorker(t, w)
	id, _, err := queue.Enqueue(context.Background(), q, Greet{})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the job dead-lettered", func() bool { return len(deadLetters(t, q)) == 1 })
	workers, err := q.Workers(context.Background())
	if err != nil || len(workers) != 1 {
		t.Fatalf("Workers = %v, %v; want the one worker", workers, err)
	}
	info, err := q.GetJob(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	stop()
	if len(info.History) != 2 {
		t.Fatalf("History = %+v, want 2 attempts", info.History)
	}
	for _, a := range info.History {
		if a.Worker != workers[0].ID {
			t.Errorf("attempt %d recorded worker %q, want the registry's %q", a.Attempt, a.Worker, workers[0].ID)
		}
	}
}

func TestWorkerOf(t *testing.T) {
	ctx := context.Background()
	if got := driver.WorkerOf(ctx); got != "" {
		t.Errorf("WorkerOf(no worker) = %q", got)
	}
	if got := driver.WorkerOf(driver.WithWorker(ctx, "w-1")); got != "w-1" {
		t.Errorf("WorkerOf(WithWorker(w-1)) = %q", got)
	}
}
